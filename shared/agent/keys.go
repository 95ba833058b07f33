package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// A call whose key's slots are all held (workflow.Agent.PerKey) waits in the
// key's line: its attempt is given back once, no failure counted, and its
// request comes back when a slot is handed to it (KeyLines). So a waiting
// call costs no claim, no give-back and no SQS message a second, and the
// state item does not grow while it waits. Its own request is sent again
// for the earliest time a holder's hold ends by itself (a crashed Agent's,
// at its CompleteBy), at most KeyPoll later: a fallback, in case a hand-off
// is lost.

// KeyLines is the Agent's door to its key lines (keyline.Lines): a claimed
// attempt acquires a slot of its key or a place in its line, and releases
// the slot at its call's end; a request that finds nothing to run leaves
// the line. Each hands on what it frees, and logs what it could not do.
type KeyLines interface {
	Acquire(ctx context.Context, c keyline.Call) (keyline.Acquired, error)
	Release(ctx context.Context, sl keyline.Slot)
	Leave(ctx context.Context, agent, key, waiterID string)
}

// KeyPoll bounds how long a call waiting in its key's line waits before it
// looks again by itself.
const KeyPoll = 5 * time.Minute

// keyName is what a key of value is kept, shown and logged by: its name
// under the agent's secret in a sealed deployment (keyname.Namer: failing,
// the call waits, as for any store's failure), else keyname.ShortKey's.
func (h *Handler) keyName(ctx context.Context, value string) (string, error) {
	if h.names != nil {
		return h.names.Name(ctx, value)
	}
	return keyname.ShortKey(value), nil
}

// slotWait is what acquiring a slot of key decided for a claimed attempt:
// held (releaseSlot lets it go at the call's end), or waiting with its
// attempt to give back (wait, why).
type slotWait struct {
	held bool
	wait time.Duration
	why  string
}

// holdSlot takes a slot of key for the claimed attempt st, or puts it in the
// key's line.
func (h *Handler) holdSlot(ctx context.Context, st *statestore.Step, req message.AgentRequest, key string) (slotWait, error) {
	got, err := h.lines.Acquire(ctx, keyline.Call{Agent: h.cfg.Name, Key: key, Limit: h.cfg.PerKey.InFlight,
		Holder: h.holder(st), Until: st.CompleteBy, Request: func() (json.RawMessage, error) {
			line, err := message.Encode(req.Waiting(st.Round, key), keyline.MaxWaiterRequestBytes)
			if errors.Is(err, message.ErrTooLarge) {
				return nil, fmt.Errorf("%w: %w", keyline.ErrWaiterTooLarge, err)
			}
			if err != nil {
				return nil, fmt.Errorf("encode %s's place in line: %w", st.OrderID, err)
			}
			return line, nil
		}})
	switch {
	case err != nil:
		return slotWait{}, err
	case got.Held:
		return slotWait{held: true}, nil
	case got.TooLarge:
		return slotWait{wait: KeyWait, why: fmt.Sprintf("waiting for a slot of key %q (its request too large for its line)", key)}, nil
	case got.Position == 0:
		// No place in line (too long, or too large a request): it looks
		// again a second later.
		return slotWait{wait: KeyWait, why: fmt.Sprintf("waiting for a slot of key %q (its line is full)", key)}, nil
	}
	poll := KeyPoll
	if !got.Next.IsZero() {
		poll = min(max(got.Next.Sub(h.Now()), KeyWait), KeyPoll)
	}
	return slotWait{wait: poll, why: fmt.Sprintf("waiting for a slot of key %q (%s in line)", key, ordinal(got.Position))}, nil
}

// holder names the attempt st as the holder of its key's slot.
func (h *Handler) holder(st *statestore.Step) string {
	return keyline.Holder(st.OrderID, st.Ref, st.Round, st.Attempt)
}

// releaseSlot lets the attempt's slot of key go, if it holds it, handing
// it on.
func (h *Handler) releaseSlot(ctx context.Context, st *statestore.Step, key string) {
	h.lines.Release(ctx, keyline.Slot{Agent: h.cfg.Name, Key: key, Holder: h.holder(st)})
}

// leaveLine takes a request that no longer has anything to run out of its
// key's line (its order was cancelled or ended while it waited), handing
// what it held on.
func (h *Handler) leaveLine(ctx context.Context, req message.AgentRequest) {
	if h.lines == nil || req.Slot == "" {
		return
	}
	st, err := h.store.Record(ctx, req.OrderID, req.Ref())
	if err == nil && (st.State == workflow.Processing || (st.State == workflow.Pending && !st.Stopped && !st.DueAt.IsZero())) {
		return // another request of it runs it, or will: it keeps its place
	}
	h.lines.Leave(ctx, h.cfg.Name, req.Slot, keyline.WaiterID(req.OrderID, req.Ref(), max(req.Round, 1)))
}

// ordinal is n as 1st, 2nd, 3rd, 4th….
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// keyOf is the attempt's key of calls in flight in its document doc, by the
// name it is kept by (keyName): "" for none. An expression that fails on
// the document refuses the step (a *PermanentError); one out of time is
// workflow.ErrExpressionTimeout.
func (h *Handler) keyOf(ctx context.Context, doc workflow.Document) (string, error) {
	key, err := h.cfg.PerKey.KeyFor(doc)
	if err != nil && !errors.Is(err, workflow.ErrExpressionTimeout) {
		return "", &PermanentError{Status: 0, Body: fmt.Sprintf("%s's key of its calls in flight: %v", h.cfg.Name, err), Cause: err}
	}
	if err != nil || key == "" {
		return "", err
	}
	return h.keyName(ctx, key)
}
