package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// A call whose key's slots are all held (workflow.Agent.PerKey) waits in the
// key's line, first come first served (flow.Store.Wait): its attempt is
// given back once, and the holder that lets a slot go sends the request of
// the first in line, whose slot is reserved for it (flow.ReserveFor). So a
// waiting call costs no claim, no give-back and no SQS message a second,
// and the state item does not grow while it waits. Its own request is sent
// again for the earliest time a holder's hold ends by itself (a crashed
// Agent's, at its CompleteBy), at most KeyPoll later: a fallback, in case a
// hand-off is lost.

// KeyPoll bounds how long a call waiting in its key's line waits before it
// looks again by itself.
const KeyPoll = 5 * time.Minute

// keyName is what a key of value is kept, shown and logged by: its name
// under the agent's secret in a sealed deployment (flow.Namer: failing, the
// call waits, as for any store's failure), else flow.ShortKey's.
func (h *Handler) keyName(ctx context.Context, value string) (string, error) {
	if h.names != nil {
		return h.names.Name(ctx, value)
	}
	return flow.ShortKey(value), nil
}

// slotWait is what holding a slot of key decided for a claimed attempt:
// held (let lets it go at the call's end), or waiting with its attempt to
// give back (wait, why).
type slotWait struct {
	held bool
	wait time.Duration
	why  string
}

// holdSlot takes a slot of key for the claimed attempt st, or puts it in the
// key's line.
func (h *Handler) holdSlot(ctx context.Context, st *statestore.Step, req message.AgentRequest, key string) (slotWait, error) {
	holder := flow.Holder(st.OrderID, st.Ref(), st.Round, st.Attempt)
	limit := h.cfg.PerKey.InFlight
	hold, err := h.gate.Store.Hold(ctx, h.cfg.Name, key, limit, holder, st.CompleteBy, h.Now())
	if err != nil {
		h.letSlot(ctx, st, key) // the hold may have been written, its answer lost: its attempt is given back
		return slotWait{}, err
	}
	h.handOn(ctx, hold.Handed)
	if hold.Held {
		return slotWait{held: true}, nil
	}
	line, err := message.Encode(req.Waiting(st.Round, key), flow.MaxWaiterRequestBytes)
	if errors.Is(err, message.ErrTooLarge) {
		return slotWait{wait: KeyWait, why: fmt.Sprintf("waiting for a slot of key %q (its request too large for its line)", key)}, nil
	}
	if err != nil {
		return slotWait{}, fmt.Errorf("encode %s's place in line: %w", st.OrderID, err)
	}
	place, err := h.gate.Store.Wait(ctx, h.cfg.Name, key, limit, flow.Waiter{ID: flow.WaiterOf(holder), Request: line}, h.Now())
	if errors.Is(err, flow.ErrWaiterTooLarge) || (err == nil && place.Position == 0 && !place.Reserved) {
		// No place in line (too long, or too large a request): it looks
		// again a second later.
		return slotWait{wait: KeyWait, why: fmt.Sprintf("waiting for a slot of key %q (its line is full)", key)}, nil
	}
	if err != nil {
		// Its place may have been written, its answer lost: its request
		// is sent again, and the place taken out of line.
		h.leave(ctx, st.OrderID, key, flow.WaiterOf(holder))
		return slotWait{}, err
	}
	h.handOn(ctx, place.Handed)
	if place.Reserved { // a slot came free meanwhile, and it is first
		hold, err := h.gate.Store.Hold(ctx, h.cfg.Name, key, limit, holder, st.CompleteBy, h.Now())
		if err != nil {
			h.letSlot(ctx, st, key)
			h.leave(ctx, st.OrderID, key, flow.WaiterOf(holder))
			return slotWait{}, err
		}
		h.handOn(ctx, hold.Handed)
		if hold.Held {
			return slotWait{held: true}, nil
		}
	}
	poll := KeyPoll
	if !place.Next.IsZero() {
		poll = min(max(place.Next.Sub(h.Now()), KeyWait), KeyPoll)
	}
	return slotWait{wait: poll, why: fmt.Sprintf("waiting for a slot of key %q (%s in line)", key, ordinal(place.Position))}, nil
}

// letSlot lets the attempt's slot of key go, if it holds it, and sends the
// request of whom it was handed to.
func (h *Handler) letSlot(ctx context.Context, st *statestore.Step, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	holder := flow.Holder(st.OrderID, st.Ref(), st.Round, st.Attempt)
	handed, err := h.gate.Store.Let(ctx, h.cfg.Name, key, holder, h.Now())
	if err != nil {
		h.log.Warn(flow.NotLetGo, "order_id", st.OrderID, "key", key, "holder", holder, "err", err)
		return
	}
	h.handOn(ctx, handed)
}

// NotOutOfLine is what an Agent logs when a call could not be taken out of
// its key's line (the state store failed): a slot reserved for it is free
// after flow.ReserveFor, and one handed to it finds nothing to run.
const NotOutOfLine = "a call not taken out of its key's line: its reservation ends by itself"

// leave takes waiter out of key's line, if it is in it, handing on what it
// held (best effort: a place left frees its reservation after
// flow.ReserveFor).
func (h *Handler) leave(ctx context.Context, orderID, key, waiter string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	handed, err := h.gate.Store.Leave(ctx, h.cfg.Name, key, waiter, h.Now())
	if err != nil {
		h.log.Warn(NotOutOfLine, "order_id", orderID, "key", key, "waiter", waiter, "err", err)
		return
	}
	h.handOn(ctx, handed)
}

// handOn sends the requests of the waiters a slot was handed to. A request
// lost here frees its reservation after flow.ReserveFor, and its waiter
// looks again by itself.
func (h *Handler) handOn(ctx context.Context, handed []flow.Waiter) {
	for _, w := range handed {
		if err := h.send.SendJSON(ctx, h.cfg.RequestQueueURL, json.RawMessage(w.Request), 0); err != nil {
			h.log.Warn("a slot's hand-off not sent: its reservation ends by itself", "waiter", w.ID, "err", err)
		}
	}
}

// leaveLine takes a request that no longer has anything to run out of its
// key's line (its order was cancelled or ended while it waited), handing
// what it held on.
func (h *Handler) leaveLine(ctx context.Context, req message.AgentRequest) {
	if h.gate == nil || req.Slot == "" {
		return
	}
	st, err := h.store.Record(ctx, req.OrderID, req.Ref())
	if err == nil && (st.State == workflow.Processing || (st.State == workflow.Pending && !st.Stopped && !st.DueAt.IsZero())) {
		return // another request of it runs it, or will: it keeps its place
	}
	h.leave(ctx, req.OrderID, req.Slot, flow.WaiterID(req.OrderID, req.Ref(), max(req.Round, 1)))
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
