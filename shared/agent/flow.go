package agent

import (
	"context"
	"time"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/message"
)

// KeyWait is how long a call whose key's slots are all held waits before it
// tries again: a slot let go is taken within it (SQS delays by whole
// seconds).
const KeyWait = time.Second

// MinCallTime is the least time a call is left after its rate turn, before
// its attempt's CompleteBy (or its whole call timeout, if shorter): an
// attempt that waited in its instance's line for a turn past that is given
// back instead.
const MinCallTime = time.Second

// admit is the flow control before a claim: the instance's circuit breaker
// open, a pause, or a back-off its service asked for. A call that must wait
// has its request sent again, delayed (waits), with nothing claimed, no
// key's slot held and no rate turn taken.
func (h *Handler) admit(ctx context.Context, req *message.AgentRequest) (waits bool, err error) {
	if w := h.breaker.RetryIn(); w > 0 {
		open := &BreakerOpenError{Agent: h.cfg.Name, Wait: w}
		return true, h.later(ctx, *req, w+jitter(), open.Error())
	}
	if h.gate == nil {
		return false, nil
	}
	req.Turn = time.Time{} // a turn booked by an Agent of an earlier version: none is booked now
	v, err := h.gate.Recheck(ctx, h.cfg.Name, h.Now())
	if err != nil {
		return false, err // SQS delivers it again
	}
	if v.Wait > 0 {
		return true, h.later(ctx, *req, v.Wait, v.Why)
	}
	return false, nil
}

// beforeCall is the flow control of a claimed attempt, right before its
// call: a slot of its key (at most PerKey.InFlight calls at once per key),
// a pause or a back-off that came meanwhile (another instance met a 429),
// and last its rate limit's turn, decided at the moment of the call (so the
// service sees the calls spaced as their turns: nothing between the turn
// and the call but the request). An attempt that may not call now is a
// *waitError: given back, no failure counted and nothing undone (judge).
// let gives its key's slot back: the call's end.
func (h *Handler) beforeCall(ctx context.Context, a *attempt) (let func(), err error) {
	let = func() {}
	if h.gate == nil {
		return let, nil
	}
	st := a.st
	if a.key != "" && h.lines != nil {
		slot, err := h.holdSlot(ctx, st, a.req, a.key)
		if err != nil {
			// Given back, not called (notCalled); not given back either,
			// SQS delivers it again and the claim is recovered at its
			// CompleteBy.
			return let, err
		}
		if !slot.held {
			a.req.Slot, a.req.Round = a.key, st.Round // its fallback: if it finds nothing to run, it leaves the line
			return let, &waitError{flow.Verdict{Wait: slot.wait, Why: slot.why}}
		}
		key := a.key
		let = func() { h.releaseSlot(ctx, st, key) }
	}
	v, err := h.gate.Recheck(ctx, h.cfg.Name, h.Now())
	if err == nil && v.Wait == 0 && h.cfg.RateLimit.Calls > 0 {
		// Its turn leaves the call time to be made: one that came later is
		// given back (no turn taken), not made to be cut by its attempt's
		// own deadline and counted as a failure.
		by := st.CompleteBy.Add(-h.cfg.Margin - min(h.cfg.CallTimeout, MinCallTime))
		v, err = h.gate.Turn(ctx, h.cfg.Name, h.cfg.RateLimit, by, h.Now())
		if err == nil && v.Wait == 0 {
			// Its turn may have waited (up to flow.MaxTurnWait): a pause or
			// a slow-down that came meanwhile holds the call all the same
			// (found by the explorer: a call a second past its turn's
			// check, four past its service's 429).
			v, err = h.gate.Recheck(ctx, h.cfg.Name, h.Now())
		}
	}
	if err != nil || v.Wait > 0 {
		let()
		if err != nil {
			return func() {}, err
		}
		return func() {}, &waitError{v}
	}
	return let, nil
}

// awaitTurn waits for a turn of the rate limit for a request to the service
// after the attempt's first (a retry, a call again after its credentials
// were read again): every request takes its turn. Past deadline, errDeadline.
func (h *Handler) awaitTurn(ctx context.Context, deadline time.Time) error {
	if h.gate == nil || h.cfg.RateLimit.Calls == 0 {
		return nil
	}
	for {
		now := h.Now()
		if !now.Before(deadline) {
			return errDeadline
		}
		v, err := h.gate.Turn(ctx, h.cfg.Name, h.cfg.RateLimit, deadline, now)
		if err != nil || v.Turned {
			return err
		}
		if !h.Now().Add(v.Wait).Before(deadline) {
			return errDeadline
		}
		if err := h.Sleep(ctx, v.Wait); err != nil {
			return err
		}
	}
}

// turnKey carries to a Remote the wait for a turn of its agent's rate limit
// before a request beyond an attempt's first.
type turnKey struct{}

// AwaitTurn waits for a turn of the rate limit of the agent whose call ctx
// is, if it has one: a Remote that makes a second request within one call
// (after reading its credentials again) calls it first.
func AwaitTurn(ctx context.Context) error {
	if f, ok := ctx.Value(turnKey{}).(func(context.Context) error); ok {
		return f(ctx)
	}
	return nil
}

// withTurns is ctx carrying the wait for a turn up to deadline (AwaitTurn).
func (h *Handler) withTurns(ctx context.Context, deadline time.Time) context.Context {
	if h.gate == nil || h.cfg.RateLimit.Calls == 0 {
		return ctx
	}
	return context.WithValue(ctx, turnKey{}, func(ctx context.Context) error { return h.awaitTurn(ctx, deadline) })
}
