package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// recordOutcome writes the attempt's outcome and what follows it in the order's
// state, then replies, so that the Scheduler starts what was made ready and
// tells the order's caller. An attempt that is no longer current records
// nothing and replies nothing.
func (h *Handler) recordOutcome(ctx context.Context, def workflow.Definition, st *statestore.Step, a outcome.Attempt, result []byte, payload json.RawMessage) error {
	a.OrderID, a.Ref, a.Name, a.Attempt, a.Round, a.Now = st.OrderID, st.Ref(), st.Name, st.Attempt, st.Round, h.Now()
	a.Read = st.Read // where the others stood at its claim: the first guess
	kept := resultJSON(result)
	if a.Refusal == "" && len(result) > 0 {
		// A sealed order's result is sealed under its data key; over the
		// inline limit, it is kept in the payload bucket first, its claim
		// check recorded and replied in its place (the same bytes, the
		// same object: a try again writes it again).
		var err error
		if kept, err = h.seal(ctx, st.OrderID, payload, kept); err != nil {
			return err // not recorded: as below
		}
		if kept, err = h.payloads.Keep(ctx, st.OrderID, fmt.Sprintf("results/%s-r%d", st.RecordName(), st.Round), kept, nil); err != nil {
			return err // not recorded: as below
		}
		// The result first: once the outcome is recorded, what follows may
		// read it. A later attempt's result there means this one is stale.
		err = h.store.PutResult(ctx, statestore.Result{OrderID: st.OrderID, Ref: st.Ref(), Name: st.Name, Round: st.Round,
			Attempt: st.Attempt, JSON: kept, Now: a.Now, Deadline: def.Deadline})
		if errors.Is(err, statestore.ErrStale) {
			h.stale(st)
			return nil
		}
		if err != nil {
			return err // not recorded: as below
		}
		a.ResultBytes = len(result)
	}
	rec, err := h.outcomes.Record(ctx, def, a)
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
	if rec.State.Ended() {
		notify.CountEnd(h.metrics, st.OrderID, rec.State) // here, once: the reply may be delivered twice
	}
	if h.Crash != nil {
		h.Crash("agent.after-record") // recorded: what it made ready waits for its pickup deadline
	}
	reply := outcome.Reply(def, a, rec, kept, payload)
	// If this send is lost, what the outcome made ready is found unclaimed
	// at its pickup deadline, and the Supervisor sends it again.
	return h.send.SendJSON(ctx, h.cfg.ResponseQueueURL, reply, 0)
}

// seal is result sealed under the data key of the order stored as order, if
// that is sealed; result itself otherwise.
func (h *Handler) seal(ctx context.Context, orderID string, order, result json.RawMessage) (json.RawMessage, error) {
	if h.sealer == nil {
		return result, nil
	}
	key, sealed, err := h.sealer.KeyOf(ctx, orderID, order)
	if err != nil || !sealed {
		return result, err
	}
	return key.Seal(result, nil)
}

// stale counts an outcome of an attempt no longer current: nothing recorded,
// nothing replied.
func (h *Handler) stale(st *statestore.Step) {
	h.metrics.Count(metrics.StaleReplies, 1, map[string]any{"OrderID": st.OrderID, "Attempt": st.Attempt})
	h.log.Info("outcome of an attempt that is no longer current: nothing recorded", "order_id", st.OrderID,
		"step", st.Name, "attempt", st.Attempt)
}

// replyMove replies what a give-back made ready while the order is undone
// (rec): the Scheduler starts it; nothing is done or refused.
func (h *Handler) replyMove(ctx context.Context, def workflow.Definition, st *statestore.Step, payload json.RawMessage, rec outcome.Recorded) error {
	if rec.State.Ended() {
		notify.CountEnd(h.metrics, st.OrderID, rec.State)
	}
	reply := outcome.Reply(def, outcome.Attempt{OrderID: st.OrderID, Ref: st.Ref(), Name: st.Name, Attempt: st.Attempt}, rec, nil, payload)
	reply.OK, reply.GivenBack = false, true
	// If this send is lost, the undo made ready is found unclaimed at its
	// pickup deadline, and the Supervisor sends it.
	return h.send.SendJSON(ctx, h.cfg.ResponseQueueURL, reply, 0)
}
