package submission

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// eventReceives is how often an event for an order not stored yet is tried
// (the order may be behind it in the queue) before it is rejected with the
// reason.
const eventReceives = 3

// event takes an event for an order (outcome.Recorder.Event): it completes
// the wait for it, or is kept for the wait, or, with a token, records an
// async step's outcome. What the completion made ready, and whom to tell,
// goes to the Scheduler as a recorded reply, as an Agent's outcome does. An
// event the order can never take (ended, not waited for, already received
// under another eventId, a stale token) is rejected to the DLQ with the
// reason; a repeat of one taken is a no-op.
func (h *Handler) event(ctx context.Context, rec events.SQSMessage, e message.Event) error {
	task, _, err := h.store.Load(ctx, e.OrderID)
	if errors.Is(err, statestore.ErrNotFound) {
		if n, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"]); n < eventReceives {
			return err // it may be behind the event: tried again
		}
		return message.Invalid("event for %s: no such order (after %d receives)", e.OrderID, eventReceives)
	}
	if err != nil {
		return err
	}
	def, err := h.catalog.For(ctx, e.OrderID, task.Workflow, task.Version)
	if err != nil {
		return err
	}
	d, err := outcome.Recorder{Store: h.store}.Event(ctx, def, outcome.Event{OrderID: e.OrderID, Name: e.Event,
		EventID: e.EventID, Token: e.Token, Data: e.Data, Error: e.Error, Now: h.Now()})
	switch {
	case outcome.IsRefused(err):
		h.metrics.Count(metrics.EventsRefused, 1, map[string]any{"OrderID": e.OrderID, "Event": e.Event})
		return message.Invalid("%v", err)
	case err != nil:
		return err
	case d.Repeat:
		h.log.Info("event taken before: nothing more to do", "order_id", e.OrderID, "event", e.Event, "event_id", e.EventID)
		return nil
	case d.Kept:
		h.metrics.Count(metrics.EventsReceived, 1, map[string]any{"OrderID": e.OrderID, "Event": e.Event, "Kept": true})
		h.log.Info("event kept: the order reaches its wait later", "order_id", e.OrderID, "event", e.Event)
		return nil
	case d.Stale:
		return nil
	}
	h.metrics.Count(metrics.EventsReceived, 1, map[string]any{"OrderID": e.OrderID, "Event": e.Event})
	attempt := 0
	if t, err := outcome.ParseToken(e.Token); err == nil {
		attempt = t.Attempt
	}
	return h.follow(ctx, def, e.OrderID, d.Ref, d.Name, attempt, e.Error, d.Recorded, e.Data)
}

// follow hands a recorded outcome to the Scheduler, which tells the order's
// caller (and the operator, for a refusal) and starts what it made ready:
// one route for what follows every outcome. An end is counted here, where it
// was recorded. If the send is lost, what was made ready is found unclaimed
// at its pickup deadline (a refusal's alert, at its due time).
func (h *Handler) follow(ctx context.Context, def workflow.Definition, orderID string, ref workflow.Ref, name string,
	attempt int, refusal string, rec outcome.Recorded, result ...json.RawMessage) error {
	if rec.State.Ended() {
		notify.CountEnd(h.metrics, orderID, rec.State)
	}
	reply := message.AgentReply{Kind: message.KindReply, OrderID: orderID, Step: ref.Index, Undo: ref.Undo, StepName: name,
		Attempt: attempt, OK: refusal == "", Error: refusal, ReplyTo: rec.ReplyQueue, Round: rec.Round,
		Workflow: def.Name, Version: def.Version, Recorded: true, State: string(rec.State), Ready: message.Starts(rec.Ready)}
	if len(result) > 0 && refusal == "" {
		reply.Result = result[0]
	}
	return h.send.SendJSON(ctx, h.cfg.SchedulerQueueURL, reply, 0)
}
