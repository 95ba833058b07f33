package client

import (
	"context"
	"time"

	"github.com/sas-go/sas/shared/operator"
)

// verdictEvery is how often an Await call looks.
const verdictEvery = 250 * time.Millisecond

// Verdict is what the pipeline made of an order or an event: Taken,
// Refused (with its reason and where it lies), or Pending.
type Verdict = operator.Verdict

// The verdicts.
const (
	Taken   = operator.Taken
	Refused = operator.Refused
	Pending = operator.Pending
)

// AwaitEvent waits up to wait for what Submission made of an event Signal
// sent at since (the time just before the call): Taken once the order has
// recorded it (kept for its wait, or taken by it), Refused once it is in
// the events DLQ, with the reason (no step waits for it, the order ended,
// a sender the wait does not take…), else Pending. It reads the order and
// the events DLQ (without consuming it) four times a second.
func (c *Client) AwaitEvent(ctx context.Context, s operator.Signalled, since time.Time, wait time.Duration) (Verdict, error) {
	return c.op.AwaitEvent(ctx, s, since, wait, verdictEvery)
}

// AwaitOrder waits up to wait for what Submission made of an order Submit
// sent at since (the order as sent to Submit): Taken once it is stored as
// sent, Refused once it is in the orders DLQ with the reason, else Pending.
func (c *Client) AwaitOrder(ctx context.Context, order any, since time.Time, wait time.Duration) (Verdict, error) {
	body, err := encode(order)
	if err != nil {
		return Verdict{}, &RejectedError{Reason: err.Error()}
	}
	vs, err := c.op.AwaitOrders(ctx, []string{string(body)}, since, wait, verdictEvery)
	if len(vs) == 0 {
		return Verdict{Verdict: Pending}, err
	}
	return vs[0], err
}
