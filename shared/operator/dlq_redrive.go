package operator

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// DLQRedriven says what a redrive moved, message by message.
type DLQRedriven struct {
	Redriven
	// DryRun: nothing moved; Messages are those it would move.
	DryRun   bool         `json:"dryRun,omitempty"`
	Messages []DLQMessage `json:"messages"` // each without its body
}

// RedriveMessage moves one message, by its id, from a queue's DLQ back to
// the queue (its body only, without its reason). It walks the DLQ as Peek
// does (each message received hidden for 30 s), moves the one with the id,
// and makes the others visible again at once; ErrNoDeadLetter if none of
// the first DLQReadMax has it.
func (o *Operator) RedriveMessage(ctx context.Context, short, id string) (DLQRedriven, error) {
	q, src, dlq, res, err := o.redriveEnds(ctx, short)
	if err != nil {
		return res, err
	}
	var seen []types.Message
	defer func() { o.unhide(dlq, seen) }()
	for len(seen) < DLQReadMax {
		out, err := o.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &dlq, MaxNumberOfMessages: 10, VisibilityTimeout: peekHide, WaitTimeSeconds: 1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			return res, fmt.Errorf("read %s: %w", q.DLQName, err)
		}
		if len(out.Messages) == 0 {
			break
		}
		for i, m := range out.Messages {
			if aws.ToString(m.MessageId) == id {
				seen = append(seen, out.Messages[:i]...)
				seen = append(seen, out.Messages[i+1:]...)
				return res, o.move(ctx, q, src, dlq, []types.Message{m}, &res, nil)
			}
		}
		seen = append(seen, out.Messages...)
	}
	return res, fmt.Errorf("%w %s in %s", ErrNoDeadLetter, id, q.DLQName)
}

// RedrivePaced is RedriveAll at most opts.Rate messages a second (0:
// unpaced; opts.Sleep waits, nil: a timer); opts.DryRun moves nothing and
// lists the messages it would move, read without consuming them
// (DLQMessages). Its context ended, it stops between two messages: those
// not moved are visible in the DLQ again at once.
func (o *Operator) RedrivePaced(ctx context.Context, short string, max int, opts BulkOptions) (DLQRedriven, error) {
	q, src, dlq, res, err := o.redriveEnds(ctx, short)
	if err != nil {
		return res, err
	}
	if opts.DryRun {
		c, err := o.DLQMessages(ctx, short, max)
		res.DryRun, res.Messages = true, c.Messages
		return res, err
	}
	taken, err := o.take(ctx, dlq, q.DLQName, max)
	if err != nil {
		return res, err
	}
	return res, o.move(ctx, q, src, dlq, taken, &res, opts.waiter())
}

// waiter is the wait between two moves at opts' rate (nil: unpaced).
func (opts BulkOptions) waiter() func(context.Context) error {
	d := pace(opts.Rate)
	if d <= 0 {
		return nil
	}
	sleep := opts.sleeper()
	return func(ctx context.Context) error { return sleep(ctx, d) }
}
