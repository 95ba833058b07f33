package sqsmem

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// message is one message of a queue, as the server keeps it.
type message struct {
	id          string // its MessageId (a duplicate delivery's copy has its original's)
	key         string // the server's own name of it, unique: receipt handles name it
	body        string
	attrs       map[string]attrValue // message attributes
	system      map[string]attrValue // system attributes given at send (AWSTraceHeader)
	sender      string
	sent        time.Time
	visibleAt   time.Time // delayed until, then hidden until (in flight)
	delayed     bool      // visibleAt is the send's delay, not a receive's
	receives    int
	firstRecv   time.Time
	receipt     string // the latest receive's handle
	gone        bool   // deleted or moved; dropped from the slice at the next compaction
	attrsMD5    string
	sysAttrsMD5 string
}

// queue is one queue and its messages, in the order they were sent.
type queue struct {
	name     string
	arn      string
	url      string // as first created (the host of that request)
	created  time.Time
	modified time.Time
	attrs    map[string]string // settable attributes, as given
	msgs     []*message
	byID     map[string]*message // by key
	depth    depthView           // the depths as last reported (Unkind.DepthLag)
	gone     int
	wake     chan struct{} // closed and replaced when a message may have become receivable
}

// settable are the queue attributes CreateQueue and SetQueueAttributes take,
// with SQS's defaults.
var settable = map[string]string{
	"DelaySeconds": "0", "MaximumMessageSize": strconv.Itoa(MaxMessageSize), "MessageRetentionPeriod": "345600",
	"ReceiveMessageWaitTimeSeconds": "0", "VisibilityTimeout": "30", "RedrivePolicy": "", "RedriveAllowPolicy": "",
	"Policy": "", "KmsMasterKeyId": "", "KmsDataKeyReusePeriodSeconds": "300", "SqsManagedSseEnabled": "true",
}

func newQueue(name, arn, url string, now time.Time) *queue {
	q := &queue{name: name, arn: arn, url: url, created: now, modified: now, attrs: map[string]string{},
		byID: map[string]*message{}, wake: make(chan struct{})}
	for k, v := range settable {
		if v != "" {
			q.attrs[k] = v
		}
	}
	return q
}

// setAttrs checks and applies settable attributes.
func (q *queue) setAttrs(in map[string]string, now time.Time) error {
	for k, v := range in {
		if _, ok := settable[k]; !ok {
			return &apiError{code: codeInvalidAttributeName, msg: fmt.Sprintf("Unknown Attribute %s.", k)}
		}
		if err := checkAttr(k, v); err != nil {
			return err
		}
	}
	for k, v := range in {
		if v == "" && k == "RedrivePolicy" {
			delete(q.attrs, k)
			continue
		}
		q.attrs[k] = v
	}
	q.modified = now
	return nil
}

// checkAttr refuses an attribute value SQS would refuse.
func checkAttr(k, v string) error {
	bounds := map[string][2]int{"DelaySeconds": {0, 900}, "MaximumMessageSize": {1024, MaxMessageSize},
		"MessageRetentionPeriod": {60, 1209600}, "ReceiveMessageWaitTimeSeconds": {0, 20}, "VisibilityTimeout": {0, 43200}}
	if b, ok := bounds[k]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < b[0] || n > b[1] {
			return &apiError{code: codeInvalidAttributeValue, msg: fmt.Sprintf("Invalid value for the parameter %s.", k)}
		}
	}
	if k == "RedrivePolicy" && v != "" {
		if _, err := parseRedrive(v); err != nil {
			return err
		}
	}
	return nil
}

// redrive is a queue's RedrivePolicy.
type redrive struct {
	target string // the dead-letter queue's ARN
	max    int
}

// parseRedrive reads a RedrivePolicy; maxReceiveCount may be a number or a
// string, as SQS accepts both.
func parseRedrive(v string) (redrive, error) {
	var p struct {
		Target string          `json:"deadLetterTargetArn"`
		Max    json.RawMessage `json:"maxReceiveCount"`
	}
	bad := &apiError{code: codeInvalidAttributeValue, msg: "Invalid value for the parameter RedrivePolicy. Reason: Redrive policy is not a valid JSON map, or misses deadLetterTargetArn or maxReceiveCount."}
	if err := json.Unmarshal([]byte(v), &p); err != nil || p.Target == "" || len(p.Max) == 0 {
		return redrive{}, bad
	}
	s := string(p.Max)
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1000 {
		return redrive{}, bad
	}
	return redrive{target: p.Target, max: n}, nil
}

func (q *queue) intAttr(k string) int {
	n, _ := strconv.Atoi(q.attrs[k])
	return n
}

// signal wakes the long polls waiting on the queue.
func (q *queue) signal() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// add appends a message and wakes the long polls.
func (q *queue) add(m *message) {
	q.msgs = append(q.msgs, m)
	q.byID[m.key] = m
	q.signal()
}

// remove drops a message (deleted, or moved to its dead-letter queue); the
// slice keeps it until compact.
func (q *queue) remove(m *message) {
	if m.gone {
		return
	}
	m.gone = true
	delete(q.byID, m.key)
	q.gone++
}

// compact drops the removed messages from the slice once they are half of it.
func (q *queue) compact() {
	if q.gone <= 64 || q.gone <= len(q.msgs)/2 {
		return
	}
	kept := q.msgs[:0]
	for _, m := range q.msgs {
		if !m.gone {
			kept = append(kept, m)
		}
	}
	clear(q.msgs[len(kept):])
	q.msgs, q.gone = kept, 0
}

// counts are the queue's depths: receivable, in flight, delayed.
func (q *queue) counts(now time.Time) (visible, inFlight, delayed int) {
	for _, m := range q.msgs {
		switch {
		case m.gone:
		case !m.visibleAt.After(now):
			visible++
		case m.delayed:
			delayed++
		default:
			inFlight++
		}
	}
	return visible, inFlight, delayed
}

// nextVisible is when the earliest hidden message becomes receivable (zero:
// none is hidden).
func (q *queue) nextVisible(now time.Time) time.Time {
	var next time.Time
	for _, m := range q.msgs {
		if !m.gone && m.visibleAt.After(now) && (next.IsZero() || m.visibleAt.Before(next)) {
			next = m.visibleAt
		}
	}
	return next
}

// purge drops every message.
func (q *queue) purge() {
	for _, m := range q.msgs {
		m.gone = true
	}
	q.msgs, q.byID, q.gone = nil, map[string]*message{}, 0
}
