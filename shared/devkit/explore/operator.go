package explore

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/sas-go/sas/shared/devkit/hostile"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/workflow"
)

// What the world's people do: customers send orders and cancel them, other
// systems send events, operators decide on held orders and pause agents,
// the Supervisor's schedule sweeps.

// sendOrder sends o, as its client does.
func (w *World) sendOrder(o *order) {
	o.sent = true
	w.sendFromOutside(o.body())
	w.note("order %s of %s sent (%d items, customer %s), faults %v", o.id, w.def.Name, o.items, o.customer, w.faulty)
}

// unsent is the next order not sent yet (nil: all are).
func (w *World) unsent() *order {
	for _, o := range w.orders {
		if !o.sent {
			return o
		}
	}
	return nil
}

// waits reports whether the workflow waits for an event.
func (w *World) waits() bool { return w.waitName() != "" }

func (w *World) waitName() string {
	for _, st := range w.def.Steps {
		if st.Wait != nil {
			return st.Wait.Event
		}
	}
	return ""
}

// event sends o the event its workflow's wait waits for: at any time
// (before its order reaches it, or after), perhaps again, perhaps with
// another eventId.
func (w *World) event(o *order) {
	name := w.waitName()
	id := "e-" + name
	if w.faulty && w.rng.IntN(6) == 0 {
		id += "-other"
	}
	o.events[name]++
	b, _ := hostile.Marshal(message.Event{Kind: message.KindEvent, OrderID: o.id, Event: name, EventID: id,
		Data: w.eventData(o.id, id)}) // its data as its client wrote it
	w.note("event %s for %s (%s)", name, o.id, id)
	w.sendFromOutside(string(b))
}

// sendFromOutside sends body, an order, an event or a callback with data
// (what comes from outside the pipeline), to the orders queue: in a payload
// run, one in four by pointer, and any over SQS's limit, as an SQS Extended
// Client sends a body too large for SQS (objects.offload: each send an object of its own; half of
// them at the bucket's root, where a run that does not seal takes them too).
// Submission reads it from the bucket, and, in a sealed run, writes over it
// once it takes it (checkClearCopies).
func (w *World) sendFromOutside(body string) {
	if w.pointing != nil && (w.pointing.IntN(4) == 0 || len(body) > maxMessageBytes) {
		atRoot := w.sealer == nil && w.pointing.IntN(2) == 0
		if atRoot {
			w.count("bodies sent by pointer at the bucket's root")
		}
		ptr := w.bucket.offload(body, atRoot)
		w.mu.Lock()
		w.offloaded[ptr] = body
		w.mu.Unlock()
		w.count("bodies sent by pointer")
		w.note("by pointer: %s", ptr)
		body = ptr
	}
	w.send(w.topo.OrdersQueue().Name, body, 0)
}

// sent is the body m's sender meant: m's, or the one its pointer names.
func (w *World) sent(m *msg) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if b, ok := w.offloaded[m.body]; ok {
		return b
	}
	return m.body
}

// cancel asks for o's cancellation, as a customer or an operator does: a
// cancel message on the orders queue.
func (w *World) cancel(o *order) {
	o.cancelled = true
	w.note("cancel %s", o.id)
	w.send(w.topo.OrdersQueue().Name, mustJSON(message.Cancel{Kind: message.KindCancel, OrderID: o.id, Reason: "the explorer"}), 0)
}

// heldOrders counts the orders a step's failure held (their alerts said so).
func (w *World) heldOrders() int {
	held := map[string]bool{}
	for _, a := range w.alerts {
		if a.OrderState == workflow.Held {
			held[a.OrderID] = true
		}
	}
	return len(held)
}

// heldNow is an order held for its operator now, at random (nil: none).
func (w *World) heldNow(ctx context.Context) *order {
	var held []*order
	for _, o := range w.orders {
		if task, _, err := w.store.Load(ctx, o.id); err == nil && task.State == workflow.Held {
			held = append(held, o)
		}
	}
	if len(held) == 0 {
		return nil
	}
	return held[w.rng.IntN(len(held))]
}

// decideHold is an operator's decision on held order o, at random: retry
// the held step, skip it with a result, or undo the order.
func (w *World) decideHold(ctx context.Context, o *order) {
	w.decide(ctx, o, []outcome.HoldAction{outcome.HoldRetry, outcome.HoldSkip, outcome.HoldUndo}[w.rng.IntN(3)])
}

// decide takes an operator's decision act on held order o. The requests of
// what it makes ready are sent (with faults, perhaps lost: the Supervisor
// finds them unclaimed).
func (w *World) decide(ctx context.Context, o *order, act outcome.HoldAction) {
	snap, err := w.store.Read(ctx, o.id)
	if err != nil {
		w.note("decide on held %s: %v", o.id, err)
		return
	}
	held := snap.Order().Held()
	if len(held) == 0 {
		return
	}
	ref := held[w.rng.IntN(len(held))]
	st, _ := snap.Step(ref)
	d := outcome.HoldDecision{OrderID: o.id, Action: act, Step: st.RecordName(), By: "explorer", Now: w.clock()}
	if act == outcome.HoldSkip {
		d.Result = json.RawMessage(`{"skipped":true}`)
	}
	res, err := outcome.Holds{Store: w.store, Pickup: w.def.PickupTimeout}.Decide(ctx, d)
	w.note("hold: %s %s/%s: %s %v (start %d)", act, o.id, st.RecordName(), res.State, err, len(res.Start))
	w.tooLarge(err)
	if err != nil {
		return
	}
	w.decided[string(act)]++
	if act == outcome.HoldSkip {
		w.skipped[w.key(st)] = true
	}
	if w.faulty && w.rng.IntN(4) == 0 {
		w.note("hold: its starts lost")
		return
	}
	w.start(ctx, o.id, res.Start)
}

// start sends the requests of records of order id made ready.
func (w *World) start(ctx context.Context, id string, refs []workflow.Ref) {
	sts, err := w.store.RecordsOf(ctx, id, refs)
	if err != nil {
		w.note("start %s: %v", id, err)
		return
	}
	for _, st := range sts {
		if st.Kind == workflow.KindAgent {
			w.send(w.topo.AgentRequests(st.Agent).Name, mustJSON(st.Request()), 0)
		} else {
			w.send(w.topo.SchedulerQueue().Name, mustJSON(message.NewSchedule(st.OrderID, st.Ref, st.Workflow, st.WfVersion)), 0)
		}
	}
}

// tooLarge notes a write the state store refused as too large for
// DynamoDB (statestore.ErrTooLarge): the check reports it.
func (w *World) tooLarge(err error) {
	if errors.Is(err, statestore.ErrTooLarge) && len(w.logs.tooLarge) < 3 {
		w.logs.mu.Lock()
		w.logs.tooLarge = append(w.logs.tooLarge, err.Error())
		w.logs.mu.Unlock()
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// pauseOrResume pauses an agent of the workflow, or resumes one paused, as
// an operator does for a provider's maintenance.
func (w *World) pauseOrResume(ctx context.Context) {
	agents := w.def.Agents()
	if len(agents) == 0 {
		return
	}
	a := agents[w.rng.IntN(len(agents))]
	if _, ok := w.paused[a]; ok || len(w.paused) > 0 && w.rng.IntN(2) == 0 {
		w.resume(ctx, slices.Sorted(maps.Keys(w.paused))[0])
		return
	}
	ok, err := w.flow.Pause(ctx, a, "explorer", w.clock())
	w.note("pause %s: %v %v", a, ok, err)
	if err == nil {
		w.mu.Lock()
		w.paused[a] = w.now
		w.mu.Unlock()
		w.count("pauses")
	}
}

func (w *World) resume(ctx context.Context, a string) {
	ok, err := w.flow.Resume(ctx, a)
	w.note("resume %s: %v %v", a, ok, err)
	if err == nil {
		w.mu.Lock()
		delete(w.paused, a)
		w.mu.Unlock()
	}
}

// sweep runs the Supervisor once, alone, or beside the handlers of msgs
// (they race on the store).
func (w *World) sweep(msgs ...*msg) {
	w.setCrashing(w.faulty && len(msgs) == 0 && w.rng.IntN(10) == 0)
	a := &actor{what: "supervisor"}
	var rep supervisor.Report
	w.run1(a, func(ctx context.Context) error {
		var err error
		rep, err = w.sup.Sweep(ctx)
		return err
	})
	started := []*actor{a}
	for _, m := range msgs {
		started = append(started, w.deliverOne(m))
	}
	w.settle(started...)
	w.setCrashing(false)
	w.tooLarge(a.err)
	w.note("sweep: resent %d held %d recovered %d gave up %d woken %d lost races %d err %v", rep.Resent, rep.Held,
		rep.Recovered, rep.GaveUp, rep.Woken, rep.Lost, a.err)
}
