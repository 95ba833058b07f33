package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/topology"
)

// DLQReadMax is the most messages of one dead-letter queue sasctl dlq reads
// (list, show, a message by its id).
const DLQReadMax = 1000

// listPeekMax is how many messages of each DLQ DLQSummaries reads to find
// the oldest.
const listPeekMax = 100

// ErrNoDeadLetter means no message of the dead-letter queue has the id.
var ErrNoDeadLetter = errors.New("no such message")

// DLQMessage is a message of a dead-letter queue, read without consuming
// it: its id, what its body names, why it was set aside and how long ago.
type DLQMessage struct {
	ID string `json:"id"`
	// Kind is the body's kind (event, cancel, schedule, reply…); "" for an
	// order, which has none.
	Kind    string `json:"kind,omitempty"`
	OrderID string `json:"orderId,omitempty"` // the order its body names
	Event   string `json:"event,omitempty"`   // an event's name and id
	EventID string `json:"eventId,omitempty"`
	// RejectReason is why its consumer rejected it (its RejectReason
	// attribute, without the "invalid message: " every one starts with);
	// "" for a message SQS moved after too many receives (its consumer
	// failed on it).
	RejectReason string `json:"rejectReason"`
	SourceQueue  string `json:"sourceQueue,omitempty"`
	// ReceiveCount is SQS's ApproximateReceiveCount before this read.
	ReceiveCount int `json:"receiveCount"`
	// SentAt is when it was sent to the DLQ (a rejected message), or to
	// its queue (one SQS moved); Age is the time since.
	SentAt time.Time `json:"sentAt,omitzero"`
	Age    Duration  `json:"age"`
	Body   string    `json:"body,omitempty"` // the whole body: a message shown alone
}

// DLQContents are one dead-letter queue's messages (up to DLQReadMax).
type DLQContents struct {
	Queue    string       `json:"queue"` // the short name: orders, events, agent-NAME-requests…
	Name     string       `json:"name"`
	Depth    int          `json:"depth"` // visible and in flight
	Messages []DLQMessage `json:"messages"`
}

// DLQSummary is a dead-letter queue's depth and its oldest message's age.
type DLQSummary struct {
	Queue        string    `json:"queue"`
	Name         string    `json:"name"`
	Depth        int       `json:"depth"`
	OldestSentAt time.Time `json:"oldestSentAt,omitzero"`
	OldestAge    Duration  `json:"oldestAge,omitzero"`
}

// DLQSummaries lists every dead-letter queue with its depth and the age of
// the oldest of its messages read (DeadLetters: up to 100 each, without
// consuming them; an empty DLQ costs one request).
func (o *Operator) DLQSummaries(ctx context.Context) ([]DLQSummary, error) {
	dlqs, err := o.DeadLetters(ctx, listPeekMax)
	if err != nil {
		return nil, err
	}
	now := o.Now()
	out := make([]DLQSummary, 0, len(dlqs))
	for _, d := range dlqs {
		s := DLQSummary{Queue: d.Queue, Name: d.Name, Depth: d.Depth}
		for _, m := range d.Messages {
			if !m.SentAt.IsZero() && (s.OldestSentAt.IsZero() || m.SentAt.Before(s.OldestSentAt)) {
				s.OldestSentAt = m.SentAt.UTC()
			}
		}
		if !s.OldestSentAt.IsZero() {
			s.OldestAge = age(now, s.OldestSentAt)
		}
		out = append(out, s)
	}
	return out, nil
}

// dlqOf is the queue a short name (orders, events, agent-NAME-requests…)
// names, and its DLQ's URL.
func (o *Operator) dlqOf(ctx context.Context, short string) (topology.Queue, string, error) {
	q, err := o.queueByShortName(short)
	if err != nil {
		return q, "", err
	}
	url, err := o.QueueURL(ctx, q.DLQName)
	return q, url, err
}

// DLQMessages reads a queue's dead-letter queue without consuming its
// messages (Peek), up to max, oldest first; each without its body.
func (o *Operator) DLQMessages(ctx context.Context, short string, max int) (DLQContents, error) {
	c, err := o.peekDLQ(ctx, short, max)
	for i := range c.Messages {
		c.Messages[i].Body = ""
	}
	return c, err
}

// peekDLQ is DLQMessages with the bodies.
func (o *Operator) peekDLQ(ctx context.Context, short string, max int) (DLQContents, error) {
	q, url, err := o.dlqOf(ctx, short)
	if err != nil {
		return DLQContents{}, err
	}
	d, err := queue.NewSender(o.sqs).Depth(ctx, url)
	if err != nil {
		return DLQContents{}, err
	}
	res := DLQContents{Queue: short, Name: q.DLQName, Depth: d.Visible + d.InFlight, Messages: []DLQMessage{}}
	if d.Visible == 0 {
		return res, nil
	}
	msgs, err := o.Peek(ctx, url, min(max, d.Visible))
	if err != nil {
		return res, err
	}
	now := o.Now()
	for _, m := range msgs {
		d := o.dlqMessage(m, now)
		o.followPointer(ctx, &d)
		res.Messages = append(res.Messages, d)
	}
	slices.SortStableFunc(res.Messages, func(a, b DLQMessage) int { return a.SentAt.Compare(b.SentAt) })
	return res, nil
}

// followPointer names what an SQS Extended Client pointer message refused
// to a DLQ was about (its order, its event), read from the body it points
// to; a body that cannot be read leaves it as it is (its reason says why).
func (o *Operator) followPointer(ctx context.Context, d *DLQMessage) {
	bucket, key, ok := offload.Pointer(d.Body)
	if !ok || o.s3 == nil {
		return
	}
	b, err := offload.New(o.s3, bucket).Fetch(ctx, bucket, key, message.MaxOrderBytes+message.MaxEventBytes)
	if err != nil {
		return
	}
	var head struct {
		Kind    string `json:"kind"`
		Event   string `json:"event"`
		EventID string `json:"eventId"`
	}
	if json.Unmarshal(b, &head) == nil {
		d.Kind, d.OrderID, d.Event, d.EventID = head.Kind, message.IDOf(b, o.Workflows), head.Event, head.EventID
	}
}

// DLQMessage is one message of a queue's dead-letter queue, with its whole
// body, read without consuming it; ErrNoDeadLetter if none of its first
// DLQReadMax messages has the id.
func (o *Operator) DLQMessage(ctx context.Context, short, id string) (DLQMessage, error) {
	c, err := o.peekDLQ(ctx, short, DLQReadMax)
	if err != nil {
		return DLQMessage{}, err
	}
	for _, m := range c.Messages {
		if m.ID == id {
			return m, nil
		}
	}
	return DLQMessage{}, fmt.Errorf("%w %s in %s", ErrNoDeadLetter, id, c.Name)
}

// dlqMessage is a received DLQ message as DLQMessage shows it, at now: an
// order named by its workflow's id field (of o.Workflows, if known).
func (o *Operator) dlqMessage(m types.Message, now time.Time) DLQMessage {
	d := deadLetter(m)
	var head struct {
		Kind    string `json:"kind"`
		Event   string `json:"event"`
		EventID string `json:"eventId"`
	}
	_ = json.Unmarshal([]byte(d.Body), &head) // a body that is not JSON names nothing
	out := DLQMessage{ID: d.ID, Kind: head.Kind, OrderID: message.IDOf([]byte(d.Body), o.Workflows), Event: head.Event, EventID: head.EventID,
		RejectReason: strings.TrimPrefix(d.RejectReason, "invalid message: "), SourceQueue: d.SourceQueue, SentAt: utc(d.SentAt), Body: d.Body}
	if n, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil {
		out.ReceiveCount = max(n-1, 0) // less this read's own
	}
	if !out.SentAt.IsZero() {
		out.Age = age(now, out.SentAt)
	}
	return out
}

// age is the time from then to now, to the second.
func age(now, then time.Time) Duration {
	return Duration(max(now.Sub(then), 0).Round(time.Second))
}
