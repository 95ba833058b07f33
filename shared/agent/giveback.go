package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// An attempt given back ran nothing (or nothing known to have taken
// effect): no failure counted, its step ready again when its wait ends, its
// request sent again for then (later).

// SlowDownNotNoted is what an Agent logs when its service asked for no
// calls for a while (a 429 or 503 with Retry-After) and the state store
// failed to note it: the agent's other instances go on calling until a 429
// of their own.
const SlowDownNotNoted = "the slow-down not noted for the other instances"

// notCalled gives back an attempt whose call was not made because what
// comes before it failed (its input not read: the store or the payload
// bucket; its flow control not reached): no failure counted, nothing taken
// as run, and its request sent again after a back-off. Left to SQS, the
// request's next delivery would find the attempt claimed, and the attempt
// would run out at its CompleteBy as one that may have run: a step with no
// undo that failed so would end its order CompensationFailed, its service
// never called (found by the explorer, with payload reads failing).
//
// retried: a try of its call before met a transient fault, and may have
// taken effect (its input failed as it was sent on a later try).
func (h *Handler) notCalled(ctx context.Context, a *attempt, cause error, retried bool) error {
	st := a.st
	wait := max(h.cfg.Backoff.Delay(min(st.Attempt, 8)), time.Second) + jitter()
	if kept.NoKey(cause) {
		// Until the function has its key (a deploy's minute), or, a key
		// taken away from sealed orders in flight, until the order's
		// deadline, whose alert says what it waited for: once a minute.
		wait = max(wait, NoKeyWait)
	}
	level, what := slog.LevelWarn, "attempt given back before its call: what it needs could not be read"
	if errors.Is(cause, kept.ErrBudgetBusy) { // a wait, as for its flow control: no fault
		level, what = slog.LevelInfo, "attempt given back before its call: its instance's payload budget is held by others"
	}
	h.log.Log(ctx, level, what, "order_id", st.OrderID, "step", st.Name, "attempt", st.Attempt,
		"again_in", wait.Round(time.Millisecond), "err", cause)
	// Given back even if the function's own time ran out meanwhile.
	if err := h.release(context.WithoutCancel(ctx), a.def, st, flow.Verdict{Wait: wait, Why: "not called: " + cause.Error()}, a.req,
		retried); err != nil {
		// Not given back either: SQS delivers the request again, and the
		// Supervisor recovers the attempt at its CompleteBy.
		return fmt.Errorf("%w (not given back: %v)", cause, err)
	}
	return nil
}

// NoKeyWait is how long an attempt on a sealed order that its function has
// no data key to open waits before it is tried again.
const NoKeyWait = time.Minute

// holdEveryInstance: the service answered 429 or 503 with a Retry-After
// (v: a slowDown verdict). Every instance of the agent holds its calls
// until then; this attempt is given back with no failure counted, and its
// request sent again for then.
func (h *Handler) holdEveryInstance(ctx context.Context, a *attempt, v verdict) error {
	st := a.st
	until := h.Now().Add(v.wait)
	h.log.Warn("the service asked to slow down: every instance holds its calls", "order_id", st.OrderID, "until", until, "err", v.err)
	if err := h.gate.Store.SlowDown(ctx, h.cfg.Name, until); err != nil {
		// The other instances go on calling until a 429 of theirs; this
		// attempt still waits the Retry-After, given back (left to SQS,
		// it would run out as one that may have run).
		h.log.Warn(SlowDownNotNoted, "agent", h.cfg.Name, "order_id", st.OrderID, "until", until, "err", err)
	} else {
		h.gate.Forget()
	}
	return h.release(ctx, a.def, st, flow.Verdict{Wait: v.delay(), Why: v.why}, a.req, v.ran)
}

// release gives the claimed attempt back, no failure counted (ran: a
// request of it may have taken effect), ready again when v's wait ends; if
// the order is being undone, the undoing goes on (what it made ready is
// replied to the Scheduler); else the request is sent again for then.
func (h *Handler) release(ctx context.Context, def workflow.Definition, st *statestore.Step, v flow.Verdict,
	req message.AgentRequest, ran bool) error {
	var rec outcome.Recorded
	err := h.persist(ctx, st, "its give-back", func(ctx context.Context) error {
		now := h.Now()
		var err error
		rec, err = outcome.Recorder{Store: h.store}.Release(ctx, def, outcome.Attempt{OrderID: st.OrderID, Ref: st.Ref,
			Attempt: st.Attempt, Round: st.Round, Token: st.Token, Read: st.Read, Ran: ran, Now: now}, now.Add(v.Wait), v.Why)
		return err
	})
	if err != nil || rec.Stale {
		return err // not its to give back (recovered meanwhile): nothing more
	}
	if rec.State != workflow.Pending && rec.State != workflow.Held {
		// The order is being undone (or ended): the attempt runs no more,
		// and what the undoing made ready goes to the Scheduler.
		return h.replyMove(ctx, def, st, req.Payload, rec)
	}
	return h.later(ctx, req, v.Wait, v.Why)
}

// replyMove replies what a give-back made ready while the order is undone
// (rec): the Scheduler starts it; nothing is done or refused.
func (h *Handler) replyMove(ctx context.Context, def workflow.Definition, st *statestore.Step, payload json.RawMessage, rec outcome.Recorded) error {
	reply := outcome.Reply(def, outcome.Attempt{OrderID: st.OrderID, Ref: st.Ref, Name: st.Name, Attempt: st.Attempt}, rec, nil, payload)
	reply.OK, reply.GivenBack = false, true
	// If this send is lost, the undo made ready is found unclaimed at its
	// pickup deadline, and the Supervisor sends it.
	return h.send.SendJSON(ctx, h.cfg.ResponseQueueURL, reply, 0)
}

// later sends the request to its own queue again, delayed by wait (why: the
// flow control's reason), and takes this one as done: a call that waits for
// its turn counts no failure, and its receive count stays low however long
// it waits.
func (h *Handler) later(ctx context.Context, req message.AgentRequest, wait time.Duration, why string) error {
	wait = min(wait, MaxDelay)
	if err := h.send.SendJSON(ctx, h.cfg.RequestQueueURL, req, wait); err != nil {
		return fmt.Errorf("send %s's request again in %s: %w", req.OrderID, wait, err)
	}
	h.metrics.Count(metrics.FlowWaits, 1, map[string]any{"OrderID": req.OrderID, "Step": req.StepName})
	h.log.Debug("call waits", "order_id", req.OrderID, "step", req.StepName, "undo", req.Undo, "for", wait.Round(time.Millisecond), "why", why)
	return nil
}

// MaxDelay is the longest SQS delays a message.
const MaxDelay = 15 * time.Minute

// jitter is up to a second, at random: so that the calls given back (or
// held back) together come back apart.
func jitter() time.Duration { return time.Duration(rand.Int64N(int64(time.Second))) }

// delay is how long a give-back v waits: its wait, and its jitter if it has
// one.
func (v verdict) delay() time.Duration {
	if v.jitter {
		return v.wait + jitter()
	}
	return v.wait
}
