package explore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/shop"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// steps bounds the explorer's free choices in one run; then it drains: no
// more faults, everything delivered, answered and swept until the order
// ends (it must).
const steps = 80

// runTime bounds one run's real time: a run that takes longer is stuck.
const runTime = time.Minute

// run plays one order through the world: the order sent, then steps free
// choices (what to deliver, drop, repeat or delay, how each call ends, when
// events, callbacks, cancels and sweeps come, when time passes), then the
// drain. It returns the order's end as the store has it.
func (w *World) run(ctx context.Context) (statestore.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, runTime)
	defer cancel()
	w.ctx = ctx
	w.send(w.topo.OrdersQueue().Name, w.orderBody(), 0)
	w.note("order %s of %s sent (%d items), faults %v", w.id, w.def.Name, w.items, w.faulty)
	for i := 0; i < steps && ctx.Err() == nil; i++ {
		if i%10 == 9 && len(w.parked) == 0 && w.ended(ctx) {
			break
		}
		w.choose(ctx)
	}
	return w.drain(ctx)
}

func (w *World) orderBody() string {
	o := shop.Order{OrderID: w.id, CustomerID: "c-1"}
	for k := range w.items {
		o.Items = append(o.Items, shop.Item{SKU: "SKU-" + strconv.Itoa(k), Quantity: 1, UnitPriceCents: 100})
	}
	return o.JSON()
}

func (w *World) send(queueName, body string, delay int32) {
	_, _ = w.q.SendMessage(context.Background(), sendInput(w.url(queueName), body, delay))
}

// choose takes one free step.
func (w *World) choose(ctx context.Context) {
	r := w.rng.IntN(100)
	visible := w.q.visible(w.consumed()...)
	switch {
	case r < 10 && len(w.parked) > 0, r < 45 && len(w.parked) > 0 && len(visible) == 0:
		c := w.parked[w.rng.IntN(len(w.parked))]
		kind := answerDone
		if w.faulty {
			kind = outcomeKind(pick(w.rng, 70, 6, 10, 7, 7))
		}
		w.note("answer %s %s: %s", c.agent, c.key, kind)
		if kind == answerHang { // time passes to its deadline, and past anything due before
			w.expire(c.deadline.Add(time.Millisecond))
			break
		}
		w.answer(c, kind)
	case r < 55 && len(visible) > 0:
		m := visible[w.rng.IntN(len(visible))]
		w.crashing = w.faulty && w.rng.IntN(12) == 0
		w.note("deliver %s %s", m.queue, brief(m.body))
		w.deliver(m)
	case r < 59 && len(visible) > 0: // delivered twice: SQS delivers at least once
		m := visible[w.rng.IntN(len(visible))]
		w.note("deliver twice %s %s", m.queue, brief(m.body))
		w.send(m.queue, m.body, 0)
		w.deliver(m)
	case r < 62 && len(visible) > 0 && w.faulty && !w.isOrder(visible): // lost (the order itself is in SQS: it is not)
		m := visible[w.rng.IntN(len(visible))]
		w.note("drop %s %s", m.queue, brief(m.body))
		w.q.remove(m)
	case r < 66 && len(visible) > 0:
		m := visible[w.rng.IntN(len(visible))]
		d := time.Duration(1+w.rng.IntN(20)) * time.Second
		w.note("delay %s by %s", m.queue, d)
		w.q.hide(m, w.clock().Add(d))
	case r < 72 && len(w.async) > 0:
		w.callback(w.async[w.rng.IntN(len(w.async))], w.faulty && w.rng.IntN(5) == 0)
	case r < 76 && w.waits():
		w.event()
	case r < 78 && w.faulty && w.rng.IntN(12) == 0:
		w.cancel(ctx)
	case r < 86 && w.heldNow(ctx):
		w.decideHold(ctx)
	case r < 88:
		w.sweep(ctx)
	case !w.faulty && len(w.parked) > 0: // with no fault, no call outlasts its attempt
		w.answer(w.parked[0], answerDone)
	case !w.faulty && len(w.async) > 0:
		w.callback(w.async[0], false)
	case !w.faulty && w.waits() && w.sent[w.waitName()] == 0:
		w.event()
	default:
		w.tick()
	}
}

// pick is an index of weights, at random.
func pick(rng interface{ IntN(int) int }, weights ...int) int {
	total := 0
	for _, x := range weights {
		total += x
	}
	n := rng.IntN(total)
	for i, x := range weights {
		if n < x {
			return i
		}
		n -= x
	}
	return len(weights) - 1
}

func brief(body string) string {
	if len(body) > 90 {
		return body[:90] + "…"
	}
	return body
}

// callback answers an accepted async call: its effect applied and its data
// sent back, or its refusal; perhaps twice.
func (w *World) callback(c *call, refuse bool) {
	if c.refused != nil {
		refuse = *c.refused // a repeat of the callback
	}
	c.refused = &refuse
	e := message.Event{Kind: message.KindEvent, OrderID: w.id, Token: c.token}
	switch {
	case refuse:
		e.Error = "refused later by the explorer"
	case w.undoneFirst(c.key):
		// Its undo came first (a cancel gave the accepted attempt back):
		// the service, as the contract asks, drops the work it had
		// accepted; its callback still comes, and is refused.
		w.note("callback %s: its undo came first, its work dropped", c.key)
		e.Data = json.RawMessage(`{"dropped":true}`)
	default:
		w.ledger.apply(c.key)
		e.Data = json.RawMessage(fmt.Sprintf(`{"key":%q}`, c.key))
	}
	if !w.faulty || w.rng.IntN(4) > 0 {
		w.async = remove(w.async, c) // else: it may come again
	}
	b, _ := json.Marshal(e)
	w.note("callback %s refused=%v", c.key, refuse)
	w.send(w.topo.OrdersQueue().Name, string(b), 0)
}

// undoneFirst reports whether the undo of the step whose idempotency key
// is key reached its service: an async call accepted before it must not
// take effect after it (docs/workflows.md: a cancel undoes an accepted
// async step without awaiting its callback).
func (w *World) undoneFirst(key string) bool {
	rec := strings.TrimPrefix(key, w.id+"/")
	name, item, _ := strings.Cut(rec, "#")
	for _, st := range w.def.Steps {
		if st.Name != name || st.Undo == nil {
			continue
		}
		undo := st.Undo.Name
		if item != "" {
			undo += "#" + item
		}
		return w.ledger.at(w.id+"/"+undo) >= 0
	}
	return false
}

// waits reports whether the workflow waits for an event.
func (w *World) waits() bool {
	for _, st := range w.def.Steps {
		if st.Wait != nil {
			return true
		}
	}
	return false
}

// event sends the event a wait of the workflow waits for: at any time
// (before its order reaches it, or after), perhaps again, perhaps with
// another eventId.
func (w *World) event() {
	for _, st := range w.def.Steps {
		if st.Wait == nil {
			continue
		}
		id := "e-" + st.Wait.Event
		if w.faulty && w.rng.IntN(6) == 0 {
			id += "-other"
		}
		w.sent[st.Wait.Event]++
		b, _ := json.Marshal(message.Event{Kind: message.KindEvent, OrderID: w.id, Event: st.Wait.Event, EventID: id,
			Data: json.RawMessage(`{"approved":true}`)})
		w.note("event %s (%s)", st.Wait.Event, id)
		w.send(w.topo.OrdersQueue().Name, string(b), 0)
	}
}

// cancel asks for the order's cancellation, as an operator does.
func (w *World) cancel(ctx context.Context) {
	k := outcome.Canceller{Store: w.store}
	res, err := k.Cancel(ctx, statestore.CancelRequest{OrderID: w.id, By: "explorer", Pickup: w.def.PickupTimeout, Now: w.clock()})
	w.cancelled = true
	w.note("cancel: %v %v", res.Verdict, err)
	if err == nil && res.Undo != nil {
		sts, err := w.store.RecordsOf(ctx, w.id, []workflow.Ref{*res.Undo})
		if err == nil {
			w.send(w.topo.AgentRequests(sts[0].Agent).Name, mustJSON(sts[0].Request()), 0)
		}
	}
}

// wasHeld reports whether a step's failure held the order (its alert said
// so).
func (w *World) wasHeld() bool {
	for _, a := range w.alerts {
		if a.OrderState == workflow.Held {
			return true
		}
	}
	return false
}

// heldNow reports whether the order is held for its operator.
func (w *World) heldNow(ctx context.Context) bool {
	task, _, err := w.store.Load(ctx, w.id)
	return err == nil && task.State == workflow.Held
}

// decideHold is an operator's decision on the held order, at random: retry
// the held step, skip it with a result, or undo the order. The requests of
// what it makes ready are sent (with faults, perhaps lost: the Supervisor
// finds them unclaimed).
func (w *World) decideHold(ctx context.Context) {
	snap, err := w.store.Read(ctx, w.id)
	if err != nil {
		w.note("decide on the held order: %v", err)
		return
	}
	held := snap.Order().Held()
	if len(held) == 0 {
		return
	}
	ref := held[w.rng.IntN(len(held))]
	st, _ := snap.Step(ref)
	act := []outcome.HoldAction{outcome.HoldRetry, outcome.HoldSkip, outcome.HoldUndo}[w.rng.IntN(3)]
	d := outcome.HoldDecision{OrderID: w.id, Action: act, Step: st.RecordName(), By: "explorer", Now: w.clock()}
	if act == outcome.HoldSkip {
		d.Result = json.RawMessage(`{"skipped":true}`)
	}
	res, err := outcome.Holds{Store: w.store, Pickup: w.def.PickupTimeout}.Decide(ctx, d)
	w.note("hold: %s %s: %s %v (start %v)", act, st.RecordName(), res.State, err, res.Start)
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
	sts, err := w.store.RecordsOf(ctx, w.id, res.Start)
	if err != nil {
		w.note("hold: %v", err)
		return
	}
	for _, st := range sts {
		if st.Kind == workflow.KindAgent {
			w.send(w.topo.AgentRequests(st.Agent).Name, mustJSON(st.Request()), 0)
		} else {
			w.send(w.topo.SchedulerQueue().Name, mustJSON(message.NewSchedule(st.OrderID, st.Ref(), st.Workflow, st.WfVersion)), 0)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// sweep runs the Supervisor once.
func (w *World) sweep(ctx context.Context) {
	w.crashing = w.faulty && w.rng.IntN(10) == 0
	rep, err := w.sup.Sweep(ctx)
	w.crashing = false
	w.note("sweep: resent %d held %d recovered %d gave up %d woken %d lost races %d err %v", rep.Resent, rep.Held,
		rep.Recovered, rep.GaveUp, rep.Woken, rep.Lost, err)
}

// tick moves the clock on: to the next message's return, or by up to a
// pickup timeout.
func (w *World) tick() {
	next := w.q.nextVisible()
	if next.IsZero() || w.rng.IntN(2) == 0 {
		next = w.clock().Add(time.Duration(1+w.rng.IntN(int(w.def.PickupTimeout/time.Second))) * time.Second)
	}
	w.note("tick to %s", next.Format("15:04:05"))
	w.expire(next)
}

// ended reports whether the order has ended.
func (w *World) ended(ctx context.Context) bool {
	task, _, err := w.store.Load(ctx, w.id)
	return err == nil && task.State.Ended()
}

// drain ends the run: no more faults; every call answered, every message
// delivered, the events the waits need sent, the Supervisor sweeping and the
// clock moving, until the order has ended and left the deadline index. It
// fails if that takes longer than the order's deadline, twice (its
// compensation's) and a margin.
func (w *World) drain(ctx context.Context) (statestore.Task, error) {
	w.faulty = false
	w.note("drain")
	limit := w.clock().Add(2*w.def.Deadline + time.Hour)
	var task statestore.Task
	for n := 0; ; n++ {
		visible := w.q.visible(w.consumed()...)
		if len(visible) == 0 && len(w.parked) == 0 && len(w.async) == 0 {
			var err error
			if task, _, err = w.store.Load(ctx, w.id); err != nil && !errors.Is(err, statestore.ErrNotFound) {
				return task, err
			}
			if task.State.Ended() && task.Due.IsZero() {
				return task, nil // ended, and out of the deadline index
			}
		}
		if ctx.Err() != nil {
			return task, fmt.Errorf("order %s: the run took more than %s of real time (stuck?)", w.id, runTime)
		}
		if w.clock().After(limit) || n > 5000 {
			w.noteRecords(ctx)
			return task, fmt.Errorf("order %s did not end and leave the deadline index (it is %s, due %s) by %s, the limit of its deadlines",
				w.id, task.State, task.Due.Format(time.RFC3339), limit.Format(time.RFC3339))
		}
		switch {
		case len(w.parked) > 0:
			c := w.parked[0]
			w.note("answer %s %s: done", c.agent, c.key)
			w.answer(c, answerDone)
		case len(visible) > 0:
			w.note("deliver %s %s", visible[0].queue, brief(visible[0].body))
			w.deliver(visible[0])
		case len(w.async) > 0:
			w.callback(w.async[0], false)
		case w.waits() && w.sent[w.waitName()] == 0 && !task.State.Ended():
			w.event()
		case n%2 == 0:
			w.sweep(ctx)
		default:
			next := w.q.nextVisible()
			if next.IsZero() || next.After(w.clock().Add(w.def.PickupTimeout)) {
				next = w.clock().Add(w.def.PickupTimeout)
			}
			w.note("tick to %s", next.Format("15:04:05"))
			w.expire(next)
		}
	}
}

func (w *World) waitName() string {
	for _, st := range w.def.Steps {
		if st.Wait != nil {
			return st.Wait.Event
		}
	}
	return ""
}

// isOrder reports whether the first of msgs a drop would pick could be the
// order as its client sent it: SQS keeps what it took; the explorer loses
// only what the pipeline sends (a send lost with its sender).
func (w *World) isOrder(msgs []*msg) bool {
	for _, m := range msgs {
		if m.queue == w.topo.OrdersQueue().Name && m.body == w.orderBody() {
			return true
		}
	}
	return false
}

// noteRecords notes the order's records as they are, for a failure's report.
func (w *World) noteRecords(ctx context.Context) {
	_, recs, err := w.store.Load(ctx, w.id)
	if err != nil {
		w.note("records: %v", err)
		return
	}
	for _, r := range recs {
		w.note("record %s: %s attempt %d due %s stopped %v unalerted %v alerted %v", r.RecordName(), r.State, r.Attempt,
			r.DueAt.Format("15:04:05"), r.Stopped, r.Unalerted, r.Alerted)
	}
}
