package submission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/sqsbatch"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/tracing"
	"github.com/sas-go/sas/shared/workflow"
)

// An event or a cancel may be read before its order is stored: sent right
// after it (a webhook), it can be in the same batch, or in another
// invocation's. It comes back sooner than the queue's visibility timeout
// would bring it (aheadRetries: hidden, not waited for in the invocation,
// which would hold up the rest of its poller's batches), then is rejected
// with the reason: about 10 s in all, at its fourth receive, one short of
// the queue's MaxReceiveCount of 5, so that a receive lost to a crash does
// not leave SQS to move it to the DLQ with no reason.
var aheadRetries = []time.Duration{time.Second, 3 * time.Second, 6 * time.Second}

// ahead is what becomes of what (an event or a cancel) for an order not
// stored yet (err): retried soon, or, after its last receive, rejected.
func ahead(rec events.SQSMessage, what string, err error) error {
	return comeBack(rec, aheadRetries, fmt.Errorf("%s: no such order yet (it may be behind): %w", what, err), func(n int) error {
		return message.Invalid("%s: no such order (after %d receives)", what, n)
	})
}

// comeBack is rec retried after its receive's wait in schedule (retry: why),
// or, after its last receive, reject's error (its receives).
func comeBack(rec events.SQSMessage, schedule []time.Duration, retry error, reject func(receives int) error) error {
	n, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	if n >= 1 && n <= len(schedule) {
		return sqsbatch.RetryIn(schedule[n-1], retry)
	}
	return reject(max(n, 1))
}

// noKeyRetries are when an event with data for a sealed order comes back
// to a Submission with no data key (its configuration lags a deploy that
// set kms: a minute or so): about 3.5 minutes in all, then it is rejected
// with the reason, one receive short of the queue's MaxReceiveCount, to be
// redriven from the DLQ (sasctl dlq redrive). Its data is kept in clear
// nowhere meanwhile.
var noKeyRetries = []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute}

// noKey is what becomes of an event with data for a sealed order that this
// Submission, with no data key, cannot seal: retried later, or, after its
// last receive, rejected.
func noKey(rec events.SQSMessage, orderID string) error {
	why := fmt.Sprintf("event for %s: its order's data is sealed, and this function has no data key (dataKey) to seal its event's data", orderID)
	return comeBack(rec, noKeyRetries, errors.New(why), func(n int) error {
		return message.Invalid("%s (after %d receives): redrive it (sasctl dlq redrive events --all) once every function has the deployment's kms key",
			why, n)
	})
}

// event takes an event for an order (outcome.Recorder.Event): it completes
// the wait for it, or is kept for the wait, or, with a token, records an
// async step's outcome. What the completion made ready, and whom to tell,
// goes to the Scheduler as a recorded reply, as an Agent's outcome does. An
// event the order can never take (ended, not waited for, already received
// under another eventId, a stale token) is rejected to the DLQ with the
// reason; a repeat of one taken is a no-op.
func (h *Handler) event(ctx context.Context, rec events.SQSMessage, e message.Event) error {
	// A body sent by pointer that Submission wrote over once it took it
	// (resealEvent) holds the event with its data in the product's form:
	// it is a repeat, or refused, never taken for that. Any other event
	// whose data is in that form is refused (take).
	_, key, byPointer := offload.Pointer(rec.Body)
	own := kept.Own(e.Data)
	repeatOnly := byPointer && offload.Incoming(key) && own
	if repeatOnly {
		e.Data, own = nil, false
	}
	stored, taken, err := h.take(ctx, rec, e, own, repeatOnly)
	if err != nil {
		return err
	}
	if taken && byPointer {
		h.resealEvent(ctx, key, e, stored)
	}
	return nil
}

// resealEvent writes an event of a sealed order that came by pointer, once
// taken, over the clear body its sender offloaded under incoming/ (key),
// its data as it was stored (stored: sealed, or the claim check of its
// sealed data), or, where that is not at hand (a callback's answer over
// the result limit, which is not kept), a sealed null: the bucket
// keeps no clear copy of it. If the pointer message comes again, what is
// there is taken for a repeat of the event, or refused
// (outcome.Event.RepeatOnly: the order was resubmitted since, say), never
// for its data. An event refused keeps its body for the DLQ's pointer, to
// expire with incoming/'s lifecycle; so does one whose data is under the
// inline limit for an order stored before its deployment sealed data (its
// record keeps the data in clear too). (Sealing new orders, body took a
// pointer under incoming/ only: sendersKey. Open only, sealData turned
// off, the body a sender offloaded is not written over: it expires with
// the bucket's lifecycle, as any sender's body of an unsealed order.)
func (h *Handler) resealEvent(ctx context.Context, key string, e message.Event, stored json.RawMessage) {
	if !h.sealsNew() || len(e.Data) == 0 {
		return // not sealing, or no data
	}
	err := func() error {
		covered, ok, err := h.kept.Covered(ctx, e.OrderID, kept.Stored(stored), func(ctx context.Context) (kept.Value, error) {
			return h.order(ctx, e.OrderID)
		})
		if err != nil || !ok {
			return err
		}
		e.Data = covered.JSON()
		b, err := message.Encode(e, 0)
		if err != nil {
			return err
		}
		return h.offload.Reseal(ctx, key, b)
	}()
	if err != nil {
		h.log.Warn(NotResealed, "order_id", e.OrderID, "event", e.Event, "key", key, "err", err)
	}
}

// order is the order as kept, read from the orders table.
func (h *Handler) order(ctx context.Context, orderID string) (kept.Value, error) {
	stored, err := h.store.Order(ctx, orderID)
	return kept.Stored([]byte(stored)), err
}

// take takes event e (event), a repeat of one taken only if repeatOnly, and
// says whether it took it (recorded, kept, a repeat), with its data as it
// was stored (nil: not kept by this delivery). Its data in the product's
// own form (own: kept.Own) is refused.
func (h *Handler) take(ctx context.Context, rec events.SQSMessage, e message.Event, own, repeatOnly bool) (json.RawMessage, bool, error) {
	h.log.Debug("event received", "order_id", e.OrderID, "event", e.Event, "event_id", e.EventID,
		"receive", rec.Attributes["ApproximateReceiveCount"], "sent", rec.Attributes["SentTimestamp"])
	task, _, err := h.store.Load(ctx, e.OrderID)
	if errors.Is(err, statestore.ErrNotFound) {
		return nil, false, ahead(rec, "event for "+e.OrderID, err)
	}
	if err != nil {
		return nil, false, err
	}
	def, err := h.catalog.For(ctx, e.OrderID, task.Workflow, task.Version)
	if err != nil {
		return nil, false, err
	}
	ctx, span := tracing.Join(ctx, task.Trace, "event "+e.Event) // what it starts goes on in its order's trace
	defer span.End()
	if own {
		return nil, false, message.Invalid("event for %s: its data is the product's own form (%s or %s): send the data itself", e.OrderID,
			kept.CheckMember, kept.SealedMember)
	}
	// Before keepData, which keeps the data as it came when it has no
	// sealer: an order another instance sealed (this one's configuration
	// lagging the deploy that set kms) has none of its data in clear.
	if task.Sealed && !h.kept.Seals() && len(e.Data) > 0 {
		return nil, false, noKey(rec, e.OrderID)
	}
	sent := len(e.Data)
	if e.Data, err = h.keepData(ctx, def, e); err != nil {
		return nil, false, err
	}
	d, err := outcome.Recorder{Store: h.store}.Event(ctx, def, outcome.Event{OrderID: e.OrderID, Name: e.Event,
		EventID: e.EventID, Token: e.Token, Data: e.Data, DataBytes: sent, Error: e.Error, Sender: rec.Attributes["SenderId"], Now: h.Now(),
		RepeatOnly: repeatOnly})
	switch {
	case outcome.IsRefused(err):
		h.metrics.Count(metrics.EventsRefused, 1, map[string]any{"OrderID": e.OrderID, "Event": e.Event})
		return nil, false, message.Invalid("%v", err)
	case err != nil:
		return nil, false, err
	}
	if d.Slot.Key != "" && h.slots != nil {
		// Its attempt ended: the slot of its agent's calls in flight it held
		// goes to the first in its key's line (else it ends at the
		// attempt's CompleteBy).
		if err := h.slotsOf().LetGo(ctx, d.Slot.Agent, d.Slot.Key, d.Slot.Holder, h.Now()); err != nil {
			h.log.Warn(keyline.NotLetGo, "order_id", e.OrderID, "key", d.Slot.Key, "holder", d.Slot.Holder, "err", err)
		}
	}
	switch {
	case d.Repeat:
		h.log.Info("event taken before: nothing more to do", "order_id", e.OrderID, "event", e.Event, "event_id", e.EventID)
		return e.Data, true, nil
	case d.Kept:
		h.metrics.Count(metrics.EventsReceived, 1, map[string]any{"OrderID": e.OrderID, "Event": e.Event, "Kept": true})
		h.log.Info("event kept: the order reaches its wait later", "order_id", e.OrderID, "event", e.Event)
		return e.Data, true, nil
	case d.Stale:
		return nil, false, nil
	}
	h.metrics.Count(metrics.EventsReceived, 1, map[string]any{"OrderID": e.OrderID, "Event": e.Event})
	return e.Data, true, h.follow(ctx, def, d.Outcome, d.Recorded, e.Data)
}

// follow hands outcome a, recorded as rec, to the Scheduler, which tells the
// order's caller (and the operator, for a refusal) and starts what it made
// ready: one route for what follows every outcome (an end was counted by
// the write that recorded it). If the send is lost, what was made ready is
// found unclaimed at its pickup deadline (a refusal's alert, at its due
// time).
func (h *Handler) follow(ctx context.Context, def workflow.Definition, a outcome.Attempt, rec outcome.Recorded, result json.RawMessage) error {
	return h.send.SendJSON(ctx, h.cfg.SchedulerQueueURL, outcome.Reply(def, a, rec, result, nil), 0)
}

// keepData is the event's data as it is recorded and sent on: itself, or
// sealed under its order's data key (a sealed order's), and, over the
// inline limit, its claim check, the data kept in the payload bucket first.
// Data over the workflow's result limit is left for the recorder to refuse
// as it refuses any.
func (h *Handler) keepData(ctx context.Context, def workflow.Definition, e message.Event) (json.RawMessage, error) {
	data := e.Data
	if len(data) == 0 || len(data) > def.Limit() {
		return data, nil
	}
	body := kept.Unsealed(data, nil)
	if h.kept.Seals() { // sealed under its order's data key, if its order is sealed
		order, err := h.order(ctx, e.OrderID)
		if err != nil {
			return nil, err
		}
		// Over the inline limit, in the object form, which Offload keeps
		// whatever its size.
		if body, err = h.kept.Seal(ctx, e.OrderID, order, data); err != nil {
			return nil, err
		}
	}
	if n := body.Len(); n > h.kept.Max() {
		return nil, message.Invalid("event for %s: its data is %d bytes, over the %d a deployment without a payload bucket takes (payloadBucket)",
			e.OrderID, n, h.kept.Max())
	}
	what := "events/" + e.Event
	if e.Token != "" {
		what = "callbacks"
	}
	v, err := h.kept.Offload(ctx, e.OrderID, what, body)
	return v.JSON(), err
}
