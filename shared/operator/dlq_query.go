package operator

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// DLQQuery selects the messages of a dead-letter queue a redrive moves:
// a message is kept if it matches every part given (its zero value keeps
// every message).
type DLQQuery struct {
	OrderIDs []string // the order its body names is one of these
	Prefix   string   // that order's id starts with it
	// Kind is its body's kind: order, event, cancel, schedule, reply…
	Kind string
	// Reason is text its consumer's reject reason holds, in any case;
	// NoReason keeps the messages SQS moved after too many receives (their
	// consumer failed on them: none was rejected).
	Reason    string
	OlderThan time.Duration // sent to the DLQ longer ago than this
}

// NoReason is the DLQQuery.Reason of the messages no consumer rejected.
const NoReason = "none"

// IsZero reports whether q keeps every message.
func (q DLQQuery) IsZero() bool {
	return len(q.OrderIDs) == 0 && q.Prefix == "" && q.Kind == "" && q.Reason == "" && q.OlderThan == 0
}

// Keeps reports whether q keeps message m (as read at now).
func (q DLQQuery) Keeps(m DLQMessage, now time.Time) bool {
	kind := m.Kind
	if kind == "" && m.OrderID != "" {
		kind = "order"
	}
	reason := strings.ToLower(m.RejectReason)
	return (len(q.OrderIDs) == 0 || slices.Contains(q.OrderIDs, m.OrderID)) &&
		(q.Prefix == "" || (m.OrderID != "" && strings.HasPrefix(m.OrderID, q.Prefix))) &&
		(q.Kind == "" || strings.EqualFold(q.Kind, kind)) &&
		(q.Reason == "" || (q.Reason == NoReason && reason == "") ||
			(q.Reason != NoReason && reason != "" && strings.Contains(reason, strings.ToLower(q.Reason)))) &&
		(q.OlderThan == 0 || (!m.SentAt.IsZero() && now.Sub(m.SentAt) > q.OlderThan))
}

// RedriveMatching is RedrivePaced for the messages q keeps only: it takes
// the DLQ's messages (up to DLQReadMax, hidden for five minutes) until
// max of them match, makes the others visible again at once (Left counts
// them), then moves those that match; a dry run lists them.
func (o *Operator) RedriveMatching(ctx context.Context, short string, max int, q DLQQuery, opts BulkOptions) (DLQRedriven, error) {
	if q.IsZero() {
		return o.RedrivePaced(ctx, short, max, opts)
	}
	qu, src, dlq, res, err := o.redriveEnds(ctx, short)
	if err != nil {
		return res, err
	}
	now := o.Now()
	if opts.DryRun {
		c, err := o.DLQMessages(ctx, short, DLQReadMax)
		res.DryRun, res.Messages = true, []DLQMessage{}
		for _, m := range c.Messages {
			if q.Keeps(m, now) && len(res.Messages) < max {
				res.Messages = append(res.Messages, m)
			} else {
				res.Left++
			}
		}
		return res, err
	}
	var kept, others, again []types.Message
	seen := map[string]bool{}
	err = o.takeEach(ctx, dlq, qu.DLQName, func(m types.Message) bool {
		switch id := aws.ToString(m.MessageId); {
		case seen[id]: // SQS delivers at least once: a message is counted once
			again = append(again, m)
		case q.Keeps(o.described(ctx, m, now), now):
			kept = append(kept, m)
		default:
			others = append(others, m)
		}
		seen[aws.ToString(m.MessageId)] = true
		return len(kept) < max && len(seen) < DLQReadMax
	})
	o.unhide(dlq, append(others, again...))
	res.Left = len(others)
	if err != nil {
		o.unhide(dlq, kept)
		return res, err
	}
	return res, o.move(ctx, qu, src, dlq, kept, &res, opts.waiter())
}

// described is a received DLQ message as DLQMessage shows it, its pointer
// followed (the order or event it is about, offloaded).
func (o *Operator) described(ctx context.Context, m types.Message, now time.Time) DLQMessage {
	d := o.dlqMessage(m, now)
	o.followPointer(ctx, &d)
	return d
}
