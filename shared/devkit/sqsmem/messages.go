package sqsmem

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"time"
	"unicode/utf8"
)

// sendInput is a message to send: SendMessage's input, or a batch entry.
type sendInput struct {
	Id                      string // a batch entry's
	MessageBody             *string
	DelaySeconds            *int
	MessageAttributes       map[string]attrValue
	MessageSystemAttributes map[string]attrValue
}

// sent is what a send answers: SendMessage's output, or a batch's entry.
type sent struct {
	Id                           string `json:",omitempty"`
	MessageId                    string
	MD5OfMessageBody             string
	MD5OfMessageAttributes       string `json:",omitempty"`
	MD5OfMessageSystemAttributes string `json:",omitempty"`
}

// batchFailure is a batch entry's failure.
type batchFailure struct {
	Id          string
	SenderFault bool
	Code        string
	Message     string
}

func (s *Server) sendMessage(_ *http.Request, body []byte) (any, error) {
	type input struct {
		queueRef
		sendInput
	}
	return onQueue(s, body, func(q *queue, in input) (any, error) {
		m, err := s.newMessage(q, in.sendInput)
		if err != nil {
			return nil, err
		}
		q.add(m)
		return sentOf(m, ""), nil
	})
}

func (s *Server) sendMessageBatch(_ *http.Request, body []byte) (any, error) {
	var in struct {
		QueueUrl string
		Entries  []sendInput
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	ids := make([]string, len(in.Entries))
	total := 0
	for i, e := range in.Entries {
		ids[i] = e.Id
		if e.MessageBody != nil {
			total += len(*e.MessageBody) + attrsSize(e.MessageAttributes)
		}
	}
	if err := checkBatch(ids); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if total > q.intAttr("MaximumMessageSize") {
		return nil, &apiError{code: codeBatchTooLong, msg: fmt.Sprintf("Batch requests cannot be longer than %d bytes. You have sent %d bytes.", q.intAttr("MaximumMessageSize"), total)}
	}
	out := struct {
		Successful []sent
		Failed     []batchFailure
	}{Successful: []sent{}, Failed: []batchFailure{}}
	for _, e := range in.Entries {
		m, err := s.newMessage(q, e)
		if err != nil {
			out.Failed = append(out.Failed, failure(e.Id, err))
			continue
		}
		q.add(m)
		out.Successful = append(out.Successful, sentOf(m, e.Id))
	}
	return out, nil
}

func sentOf(m *message, id string) sent {
	return sent{Id: id, MessageId: m.id, MD5OfMessageBody: md5Hex(m.body), MD5OfMessageAttributes: m.attrsMD5,
		MD5OfMessageSystemAttributes: m.sysAttrsMD5}
}

func failure(id string, err error) batchFailure {
	e, ok := err.(*apiError)
	if !ok {
		e = &apiError{code: "InternalError", msg: err.Error()}
	}
	return batchFailure{Id: id, SenderFault: ok, Code: e.code, Message: e.msg}
}

// newMessage checks a message to send and builds it; s.mu is held.
func (s *Server) newMessage(q *queue, in sendInput) (*message, error) {
	if in.MessageBody == nil || *in.MessageBody == "" {
		return nil, &apiError{code: codeMissingParameter, msg: "The request must contain the parameter MessageBody."}
	}
	body := *in.MessageBody
	if size, most := len(body)+attrsSize(in.MessageAttributes), q.intAttr("MaximumMessageSize"); size > most {
		return nil, invalidParameter("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", most)
	}
	if !validBody(body) {
		return nil, &apiError{code: "InvalidMessageContents", msg: "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF"}
	}
	delay := q.intAttr("DelaySeconds")
	if in.DelaySeconds != nil {
		delay = *in.DelaySeconds
	}
	if delay < 0 || delay > 900 {
		return nil, invalidParameter("Value %d for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.", delay)
	}
	if err := checkAttrs(in.MessageAttributes); err != nil {
		return nil, err
	}
	if err := checkAttrs(in.MessageSystemAttributes); err != nil {
		return nil, err
	}
	now := s.opts.Now()
	id := newID()
	m := &message{id: id, key: id, body: body, attrs: in.MessageAttributes, system: in.MessageSystemAttributes,
		sender: s.opts.SenderID, sent: now, visibleAt: now.Add(time.Duration(delay) * time.Second), delayed: delay > 0,
		attrsMD5: attrsMD5(in.MessageAttributes), sysAttrsMD5: attrsMD5(in.MessageSystemAttributes)}
	return m, nil
}

// validBody says whether b is UTF-8 whose every character is one SQS takes
// (#x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF): U+FFFD
// itself is one (ranging over a string yields it for an invalid byte too,
// so the two are told apart by the byte's size).
func validBody(b string) bool {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRuneInString(b[i:])
		switch {
		case r == utf8.RuneError && size == 1, r < 0x20 && r != 0x9 && r != 0xA && r != 0xD, r == 0xFFFE, r == 0xFFFF:
			return false
		}
		i += size
	}
	return true
}

var batchID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// checkBatch refuses a batch SQS refuses whole: empty, over ten entries,
// an id repeated or malformed.
func checkBatch(ids []string) error {
	switch {
	case len(ids) == 0:
		return &apiError{code: codeEmptyBatch, msg: "There should be at least one entry in the request."}
	case len(ids) > 10:
		return &apiError{code: codeTooManyEntries, msg: fmt.Sprintf("Maximum number of entries per request are 10. You have sent %d.", len(ids))}
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if !batchID.MatchString(id) {
			return &apiError{code: codeInvalidBatchID, msg: "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long."}
		}
		if seen[id] {
			return &apiError{code: codeIdsNotDistinct, msg: fmt.Sprintf("Id %s repeated.", id)}
		}
		seen[id] = true
	}
	return nil
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
