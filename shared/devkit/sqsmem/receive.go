package sqsmem

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// received is a message as a receive answers it.
type received struct {
	MessageId              string
	ReceiptHandle          string
	MD5OfBody              string
	Body                   string
	Attributes             map[string]string    `json:",omitempty"`
	MD5OfMessageAttributes string               `json:",omitempty"`
	MessageAttributes      map[string]attrValue `json:",omitempty"`
}

// receiveInput is ReceiveMessage's input.
type receiveInput struct {
	QueueUrl                    string
	AttributeNames              []string
	MessageSystemAttributeNames []string
	MessageAttributeNames       []string
	MaxNumberOfMessages         *int
	VisibilityTimeout           *int
	WaitTimeSeconds             *int
}

func (in receiveInput) check() error {
	switch {
	case in.MaxNumberOfMessages != nil && (*in.MaxNumberOfMessages < 1 || *in.MaxNumberOfMessages > 10):
		return invalidParameter("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", *in.MaxNumberOfMessages)
	case in.WaitTimeSeconds != nil && (*in.WaitTimeSeconds < 0 || *in.WaitTimeSeconds > 20):
		return invalidParameter("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *in.WaitTimeSeconds)
	case in.VisibilityTimeout != nil && (*in.VisibilityTimeout < 0 || *in.VisibilityTimeout > 43200):
		return invalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", *in.VisibilityTimeout)
	}
	return nil
}

// receiveMessage takes up to MaxNumberOfMessages receivable messages,
// waiting up to WaitTimeSeconds (or the queue's
// ReceiveMessageWaitTimeSeconds) for one: a send, a visibility timeout
// ending or a delay passing wakes it.
func (s *Server) receiveMessage(r *http.Request, body []byte) (any, error) {
	var in receiveInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := in.check(); err != nil {
		return nil, err
	}
	n := 1
	if in.MaxNumberOfMessages != nil {
		n = *in.MaxNumberOfMessages
	}
	var deadline time.Time
	for {
		s.mu.Lock()
		q, err := s.lookup(in.QueueUrl)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		now := s.opts.Now()
		if deadline.IsZero() {
			wait := q.intAttr("ReceiveMessageWaitTimeSeconds")
			if in.WaitTimeSeconds != nil {
				wait = *in.WaitTimeSeconds
			}
			deadline = now.Add(time.Duration(wait) * time.Second)
		}
		out := s.take(q, n, in, now)
		if len(out) > 0 || !now.Before(deadline) {
			s.mu.Unlock()
			return map[string][]received{"Messages": out}, nil
		}
		wake, until := q.wake, deadline
		if next := q.nextVisible(now); !next.IsZero() && next.Before(until) {
			until = next
		}
		s.mu.Unlock()
		t := time.NewTimer(until.Sub(now))
		select {
		case <-wake:
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return map[string][]received{"Messages": {}}, nil
		}
		t.Stop()
	}
}

// take receives up to n receivable messages, moving to the dead-letter
// queue those received maxReceiveCount times already; s.mu is held.
func (s *Server) take(q *queue, n int, in receiveInput, now time.Time) []received {
	vis := q.intAttr("VisibilityTimeout")
	if in.VisibilityTimeout != nil {
		vis = *in.VisibilityTimeout
	}
	policy, perr := parseRedrive(q.attrs["RedrivePolicy"])
	var dlq *queue
	if perr == nil {
		dlq = s.byARN(policy.target)
	}
	out := []received{}
	var copies []*message
	for _, m := range s.chaos.order(q, n, now) {
		if len(out) == n {
			break
		}
		if dlq != nil && m.receives >= policy.max {
			q.remove(m)
			moved := *m
			moved.gone, moved.delayed, moved.visibleAt = false, false, time.Time{}
			dlq.add(&moved)
			continue
		}
		m.receives++
		if m.receives == 1 {
			m.firstRecv = now
		}
		m.delayed = false
		m.visibleAt = now.Add(time.Duration(vis) * time.Second)
		s.seq++
		m.receipt = m.key + "#" + strconv.FormatUint(s.seq, 36) + "-" + newID()[:8]
		out = append(out, s.view(m, in))
		if d := s.chaos.duplicate(m, now); d != nil {
			copies = append(copies, d)
		}
	}
	for _, d := range copies {
		q.add(d)
	}
	q.compact()
	return out
}

// view is a message as a receive answers it, with the attributes asked for.
func (s *Server) view(m *message, in receiveInput) received {
	v := received{MessageId: m.id, ReceiptHandle: m.receipt, MD5OfBody: md5Hex(m.body), Body: m.body}
	names := append(slices.Clone(in.AttributeNames), in.MessageSystemAttributeNames...)
	system := map[string]string{
		"SenderId": m.sender, "SentTimestamp": strconv.FormatInt(m.sent.UnixMilli(), 10),
		"ApproximateReceiveCount":          strconv.Itoa(m.receives),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstRecv.UnixMilli(), 10),
	}
	if t, ok := m.system["AWSTraceHeader"]; ok && t.StringValue != nil {
		system["AWSTraceHeader"] = *t.StringValue
	}
	for k, val := range system {
		if slices.Contains(names, "All") || slices.Contains(names, k) {
			if v.Attributes == nil {
				v.Attributes = map[string]string{}
			}
			v.Attributes[k] = val
		}
	}
	v.MessageAttributes = selectAttrs(m.attrs, in.MessageAttributeNames)
	v.MD5OfMessageAttributes = attrsMD5(v.MessageAttributes)
	return v
}

// message finds the message a receipt handle names, if it is still there.
func (q *queue) message(handle string) (*message, error) {
	id, _, ok := strings.Cut(handle, "#")
	if !ok {
		return nil, &apiError{code: codeReceiptInvalid, msg: "The input receipt handle \"" + handle + "\" is not a valid receipt handle."}
	}
	return q.byID[id], nil
}

func (s *Server) deleteMessage(_ *http.Request, body []byte) (any, error) {
	type input struct {
		queueRef
		ReceiptHandle string
	}
	return onQueue(s, body, func(q *queue, in input) (any, error) { return struct{}{}, q.delete(in.ReceiptHandle) })
}

// delete deletes the message a receipt handle of it names (any of its
// handles, as moto; deleting one already deleted succeeds, as SQS).
func (q *queue) delete(handle string) error {
	m, err := q.message(handle)
	if err != nil {
		return err
	}
	if m != nil {
		q.remove(m)
		q.compact()
	}
	return nil
}

// batchEntry is an entry of DeleteMessageBatch or ChangeMessageVisibilityBatch.
type batchEntry struct {
	Id                string
	ReceiptHandle     string
	VisibilityTimeout int
}

// batchResult is a batch's answer.
type batchResult struct {
	Successful []map[string]string
	Failed     []batchFailure
}

// eachEntry checks a batch and applies do to each entry, under s.mu.
func (s *Server) eachEntry(body []byte, do func(q *queue, e batchEntry) error) (any, error) {
	type input struct {
		queueRef
		Entries []batchEntry
	}
	return onQueue(s, body, func(q *queue, in input) (any, error) {
		ids := make([]string, len(in.Entries))
		for i, e := range in.Entries {
			ids[i] = e.Id
		}
		if err := checkBatch(ids); err != nil {
			return nil, err
		}
		out := batchResult{Successful: []map[string]string{}, Failed: []batchFailure{}}
		for _, e := range in.Entries {
			if err := do(q, e); err != nil {
				out.Failed = append(out.Failed, failure(e.Id, err))
				continue
			}
			out.Successful = append(out.Successful, map[string]string{"Id": e.Id})
		}
		return out, nil
	})
}

func (s *Server) deleteMessageBatch(_ *http.Request, body []byte) (any, error) {
	return s.eachEntry(body, func(q *queue, e batchEntry) error { return q.delete(e.ReceiptHandle) })
}

func (s *Server) changeVisibility(_ *http.Request, body []byte) (any, error) {
	type input struct {
		queueRef
		ReceiptHandle     string
		VisibilityTimeout int
	}
	return onQueue(s, body, func(q *queue, in input) (any, error) {
		return struct{}{}, s.hide(q, in.ReceiptHandle, in.VisibilityTimeout)
	})
}

func (s *Server) changeVisibilityBatch(_ *http.Request, body []byte) (any, error) {
	return s.eachEntry(body, func(q *queue, e batchEntry) error { return s.hide(q, e.ReceiptHandle, e.VisibilityTimeout) })
}

// hide sets an in-flight message's visibility timeout, counted from now;
// s.mu is held.
func (s *Server) hide(q *queue, handle string, secs int) error {
	if secs < 0 || secs > 43200 {
		return invalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200.", secs)
	}
	m, err := q.message(handle)
	if err != nil {
		return err
	}
	now := s.opts.Now()
	if m == nil {
		return &apiError{code: codeReceiptInvalid, msg: "The input receipt handle \"" + handle + "\" is not a valid receipt handle."}
	}
	if m.receives == 0 || !m.visibleAt.After(now) { // SQS's; moto changes it anyway
		return &apiError{code: codeMessageNotInflight, msg: "The message referred to isn't in flight."}
	}
	m.visibleAt = now.Add(time.Duration(secs) * time.Second)
	if secs == 0 {
		q.signal()
	}
	return nil
}
