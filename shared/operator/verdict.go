package operator

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
)

// What the pipeline made of a message sent to it.
const (
	Taken   = "taken"   // the order is stored as sent; the event is recorded (Order.Events)
	Refused = "refused" // in its queue's DLQ, with the reason
	Pending = "pending" // neither yet, when the wait ran out
)

// Verdict is what the pipeline made of an order or an event sent to it.
type Verdict struct {
	OrderID string `json:"orderId"`
	Verdict string `json:"verdict"` // Taken, Refused or Pending
	// Reason is a refusal's RejectReason ("" for a message SQS moved after
	// too many receives).
	Reason    string `json:"reason,omitempty"`
	DLQ       string `json:"dlq,omitempty"`       // a refusal's queue, as sasctl dlq show takes it
	MessageID string `json:"messageId,omitempty"` // a refusal's id in the DLQ
}

// sentSlack is how much earlier than the caller's clock said a message was
// sent a DLQ's SentTimestamp may be (clocks differ) and still match it.
const sentSlack = 2 * time.Second

// AwaitEvent waits up to wait for what Submission made of an event Signal
// sent at since: Taken once the order records it (its Events has the
// eventId), Refused once the events DLQ holds it (the same message id, or
// the same order, event and eventId, sent there since), else Pending. It
// polls every, reading the order and peeking the events DLQ (Peek).
func (o *Operator) AwaitEvent(ctx context.Context, s Signalled, since time.Time, wait, every time.Duration) (Verdict, error) {
	v := Verdict{OrderID: s.OrderID, Verdict: Pending}
	short := "events"
	deadline := time.Now().Add(wait)
	for {
		task, _, err := o.Store.Load(ctx, s.OrderID)
		switch {
		case err == nil && task.Events[s.Event] == s.EventID:
			v.Verdict = Taken
			return v, nil
		case err != nil && !errors.Is(err, statestore.ErrNotFound):
			return v, err
		}
		c, err := o.peekDLQ(ctx, short, DLQReadMax)
		if err != nil {
			return v, err
		}
		for _, m := range c.Messages {
			if m.ID == s.MessageID || (m.Kind == message.KindEvent && m.OrderID == s.OrderID && m.Event == s.Event &&
				m.EventID == s.EventID && !m.SentAt.Before(since.Add(-sentSlack))) {
				return refused(v, short, m), nil
			}
		}
		if !sleepUntil(ctx, deadline, every) {
			return v, ctx.Err()
		}
	}
}

// AwaitOrders waits up to wait for what Submission made of the orders
// Submit sent at since (bodies: as sent): each Taken once it is stored as
// sent (a repeat of an order stored before is taken too), Refused once the
// orders DLQ holds it (an order with its id, sent there since), else
// Pending. It polls every, as AwaitEvent does.
func (o *Operator) AwaitOrders(ctx context.Context, bodies []string, since time.Time, wait, every time.Duration) ([]Verdict, error) {
	short := "orders"
	out := make([]Verdict, 0, len(bodies))
	sent := map[string]string{} // by order id, its body as stored
	for _, b := range bodies {
		if ord, err := message.DecodeOrder(asSent(b), o.Workflows); err == nil {
			sent[ord.OrderID] = ord.JSON()
			out = append(out, Verdict{OrderID: ord.OrderID, Verdict: Pending})
		}
	}
	deadline := time.Now().Add(wait)
	for {
		left := 0
		for i, v := range out {
			if v.Verdict != Pending {
				continue
			}
			stored, err := o.Store.Order(ctx, v.OrderID)
			switch {
			case err == nil && o.sameOrder(ctx, v.OrderID, stored, sent[v.OrderID]):
				out[i].Verdict = Taken
			case err != nil && !errors.Is(err, statestore.ErrNotFound):
				return out, err
			default:
				left++
			}
		}
		if left > 0 {
			c, err := o.peekDLQ(ctx, short, DLQReadMax)
			if err != nil {
				return out, err
			}
			for i, v := range out {
				j := slices.IndexFunc(c.Messages, func(m DLQMessage) bool {
					return m.Kind == "" && m.OrderID == v.OrderID && !m.SentAt.Before(since.Add(-sentSlack))
				})
				if v.Verdict == Pending && j >= 0 {
					out[i] = refused(v, short, c.Messages[j])
					left--
				}
			}
		}
		if left == 0 {
			return out, nil
		}
		if !sleepUntil(ctx, deadline, every) {
			return out, ctx.Err()
		}
	}
}

// refused is v refused by the DLQ's message m.
func refused(v Verdict, short string, m DLQMessage) Verdict {
	v.Verdict, v.Reason, v.DLQ, v.MessageID = Refused, m.RejectReason, short, m.ID
	return v
}

// sleepUntil sleeps every, or to deadline if sooner; false if the deadline
// has passed (or ctx ended) already.
func sleepUntil(ctx context.Context, deadline time.Time, every time.Duration) bool {
	d := min(time.Until(deadline), every)
	if d <= 0 || ctx.Err() != nil {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// sameOrder reports whether stored is the order sent (kept.Boundary.Same:
// a sealed one opened with the operator's own kms:Decrypt, read back from
// the bucket its claim check names, its deployment's whatever this operator
// was told). What cannot be read is not known to be it.
func (o *Operator) sameOrder(ctx context.Context, orderID, stored, sent string) bool {
	v := kept.Stored([]byte(stored))
	same, err := o.kept.Over(o.s3, cmp.Or(v.Bucket(), o.PayloadBucket)).Same(ctx, orderID, v, sent)
	if err == nil && !same { // its data rewritten by a move since?
		same, err = o.Store.WasSent(ctx, orderID, sent)
	}
	return err == nil && same
}
