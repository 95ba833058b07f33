package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// record carries out the verdict v on attempt a (judge's): the one
// function that ends an attempt, whatever came of it.
func (h *Handler) record(ctx context.Context, a *attempt, v verdict) error {
	switch v.kind {
	case keepResult:
		res, refusal, err := h.resultOf(ctx, a.def, a.st, v.result, a.order)
		if err != nil {
			// Not sealed (KMS failed, its tries spent): SQS delivers the
			// request again, and its claim is refused; the Supervisor
			// recovers the attempt at its CompleteBy.
			return err
		}
		return h.recordOutcome(ctx, a.def, a.st, outcome.Attempt{Refusal: refusal, Ran: refusal != ""}, res, a.order)
	case recordRefusal:
		if v.warn != "" {
			h.log.Warn(v.warn, "order_id", a.st.OrderID, "err", v.refusal)
		}
		return h.recordOutcome(ctx, a.def, a.st, outcome.Attempt{Refusal: v.refusal, Ran: v.ran}, keptResult{}, a.order)
	case giveBack:
		return h.release(ctx, a.def, a.st, flow.Verdict{Wait: v.delay(), Why: v.why}, a.req, v.ran)
	case giveBackUncalled:
		return h.notCalled(ctx, a, v.err, v.ran)
	case slowDown:
		return h.holdEveryInstance(ctx, a, v)
	case acceptAsync:
		h.accept(ctx, a)
		return nil // its callback records the outcome; by CompleteBy, or the Supervisor recovers the attempt
	case abandonNow:
		h.abandon(ctx, a.st, v)
		return nil
	case leaveToSupervisor:
		h.expired(a.st, v.why)
		return nil
	}
	return v.err // redeliver
}

// recordOutcome writes the attempt's outcome and what follows it in the order's
// state, then replies, so that the Scheduler starts what was made ready and
// tells the order's caller. An attempt that is no longer current records
// nothing and replies nothing. res is its result as it is kept (resultOf):
// over the inline limit, it goes to the payload bucket first.
func (h *Handler) recordOutcome(ctx context.Context, def workflow.Definition, st *statestore.Step, a outcome.Attempt, res keptResult,
	payload json.RawMessage) error {
	a.OrderID, a.Ref, a.Name, a.Attempt, a.Round, a.Now = st.OrderID, st.Ref, st.Name, st.Attempt, st.Round, h.Now()
	a.Read = st.Read // where the others stood at its claim: the first guess
	// A refusal's reason travels in the reply, the alert and the log
	// whatever its service or an expression quoted: bounded, so that each
	// fits (the state item keeps less).
	a.Refusal = message.Clip(a.Refusal, MaxRefusalBytes)
	var replied json.RawMessage // its result as recorded (nil: none)
	var rec outcome.Recorded
	put := false // the result stored once: a try again records the outcome, not the result again
	err := h.persist(ctx, st, "its outcome", func(ctx context.Context) error {
		if a.Refusal == "" && res.stored.Len() > 0 && !put {
			out, stale, err := h.putResult(ctx, def, st, res, a.Now)
			if stale {
				rec.Stale = true
				return nil
			}
			if err != nil {
				return err
			}
			replied, put, a.ResultBytes = out, true, res.bytes
		}
		var err error
		rec, err = h.outcomes.Record(ctx, def, a)
		return err
	})
	if err != nil {
		// Not recorded: SQS delivers the request again, and its claim is
		// refused; the Supervisor recovers the attempt at its CompleteBy
		// (the idempotency key makes the next attempt safe).
		return err
	}
	if rec.Stale {
		h.stale(st)
		return nil
	}
	if h.Crash != nil {
		h.Crash("agent.after-record") // recorded: what it made ready waits for its pickup deadline
	}
	reply := outcome.Reply(def, a, rec, replied, payload)
	// If this send is lost, what the outcome made ready is found unclaimed
	// at its pickup deadline, and the Supervisor sends it again.
	return h.send.SendJSON(ctx, h.cfg.ResponseQueueURL, reply, 0)
}

// putResult keeps the attempt's result res before its outcome is
// recorded: what it is recorded and replied as. stale: a later attempt's
// result is there.
func (h *Handler) putResult(ctx context.Context, def workflow.Definition, st *statestore.Step, res keptResult,
	now time.Time) (json.RawMessage, bool, error) {
	// Over the inline limit, it is kept in the payload bucket first, its
	// claim check recorded and replied in its place (the same bytes, the
	// same object: a try again writes it again).
	out, err := h.kept.Offload(ctx, st.OrderID, fmt.Sprintf("results/%s-r%d", st.RecordName(), st.Round), res.stored)
	if err != nil {
		return nil, false, err
	}
	// The result first: once the outcome is recorded, what follows may
	// read it. A later attempt's result there means this one is stale.
	err = h.store.PutResult(ctx, statestore.Result{OrderID: st.OrderID, Ref: st.Ref, Name: st.Name, Round: st.Round,
		Attempt: st.Attempt, JSON: out.JSON(), Now: now, Lifetime: def.Lifetime(), Keep: st.Retention()})
	if errors.Is(err, statestore.ErrStale) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return out.JSON(), false, nil
}

// writeTries is how often an Agent tries a write only it can make: a
// call's outcome (its service's answer is nowhere else), an attempt given
// back before its call. Left to SQS, the request's next delivery finds the
// attempt claimed, and the attempt runs out at its CompleteBy as one that
// may have run: a refusal would count as a timeout, and a step with no undo
// that failed so would end its order CompensationFailed (found by the
// explorer, with the state store failing writes).
const writeTries = 5

// persist runs write, and again after a failure, backing off, up to
// writeTries times while the attempt is current (before its CompleteBy) and
// the invocation has time: a failure that is not the attempt's (ErrStale)
// is the state store's, or the payload bucket's, or KMS's, for a moment.
func (h *Handler) persist(ctx context.Context, st *statestore.Step, what string, write func(context.Context) error) error {
	for try := 1; ; try++ {
		err := write(ctx)
		if err == nil || errors.Is(err, statestore.ErrStale) || try == writeTries || ctx.Err() != nil {
			return err
		}
		wait := max(h.cfg.Backoff.Delay(try), MinWriteWait)
		if !h.Now().Add(wait).Before(st.CompleteBy) {
			return err
		}
		h.log.Warn("an attempt's write failed: tried again", "order_id", st.OrderID, "step", st.Name, "attempt", st.Attempt,
			"what", what, "try", try, "again_in", wait.Round(time.Millisecond), "err", err)
		if serr := h.Sleep(ctx, wait); serr != nil {
			return err
		}
	}
}

// MinWriteWait is the least an Agent waits before it tries a failed write
// again (persist).
const MinWriteWait = 100 * time.Millisecond

// MaxRefusalBytes bounds a refusal's reason as the Agent records and replies
// it: what it says, and message.MaxReasonQuote of what its service
// answered.
const MaxRefusalBytes = message.MaxErrorBytes

// stale counts an outcome of an attempt no longer current: nothing recorded,
// nothing replied.
func (h *Handler) stale(st *statestore.Step) {
	h.metrics.Count(metrics.StaleReplies, 1, map[string]any{"OrderID": st.OrderID, "Attempt": st.Attempt})
	h.log.Info("outcome of an attempt that is no longer current: nothing recorded", "order_id", st.OrderID,
		"step", st.Name, "attempt", st.Attempt)
}

// AcceptNotNoted is what an Agent logs when its service accepted an async
// call and the state store failed to note it: a cancel awaits the call's
// callback, and its key's slot, if it holds one, is free at its CompleteBy.
const AcceptNotNoted = "async call accepted, not noted: a cancel awaits its callback"

// accept notes an async call its service accepted (its key's slot, if it
// holds one, noted with it): its callback records the outcome.
func (h *Handler) accept(ctx context.Context, a *attempt) {
	st := a.st
	h.log.Debug("async call accepted: the service answers with an event carrying the token", "order_id", st.OrderID,
		"step", st.Name, "attempt", st.Attempt, "complete_by", st.CompleteBy)
	// Noted, so a cancel does not await the callback (hours, perhaps)
	// but undoes the attempt; if the note is lost, a cancel awaits it,
	// and its key's slot, if it holds one, ends at its CompleteBy.
	a.noted = true
	st.Slot = a.key
	err := h.persist(ctx, st, "its acceptance", func(ctx context.Context) error { return h.store.Accept(ctx, *st, h.Now()) })
	switch {
	case errors.Is(err, statestore.ErrStale):
		// Its callback came first (or the attempt ended otherwise): it
		// found no slot noted to let go, so the slot goes here.
		a.noted = false
	case err != nil:
		h.log.Warn(AcceptNotNoted, "order_id", st.OrderID, "holder", h.holder(st), "err", err)
	}
}

// abandon ends an attempt out of time now, with v.reason (an abandonNow
// verdict), for the Supervisor to recover at its next sweep; no reply. One
// no longer current is left as it is; one the store failed to end runs out
// at its CompleteBy (v.warn says so).
func (h *Handler) abandon(ctx context.Context, st *statestore.Step, v verdict) {
	h.expired(st, v.why)
	if err := h.store.Abandon(ctx, *st, v.reason, h.Now()); err != nil && !errors.Is(err, statestore.ErrStale) {
		h.log.Warn(v.warn, "order_id", st.OrderID, "err", err)
	}
}
