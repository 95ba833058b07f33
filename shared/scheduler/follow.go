package scheduler

import (
	"context"
	"encoding/json"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/workflow"
)

// start starts records made ready: an agent step's request to its Agent, a
// wait or a timer armed; a wait or timer it completes at once (its event
// kept, its time come) is told to the order's caller, and what follows it
// started in turn.
func (h *Handler) start(ctx context.Context, def workflow.Definition, orderID string, refs []workflow.Ref, payload json.RawMessage) error {
	starter := outcome.Starter{Dispatch: h.dispatch, Store: h.store, Recorder: h.recorder, Now: h.Now, Log: h.log, Budget: h.budget,
		Kept: h.kept}
	done, err := starter.Start(ctx, def, orderID, refs, payload)
	for _, c := range done {
		h.parkedDone(ctx, orderID, c.Ref, c.Name, c.Recorded)
	}
	return err
}

// wake completes a wait or a timer the Supervisor found due, and starts
// what follows it.
func (h *Handler) wake(ctx context.Context, def workflow.Definition, m message.Schedule) error {
	rec, err := h.recorder.Wake(ctx, def, m.OrderID, m.Ref(), h.Now())
	if err != nil {
		return err
	}
	if rec.Stale {
		h.log.Info("wake of a step no longer parked ignored", "order_id", m.OrderID, "step", m.Step)
		return nil
	}
	h.parkedDone(ctx, m.OrderID, m.Ref(), def.Steps[m.Step].Name, rec)
	return h.start(ctx, def, m.OrderID, rec.Ready, m.Payload)
}

// parkedDone tells the order's caller a wait or a timer is done (and the
// order's end, if it ended: counted by the write that recorded it).
func (h *Handler) parkedDone(ctx context.Context, orderID string, ref workflow.Ref, name string, rec outcome.Recorded) {
	now := h.Now()
	h.notify.Post(ctx, notify.Event{OrderID: orderID, ReplyQueue: rec.ReplyQueue, Round: rec.Round, Event: workflow.EventStepDone,
		Ref: ref, Step: name, State: rec.State, At: now})
	if rec.State.Ended() {
		h.notify.PostEnded(ctx, orderID, rec.ReplyQueue, rec.Round, rec.State, "", now)
	}
}

// reply carries out what follows a reply: the records its outcome made ready
// are started, the order's caller is told, and a refusal is alerted. The
// Agent recorded the outcome before it replied; a reply it did not record
// (from an Agent of an earlier version) is recorded here first.
func (h *Handler) reply(ctx context.Context, def workflow.Definition, r message.AgentReply) error {
	if !r.Recorded {
		rec, err := h.recorder.Record(ctx, def, outcome.Attempt{OrderID: r.OrderID, Ref: r.Ref(),
			Name: r.StepName, Attempt: r.Attempt, Round: r.Round, Refusal: r.Error, Now: h.Now()})
		if err != nil {
			return err
		}
		if rec.Stale {
			h.stale(r)
			return nil
		}
		crash(h.Crash, "scheduler.after-record")
		r.State, r.Ready = string(rec.State), message.Starts(rec.Ready)
	}
	switch {
	case r.GivenBack: // nothing done or refused: the undoing goes on
	case r.OK:
		h.done(ctx, r)
	default:
		if err := h.refused(ctx, def, r); err != nil {
			return err
		}
	}
	refs := make([]workflow.Ref, 0, len(r.Ready))
	for _, s := range r.Ready {
		refs = append(refs, s.Ref())
	}
	return h.start(ctx, def, r.OrderID, refs, r.Payload)
}

// done tells the order's caller a step or undo action is done, and, if the
// order ended with it, how it ended.
func (h *Handler) done(ctx context.Context, r message.AgentReply) {
	now, state, round := h.Now(), workflow.State(r.State), roundOf(r)
	ev := notify.Event{OrderID: r.OrderID, ReplyQueue: r.ReplyTo, Round: round, Event: workflow.EventStepDone,
		Ref: r.Ref(), Step: workflow.RecordName(r.StepName, r.Ref()), State: state, Result: r.Result, At: now}
	if r.Undo {
		ev.Event = workflow.EventUndoDone
	}
	h.notify.Post(ctx, ev)
	if state.Ended() {
		h.notify.PostEnded(ctx, r.OrderID, r.ReplyTo, round, state, "", now) // its recorder counted the end
	}
}

// refused tells the order's caller and the operator that a record was
// refused for good by its service. The alert goes once: a reply delivered
// again finds it sent (if the send fails, the record stays due and the
// Supervisor sends it).
func (h *Handler) refused(ctx context.Context, def workflow.Definition, r message.AgentReply) error {
	now, ref := h.Now(), r.Ref()
	after := workflow.State(r.State) // the order's state the refusal led to, written with it
	h.log.Error("failed with a non-transient error", "order_id", r.OrderID, "step", r.StepName, "undo", ref.Undo, "err", r.Error)
	h.notify.Failed(ctx, notify.Event{OrderID: r.OrderID, ReplyQueue: r.ReplyTo, Round: roundOf(r), Ref: ref,
		Step: workflow.RecordName(r.StepName, ref), Error: r.Error, At: now}, ref.Undo, after)
	if pending, err := h.store.AlertPending(ctx, r.OrderID, ref); err != nil || !pending {
		return err
	}
	a := alert.Failure{OrderID: r.OrderID, Step: r.Step, StepName: workflow.RecordName(r.StepName, ref), Undo: ref.Undo, Attempt: r.Attempt,
		LastError: r.Error, Compensation: alert.CompensationOf(ref.Undo, after, false), OrderState: after, DetectedBy: "scheduler", At: now}
	if err := h.alerts.StepFailed(ctx, a); err != nil {
		// The record stays in the deadline index: the Supervisor will alert.
		h.log.Warn("alert not sent; the supervisor will send it", "order_id", r.OrderID, "err", err)
		return nil
	}
	return h.store.MarkAlerted(ctx, r.OrderID, ref, now)
}

func (h *Handler) stale(r message.AgentReply) {
	h.metrics.Count(metrics.StaleReplies, 1, map[string]any{"OrderID": r.OrderID, "Attempt": r.Attempt})
	h.log.Info("reply of an attempt that is not current ignored", "order_id", r.OrderID, "step", r.Step,
		"undo", r.Undo, "attempt", r.Attempt)
}

// roundOf is the round the reply belongs to (echoed from the request).
func roundOf(r message.AgentReply) int { return max(r.Round, 1) }

func crash(f func(string), point string) {
	if f != nil {
		f(point)
	}
}
