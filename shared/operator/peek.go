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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/queue"
)

// peekHide is how long a peeked message is hidden from other readers if the
// peek cannot make it visible again (a crash between the two calls).
const peekHide = 30

// Peek reads up to max messages of a queue without consuming them: it
// receives them with a short visibility timeout, so successive receives walk
// through the queue instead of returning the same messages, then makes them
// visible again at once (ChangeMessageVisibility 0), so a redrive or another
// reader right after is not held up. If that second call is lost, they
// reappear after 30 s: nothing is ever deleted. Each receive counts in a
// message's ApproximateReceiveCount (harmless on a DLQ or an inbox, which
// have no redrive policy of their own).
func (o *Operator) Peek(ctx context.Context, queueURL string, max int) ([]types.Message, error) {
	var out []types.Message
	for len(out) < max {
		res, err := o.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &queueURL, MaxNumberOfMessages: int32(min(10, max-len(out))), VisibilityTimeout: peekHide,
			WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			o.unhide(queueURL, out)
			return nil, fmt.Errorf("peek %s: %w", queueURL, err)
		}
		if len(res.Messages) == 0 {
			break
		}
		out = append(out, res.Messages...)
	}
	o.unhide(queueURL, out)
	return out, nil
}

// unhide makes peeked messages visible again, ten per request, even if the
// caller's context ended.
func (o *Operator) unhide(queueURL string, msgs []types.Message) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for batch := range slices.Chunk(msgs, 10) {
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(batch))
		for i, m := range batch {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)),
				ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}
		}
		// If this is lost, the messages reappear after peekHide seconds.
		_, _ = o.sqs.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &queueURL, Entries: entries})
	}
}

// DeadLetter is a message of a dead-letter queue, as its consumer rejected it.
type DeadLetter struct {
	ID           string    `json:"id"`
	Body         string    `json:"body"`
	RejectReason string    `json:"rejectReason"` // "" for a message SQS moved after too many receives
	SourceQueue  string    `json:"sourceQueue"`
	SentAt       time.Time `json:"sentAt"`
}

// DLQ is one queue's dead-letter queue: how many messages it holds, and the
// first of them.
type DLQ struct {
	Queue    string       `json:"queue"` // the short name Redrive takes
	Name     string       `json:"name"`
	Depth    int          `json:"depth"`
	Messages []DeadLetter `json:"messages"`
}

// DeadLetters lists every dead-letter queue with its depth and up to max of
// its messages (read with Peek; an empty DLQ costs one request).
func (o *Operator) DeadLetters(ctx context.Context, max int) ([]DLQ, error) {
	var out []DLQ
	for _, q := range o.Topology.Queues() {
		url, err := o.QueueURL(ctx, q.DLQName)
		if err != nil {
			return nil, err
		}
		d, err := queue.NewSender(o.sqs).Depth(ctx, url)
		if err != nil {
			return nil, err
		}
		dlq := DLQ{Queue: strings.TrimPrefix(q.Name, o.Topology.Prefix+"-"), Name: q.DLQName, Depth: d.Visible + d.InFlight}
		if d.Visible > 0 {
			// No more than it holds: the receive after the last message
			// would wait a second for nothing.
			msgs, err := o.Peek(ctx, url, min(max, d.Visible))
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				dlq.Messages = append(dlq.Messages, deadLetter(m))
			}
		}
		out = append(out, dlq)
	}
	return out, nil
}

func deadLetter(m types.Message) DeadLetter {
	attr := func(name string) string {
		if v, ok := m.MessageAttributes[name]; ok {
			return aws.ToString(v.StringValue)
		}
		return ""
	}
	d := DeadLetter{ID: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), RejectReason: attr("RejectReason"),
		SourceQueue: attr("SourceQueue")}
	if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		d.SentAt = time.UnixMilli(ms)
	}
	return d
}

// ErrNoAlertInbox means the deployment has no alert inbox queue: its alerts
// go to the alert topic's subscribers only.
var ErrNoAlertInbox = errors.New("no alert inbox queue")

// AlertInboxName is the queue subscribed to the alert topic (a local stack
// and the CDK stack make it).
func (o *Operator) AlertInboxName() string { return o.Topology.AlertInbox() }

// Alerts reads up to max failure events from the alert inbox queue without
// consuming them (Peek, up to the messages it holds), newest first;
// ErrNoAlertInbox if there is none.
func (o *Operator) Alerts(ctx context.Context, max int) ([]alert.Failure, error) {
	url, err := o.QueueURL(ctx, o.AlertInboxName())
	var missing *types.QueueDoesNotExist
	if errors.As(err, &missing) || (err != nil && strings.Contains(err.Error(), "NonExistentQueue")) {
		return nil, ErrNoAlertInbox
	}
	if err != nil {
		return nil, err
	}
	d, err := queue.NewSender(o.sqs).Depth(ctx, url)
	if err != nil {
		return nil, err
	}
	msgs, err := o.Peek(ctx, url, min(max, d.Visible))
	if err != nil {
		return nil, err
	}
	var out []alert.Failure
	for _, m := range msgs {
		if f, ok := decodeAlert(aws.ToString(m.Body)); ok {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b alert.Failure) int { return b.At.Compare(a.At) })
	return out, nil
}

// decodeAlert reads a failure event, raw or in SNS's envelope.
func decodeAlert(body string) (alert.Failure, bool) {
	var env struct {
		Type    string
		Message string
	}
	if json.Unmarshal([]byte(body), &env) == nil && env.Type == "Notification" {
		body = env.Message
	}
	var f alert.Failure
	err := json.Unmarshal([]byte(body), &f)
	return f, err == nil && f.OrderID != ""
}
