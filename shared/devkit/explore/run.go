package explore

import (
	"context"
	"time"

	"github.com/sas-go/sas/shared/message"
)

// steps bounds the explorer's free choices in one run (a large run has
// more); then it drains: no more faults, everything delivered, answered and
// swept until every order ends (it must).
const steps = 80

// maxDrain bounds the drain's steps per order (and per ten items).
const maxDrain = 5000

// runTime bounds one run's real time (a large run's, largeRunTime): a run
// that takes longer is stuck.
const (
	runTime      = time.Minute
	largeRunTime = 4 * time.Minute
)

// run plays the run's orders through the world: the first sent (the others
// with it, or later), then free choices (what to deliver, one at a time or
// several at once, drop, repeat or delay, how each call ends, when events,
// callbacks, cancels, pauses, hold decisions and sweeps come, when time
// passes), then the drain. A large run plays its scenario first.
func (w *World) run(ctx context.Context) error {
	limit, n := runTime, steps
	if w.scenario != none {
		limit, n = largeRunTime, 3*steps
	}
	limit = max(limit, w.runTime)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	w.ctx = ctx
	w.sendOrder(w.orders[0])
	for _, o := range w.orders[1:] {
		if w.rng.IntN(2) == 0 {
			w.sendOrder(o)
		}
	}
	w.script(ctx)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if i%10 == 9 && len(w.parked) == 0 && w.unsent() == nil {
			if done, _ := w.loadEnds(ctx); done {
				break
			}
		}
		w.choose(ctx)
	}
	return w.drain(ctx)
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
		w.answerSome()
	case r < 13 && len(w.sleeping) > 0, r < 55 && len(w.sleeping) > 0 && len(visible) == 0:
		w.expire(w.nextSleeper().until)
	case r < 50 && len(visible) > 0:
		m := visible[w.rng.IntN(len(visible))]
		w.setCrashing(w.faulty && w.rng.IntN(12) == 0)
		w.note("deliver %s %s", m.queue, brief(m.body))
		w.deliver(m)
		w.setCrashing(false)
	case r < 54 && len(visible) > 1:
		w.deliverAtOnce(visible)
	case r < 56 && len(visible) > 0:
		m := visible[w.rng.IntN(len(visible))]
		w.note("sweep beside deliver %s %s", m.queue, brief(m.body))
		w.count("sweeps beside a handler")
		w.sweep(m)
	case r < 59 && len(visible) > 0: // delivered twice: SQS delivers at least once
		m := visible[w.rng.IntN(len(visible))]
		w.note("deliver twice %s %s", m.queue, brief(m.body))
		w.send(m.queue, m.body, 0)
		w.deliver(m)
	case r < 62 && len(visible) > 0 && w.faulty:
		w.drop(visible[w.rng.IntN(len(visible))])
	case r < 66 && len(visible) > 0 && (w.faulty || !w.isCallback(visible[0])):
		m := visible[0]
		d := time.Duration(1+w.rng.IntN(20)) * time.Second
		w.note("delay %s by %s", m.queue, d)
		w.q.hide(m, w.clock().Add(d))
	default:
		w.chooseElse(ctx, r)
	}
}

// chooseElse is choose's other steps: what the world's people do, sweeps,
// progress without faults, or time passing.
func (w *World) chooseElse(ctx context.Context, r int) {
	if w.bulker != nil && (w.bulker.IntN(15) == 0 || w.heldOrder(ctx) != nil && w.bulker.IntN(3) == 0) { // an operator acts by query
		w.bulk(ctx)
		return
	}
	if w.next != nil && w.mover.IntN(10) == 0 {
		if o := w.randomOrder(w.mover); o != nil {
			w.move(ctx, o)
			return
		}
	}
	switch {
	case r < 76 && w.faulty && w.keyedAccepted() != nil && w.rng.IntN(8) == 0:
		// An accepted async call holding its key's slot, cancelled before
		// its callback (rare otherwise): the cancel passes the slot to its
		// undo (keyline.Store.Pass).
		w.count("cancels of an accepted async call holding its key's slot")
		w.cancel(w.keyedAccepted())
	case r < 71 && len(w.async) > 0:
		w.callback(w.async[w.rng.IntN(len(w.async))], w.faulty && w.rng.IntN(5) == 0)
	case r < 74 && w.waits() && w.randomOrder(w.rng) != nil:
		w.event(w.randomOrder(w.rng))
	case r < 76 && w.faulty && w.rng.IntN(25) == 0 && w.randomOrder(w.rng) != nil:
		w.cancel(w.randomOrder(w.rng))
	case r < 81 && w.heldNow(ctx) != nil:
		w.decideHold(ctx, w.heldNow(ctx))
	case r < 84 && w.rng.IntN(3) == 0:
		w.pauseOrResume(ctx)
	case r < 87 && w.unsent() != nil:
		w.sendOrder(w.unsent())
	case r < 90:
		w.sweep()
	case !w.faulty && len(w.parked) > 0: // with no fault, no call outlasts its attempt
		w.note("answer %s %s: done", w.parked[0].agent, w.parked[0].key)
		w.answer(w.parked[0], answerDone)
	case !w.faulty && len(w.async) > 0:
		w.callback(w.async[0], false)
	case !w.faulty && w.eventless() != nil:
		w.event(w.eventless())
	default:
		w.tick()
	}
}

// deliverAtOnce delivers two or three of visible at once: their handlers
// race on the store.
func (w *World) deliverAtOnce(visible []*msg) {
	n := min(2+w.rng.IntN(2), len(visible))
	var msgs []*msg
	for _, i := range w.rng.Perm(len(visible))[:n] {
		msgs = append(msgs, visible[i])
		w.note("deliver at once %s %s", visible[i].queue, brief(visible[i].body))
	}
	w.count("invocations at once")
	w.deliver(msgs...)
}

// drop loses m, unless it is what a client sent (an order, a cancel): SQS
// keeps what it took; the explorer loses only what the pipeline sends (a
// send lost with its sender) and events.
func (w *World) drop(m *msg) {
	if w.fromClient(m) {
		return
	}
	w.note("drop %s %s", m.queue, brief(m.body))
	w.dropped++
	w.q.remove(m)
}

func (w *World) fromClient(m *msg) bool {
	if m.queue != w.topo.OrdersQueue().Name {
		return false
	}
	v, err := message.DecodeOrdersMessage(w.sent(m), w.set)
	if err != nil {
		return false
	}
	_, isEvent := v.(message.Event)
	return !isEvent
}

// isCallback reports whether m is an async call's callback.
func (w *World) isCallback(m *msg) bool {
	if m.queue != w.topo.OrdersQueue().Name {
		return false
	}
	v, err := message.DecodeOrdersMessage(w.sent(m), w.set)
	e, ok := v.(message.Event)
	return err == nil && ok && e.Token != ""
}

// eventless is an order sent that never had its wait's event sent (nil:
// none, or the workflow waits for none).
func (w *World) eventless() *order {
	name := w.waitName()
	if name == "" {
		return nil
	}
	for _, o := range w.orders {
		if o.sent && o.events[name] == 0 && !o.end.State.Ended() {
			return o
		}
	}
	return nil
}

// nextSleeper is the sleeper whose time comes first.
func (w *World) nextSleeper() *sleeper {
	var s *sleeper
	for _, x := range w.sleeping {
		if s == nil || x.until.Before(s.until) {
			s = x
		}
	}
	return s
}

func brief(body string) string {
	if len(body) > 90 {
		return body[:90] + "…"
	}
	return body
}

// tick moves the clock on: to the next message's return, or by up to a
// pickup timeout.
func (w *World) tick() {
	next := w.q.nextVisible(w.consumed()...)
	if next.IsZero() || w.rng.IntN(2) == 0 {
		next = w.clock().Add(time.Duration(1+w.rng.IntN(int(w.def.PickupTimeout/time.Second))) * time.Second)
	}
	w.note("tick to %s", next.Format("15:04:05"))
	w.expire(next)
}

// keyedAccepted is the first order, not cancelled, with an async call its
// service accepted of an agent with calls in flight per key (nil: none).
func (w *World) keyedAccepted() *order {
	for _, a := range w.async {
		if a.busy && a.order != nil && !a.order.cancelled && w.flows[a.agent].perKey != nil {
			return a.order
		}
	}
	return nil
}
