package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// KeyWait is how long a call whose key's slots are all held waits before it
// tries again: a slot let go is taken within it (SQS delays by whole
// seconds).
const KeyWait = time.Second

// admit is the flow control before a claim: a pause, a back-off its service
// asked for, its rate limit's turn. A call that must wait has its request
// sent again, delayed (waits); otherwise turn is when the call may be made.
func (h *Handler) admit(ctx context.Context, req *message.AgentRequest) (turn time.Time, waits bool, err error) {
	if h.gate == nil {
		return time.Time{}, false, nil
	}
	v, err := h.gate.Admit(ctx, h.cfg.Name, h.cfg.RateLimit, req.Turn, h.Now())
	if err != nil {
		return time.Time{}, false, err // SQS delivers it again
	}
	if v.Wait > 0 {
		req.Turn = v.At // its rate limit's turn, if it took one: it keeps it
		return time.Time{}, true, h.later(ctx, *req, v.Wait, v.Why)
	}
	return v.At, false, nil
}

// beforeCall is the flow control of a claimed attempt, right before its
// call: a slot of its key (at most PerKey.InFlight calls at once per key),
// its turn, and a pause or a back-off that came meanwhile (another instance
// met a 429). An attempt that may not call now is given back, no failure
// counted (gaveBack). let gives its key's slot back: the call's end.
func (h *Handler) beforeCall(ctx context.Context, def workflow.Definition, st *statestore.Step, req message.AgentRequest,
	key string, turn time.Time) (let func(), gaveBack bool, err error) {
	let = func() {}
	if h.gate == nil {
		return let, false, nil
	}
	if key != "" {
		holder := flow.Holder(st.OrderID, st.Ref(), st.Round, st.Attempt)
		hold, err := h.gate.Store.Hold(ctx, h.cfg.Name, key, h.cfg.PerKey.InFlight, holder, st.CompleteBy, h.Now())
		if err != nil {
			return let, false, err // SQS delivers it again; the claim is recovered at its CompleteBy
		}
		if !hold.Held {
			return let, true, h.giveBack(ctx, def, st, flow.Verdict{Wait: KeyWait,
				Why: fmt.Sprintf("%d call(s) of agent %s's key %q in flight, its limit (perKey)", hold.Holders, h.cfg.Name, key)}, req)
		}
		let = func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := h.gate.Store.Let(ctx, h.cfg.Name, key, holder); err != nil {
				h.log.Warn("a slot not let go: it is free at the attempt's CompleteBy", "order_id", st.OrderID, "key", key, "err", err)
			}
		}
	}
	if late := h.Now().Sub(turn); h.cfg.RateLimit.Calls > 0 && late > time.Duration(max(h.cfg.RateLimit.Burst, 1))*h.cfg.RateLimit.Interval() {
		// It came back well after its turn (a slow delivery, a wait for its
		// key; a turn of a burst may be up to a burst's intervals ago): made
		// now, it would crowd the calls whose turns are now. It takes a new
		// one.
		v, err := h.gate.Admit(ctx, h.cfg.Name, h.cfg.RateLimit, time.Time{}, h.Now())
		if err != nil {
			let()
			return func() {}, false, err
		}
		if v.Wait > 0 {
			let()
			return func() {}, true, h.giveBack(ctx, def, st, v, req)
		}
		turn = v.At
	}
	if d := turn.Sub(h.Now()); d > 0 {
		if err := h.Sleep(ctx, d); err != nil {
			let()
			return func() {}, false, err
		}
	}
	if v, err := h.gate.Recheck(ctx, h.cfg.Name, h.Now()); err != nil || v.Wait > 0 {
		let()
		if err != nil {
			return func() {}, false, err
		}
		return func() {}, true, h.giveBack(ctx, def, st, v, req)
	}
	return let, false, nil
}

// giveBack gives the claimed attempt back with no failure counted, ready
// again when v's wait ends, and sends its request again for then.
func (h *Handler) giveBack(ctx context.Context, def workflow.Definition, st *statestore.Step, v flow.Verdict,
	req message.AgentRequest) error {
	now := h.Now()
	released, err := outcome.Recorder{Store: h.store}.Release(ctx, def, outcome.Attempt{OrderID: st.OrderID, Ref: st.Ref(),
		Attempt: st.Attempt, Round: st.Round, Token: st.Token, Read: st.Read, Now: now}, now.Add(v.Wait), v.Why)
	if err != nil || !released {
		return err // not its to give back (recovered meanwhile): nothing more
	}
	req.Turn = v.At // a new turn of its rate limit, if it took one
	return h.later(ctx, req, v.Wait, v.Why)
}
