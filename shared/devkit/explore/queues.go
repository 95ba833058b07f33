package explore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// queues are SQS as the explorer plays it: every message sent is held until
// the explorer delivers it (at least once, in any order, perhaps twice),
// drops it, or delays it; what a handler sends lands here as its send
// returns. It implements the part of the SQS client queue.Sender uses.
type queues struct {
	mu   sync.Mutex
	seq  int
	now  func() time.Time
	msgs []*msg
	// refused are the first sends of the product's handlers refused as SQS
	// refuses them (refuses); outside, those of the explorer's own senders
	// (a defect of the explorer's).
	refused, outside []string
}

// msg is one message in a queue.
type msg struct {
	id        string
	queue     string // the queue's name (the URL's last part)
	body      string
	visibleAt time.Time // not before (a delay, or a visibility timeout after a failed delivery)
	receives  int
	sentAt    time.Time
	attrs     map[string]types.MessageAttributeValue
}

func queueName(url string) string {
	for i := len(url) - 1; i >= 0; i-- {
		if url[i] == '/' {
			return url[i+1:]
		}
	}
	return url
}

func (q *queues) add(url, body string, delay int32, attrs map[string]types.MessageAttributeValue) {
	q.seq++
	now := q.now()
	q.msgs = append(q.msgs, &msg{id: "m" + strconv.Itoa(q.seq), queue: queueName(url), body: body, sentAt: now,
		visibleAt: now.Add(time.Duration(delay) * time.Second), attrs: attrs})
}

// SendMessage implements queue.API.
func (q *queues) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	if _, ok := in.MessageAttributes["RejectReason"]; ok {
		if a := actorOf(ctx); a != nil {
			a.rejected = true // queue.Sender.Reject: the message it handles goes to a DLQ
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.refuses(aws.ToString(in.QueueUrl), aws.ToString(in.MessageBody), in.MessageAttributes, actorOf(ctx) != nil); err != nil {
		return nil, err
	}
	q.add(aws.ToString(in.QueueUrl), aws.ToString(in.MessageBody), in.DelaySeconds, in.MessageAttributes)
	return &sqs.SendMessageOutput{}, nil
}

// SendMessageBatch implements queue.API.
func (q *queues) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(in.Entries) > 10 {
		return nil, fmt.Errorf("SendMessageBatch of %d entries: SQS takes 10", len(in.Entries))
	}
	for _, e := range in.Entries {
		if err := q.refuses(aws.ToString(in.QueueUrl), aws.ToString(e.MessageBody), e.MessageAttributes, actorOf(ctx) != nil); err != nil {
			return nil, err
		}
	}
	for _, e := range in.Entries {
		q.add(aws.ToString(in.QueueUrl), aws.ToString(e.MessageBody), e.DelaySeconds, e.MessageAttributes)
	}
	return &sqs.SendMessageBatchOutput{}, nil
}

// GetQueueAttributes implements queue.API: the visible and delayed counts.
func (q *queues) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	name, now := queueName(aws.ToString(in.QueueUrl)), q.now()
	visible, hidden := 0, 0
	for _, m := range q.msgs {
		switch {
		case m.queue != name:
		case m.visibleAt.After(now):
			hidden++
		default:
			visible++
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		string(types.QueueAttributeNameApproximateNumberOfMessages):           strconv.Itoa(visible),
		string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible): strconv.Itoa(hidden),
	}}, nil
}

// visible are the messages of the named queues a consumer can receive now,
// oldest first.
func (q *queues) visible(names ...string) []*msg {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	var out []*msg
	for _, m := range q.msgs {
		if !m.visibleAt.After(now) && slices.Contains(names, m.queue) {
			out = append(out, m)
		}
	}
	return out
}

// in are the messages of the named queue, visible or not.
func (q *queues) in(name string) []*msg {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*msg
	for _, m := range q.msgs {
		if m.queue == name {
			out = append(out, m)
		}
	}
	return out
}

// remove takes m out of its queue (delivered and deleted, or lost).
func (q *queues) remove(m *msg) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = slices.DeleteFunc(q.msgs, func(x *msg) bool { return x == m })
}

// hide makes m invisible until at (a delivery in flight, a failed one's
// visibility timeout, a delay).
func (q *queues) hide(m *msg, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m.visibleAt = at
}

// nextVisible is when the next hidden message of the named queues becomes
// visible (zero: none).
func (q *queues) nextVisible(names ...string) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	var next time.Time
	for _, m := range q.msgs {
		if m.visibleAt.After(now) && slices.Contains(names, m.queue) && (next.IsZero() || m.visibleAt.Before(next)) {
			next = m.visibleAt
		}
	}
	return next
}

func sendInput(url, body string, delay int32) *sqs.SendMessageInput {
	return &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body), DelaySeconds: delay}
}

// maxMessageBytes is SQS's limit on a message: its body, and its
// attributes' names, types and values.
const maxMessageBytes = 256 << 10

// refuses is the error SQS answers a send of body with attrs to url with
// (nil: it takes it): over its size, or with a character SQS takes not; it
// notes the first few, a handler's (byHandler) apart from the explorer's
// own. q.mu is held.
func (q *queues) refuses(url, body string, attrs map[string]types.MessageAttributeValue, byHandler bool) error {
	size, valid := len(body), sqsTakes(body)
	for name, a := range attrs {
		size += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
		valid = valid && sqsTakes(aws.ToString(a.StringValue))
	}
	var err error
	switch {
	case size > maxMessageBytes:
		err = fmt.Errorf("InvalidParameterValue: Message must be shorter than %d bytes (%d to %s)", maxMessageBytes, size, queueName(url))
	case !valid:
		err = fmt.Errorf("InvalidMessageContents: Invalid characters found (to %s: %s)", queueName(url), brief(body))
	default:
		return nil
	}
	switch {
	case !byHandler && len(q.outside) < 3:
		q.outside = append(q.outside, err.Error())
	case byHandler && len(q.refused) < 3:
		q.refused = append(q.refused, err.Error())
	}
	return err
}

// sqsTakes reports whether every character of s is one SQS takes: #x9 |
// #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF, in
// valid UTF-8 (U+FFFD itself included).
func sqsTakes(s string) bool {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\ufffd"):
			return false
		case r == 0x9, r == 0xA, r == 0xD, r >= 0x20 && r < 0xD800, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000:
		default:
			return false
		}
	}
	return true
}
