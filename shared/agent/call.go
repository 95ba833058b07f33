package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// call runs the remote call with retries until it succeeds, fails
// permanently, or the deadline (CompleteBy less the margin) comes. Every
// retry takes a turn of the agent's rate limit, as the first did. retried
// says whether a try before the last met a transient fault (it may have
// taken effect).
func (h *Handler) call(ctx context.Context, st *statestore.Step, payload callInput, deadline time.Time) ([]byte, bool, error) {
	var last error // the service's last transient answer, for the line that says the attempt ran out of time
	for n := 0; ; n++ {
		err := h.breaker.Allow()
		if err != nil && n == 0 {
			// No request of the attempt went: it is given back until the
			// breaker may let one through, no failure counted. An attempt
			// that waited out an open breaker ran out of its time, and its
			// step failed for good with its service never called. (A
			// request that finds the breaker open is held back before its
			// claim, admit; this is one that it opened on meanwhile.)
			return nil, false, &BreakerOpenError{Agent: h.cfg.Name, Wait: h.breaker.RetryIn()}
		}
		if err == nil {
			res, done, err := h.tryOnce(ctx, st, payload, deadline, n, last)
			if done {
				return res, n > 0, err
			}
			h.log.Debug("transient remote fault", "order_id", st.OrderID, "attempt", st.Attempt, "try", n, "err", err)
			if last == nil || !errors.Is(err, context.DeadlineExceeded) {
				// A try its own time cut short (a slow answer, a starved
				// machine) does not hide what the service answered before.
				last = err
			}
		}
		if ctx.Err() != nil {
			return nil, n > 0, ctx.Err()
		}
		wait := h.cfg.Backoff.Delay(n)
		if !h.Now().Add(wait).Before(deadline) {
			return nil, true, pastDeadline(errDeadline, last)
		}
		h.metrics.Count(metrics.AgentRetries, 1, map[string]any{"OrderID": st.OrderID, "Try": n + 1})
		if err := h.Sleep(ctx, wait); err != nil {
			return nil, true, err
		}
	}
}

// tryOnce makes try n of the attempt's call, which its breaker let
// through, and tells the breaker what the try says of its service's
// health. done: the call is over (an answer, a refusal, a slow-down, its
// input failed as it was sent, or no turn before deadline: last is the
// service's last transient answer); else err is a transient fault, to be
// tried again.
func (h *Handler) tryOnce(ctx context.Context, st *statestore.Step, payload callInput, deadline time.Time, n int,
	last error) (res []byte, done bool, err error) {
	// The turn beforeCall took is for a request made at once; any later
	// one (a retry) takes its own, and one the breaker refuses takes none.
	if n > 0 {
		if err := h.awaitTurn(ctx, deadline); err != nil {
			h.breaker.Forgo()
			return nil, true, pastDeadline(err, last)
		}
	}
	// A try whose time is the attempt's, not a whole call timeout, may be
	// cut short by the attempt's own deadline.
	short := deadline.Before(h.Now().Add(h.cfg.CallTimeout))
	res, err = h.try(ctx, st, payload, deadline)
	if err != nil && !answeredBy(err) && payload.stream != nil && payload.stream.Err() != nil {
		// Its input failed as it was sent, and the call broke off with no
		// answer: the service did not have the input, and tells nothing of
		// its health. (A service that answered, before it read it all,
		// answered: a 413 is its refusal.)
		h.breaker.Forgo()
		return nil, true, &InputError{Err: payload.stream.Err()}
	}
	var slow *SlowDownError
	slowed := h.gate != nil && errors.As(err, &slow)
	switch {
	case short && errors.Is(err, context.DeadlineExceeded):
		// Cut by the attempt's own time (its turn, or its line, took the
		// rest): the service's health is not told by it, or five such
		// tries in a row would open the breaker on every call.
		h.breaker.Forgo()
	default:
		// A service that asks to slow down is up: the flow control holds
		// every instance's calls, and its breaker learns nothing.
		h.breaker.Record(err != nil && !IsPermanent(err) && !slowed)
	}
	return res, err == nil || IsPermanent(err) || slowed, err
}

// BreakerOpenError is an attempt's call held by its Agent instance's
// circuit breaker before any request of it went: its service failed calls
// in a row, and the instance makes none until Wait has passed.
type BreakerOpenError struct {
	Agent string
	Wait  time.Duration
}

func (e *BreakerOpenError) Error() string {
	return fmt.Sprintf("agent %s's circuit breaker is open (its service failed calls in a row): no call for %s",
		e.Agent, e.Wait.Round(time.Millisecond))
}

// pastDeadline is err, if it is errDeadline, with the service's last
// transient answer (nil: none came): the Agent's "attempt abandoned" log
// line says it, and the Supervisor's give-up reason points to that line.
// Nothing more is written for it: an attempt out of time costs no write.
func pastDeadline(err, last error) error {
	if last == nil || !errors.Is(err, errDeadline) {
		return err
	}
	return fmt.Errorf("%w; %s%v", err, lastAnswered, last)
}

// lastAnswered introduces the service's last transient answer in an
// attempt's reason.
const lastAnswered = "its service last answered: "

func (h *Handler) try(ctx context.Context, st *statestore.Step, payload callInput, deadline time.Time) ([]byte, error) {
	limit := h.Now().Add(h.cfg.CallTimeout)
	if deadline.Before(limit) {
		limit = deadline
	}
	cctx, cancel := context.WithDeadline(ctx, limit)
	defer cancel()
	action, key := st.DoName(), workflow.IdempotencyKey(st.OrderID, st.RecordName(), st.Round)
	if payload.stream != nil {
		// Its payloads, streamed on this try (counted as it starts).
		h.metrics.Count(metrics.PayloadsStreamed, float64(payload.stream.Objects()), map[string]any{"OrderID": st.OrderID, "Step": st.Name})
		return h.remote.(Streamer).ApplyInput(cctx, action, key, payload.stream)
	}
	if r, ok := h.remote.(*HTTPRemote); ok {
		return r.applyParts(cctx, action, key, payload.parts)
	}
	return h.remote.Apply(cctx, action, key, payload.bytes())
}

func (h *Handler) expired(st *statestore.Step, why string) {
	h.metrics.Count(metrics.AgentDeadlineExpired, 1, map[string]any{"OrderID": st.OrderID, "Attempt": st.Attempt})
	h.log.Warn("attempt abandoned; no reply sent", "order_id", st.OrderID, "attempt", st.Attempt, "why", why)
}

// tokenKey carries an async attempt's token to its Remote.
type tokenKey struct{}

// CallbackToken is the token of the async attempt whose call ctx is ("":
// none): an HTTP agent sends it in the X-Callback-Token header, and a Go
// agent hands it to its service, which answers later with an event carrying
// it ({"kind":"event","orderId":...,"token":...,"data":...}).
func CallbackToken(ctx context.Context) string {
	t, _ := ctx.Value(tokenKey{}).(string)
	return t
}

// asyncCall is the context and deadline of an async attempt's call: it
// carries the attempt's token, and its retries end with the function's own
// time (the callback may take until CompleteBy; the call may not).
func (h *Handler) asyncCall(ctx context.Context, st *statestore.Step, nonce string, deadline time.Time) (context.Context, time.Time) {
	tok := outcome.Token{OrderID: st.OrderID, Ref: st.Ref, Round: st.Round, Attempt: st.Attempt, Nonce: nonce}
	if d, ok := ctx.Deadline(); ok && d.Add(-h.cfg.Margin).Before(deadline) {
		deadline = d.Add(-h.cfg.Margin)
	}
	return context.WithValue(ctx, tokenKey{}, tok.String()), deadline
}

// newNonce is an async attempt's token nonce: 16 random hex digits.
func newNonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b)
}
