package explore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/statestore"
)

// drain ends the run: no more faults, agents resumed, every order sent;
// every call answered, every message delivered, the events the waits need
// sent, sleepers woken, the Supervisor sweeping and the clock moving, until
// every order has ended and left the deadline index; then every message
// left (a delayed one too) is delivered. It fails if that takes longer than
// the orders' deadline, twice (their compensation's) and a margin.
func (w *World) drain(ctx context.Context) error {
	w.faulty = false
	w.note("drain")
	for _, a := range slices.Sorted(maps.Keys(w.paused)) {
		w.resume(ctx, a)
	}
	for o := w.unsent(); o != nil; o = w.unsent() {
		w.sendOrder(o)
	}
	limit := w.clock().Add(2*w.def.Deadline + time.Hour)
	for n := 0; ; n++ {
		visible := w.q.visible(w.consumed()...)
		if len(visible) == 0 && len(w.parked) == 0 && len(w.async) == 0 && len(w.sleeping) == 0 {
			done, err := w.loadEnds(ctx)
			if err != nil {
				return err
			}
			if done {
				w.emptyQueues(ctx)
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the run took more than its real time (stuck?)")
		}
		if w.clock().After(limit) || n > maxDrain*len(w.orders)*max(w.orders[0].items/10, 1) {
			w.noteRecords(ctx)
			return fmt.Errorf("not every order ended and left the deadline index (%s) by %s, the limit of their deadlines",
				w.states(), limit.Format(time.RFC3339))
		}
		w.drainStep(n, visible)
	}
}

// drainStep is one step of the drain.
func (w *World) drainStep(n int, visible []*msg) {
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
	case w.eventless() != nil:
		w.event(w.eventless())
	case len(w.sleeping) > 0:
		w.expire(w.nextSleeper().until)
	case n%2 == 0:
		w.sweep()
	default:
		next := w.q.nextVisible(w.consumed()...)
		if next.IsZero() || next.After(w.clock().Add(w.def.PickupTimeout)) {
			next = w.clock().Add(w.def.PickupTimeout)
		}
		w.note("tick to %s", next.Format("15:04:05"))
		w.expire(next)
	}
}

// emptyQueues delivers every message left once the orders ended, a
// delayed one at its time (a call waiting in its key's line, its fallback
// poll): each finds its order ended, and takes it out of what it waited in.
func (w *World) emptyQueues(ctx context.Context) {
	for n := 0; n < 500 && ctx.Err() == nil; n++ {
		visible := w.q.visible(w.consumed()...)
		switch {
		case len(w.parked) > 0:
			w.answer(w.parked[0], answerDone)
		case len(visible) > 0:
			w.note("deliver %s %s", visible[0].queue, brief(visible[0].body))
			w.deliver(visible[0])
		case len(w.sleeping) > 0:
			w.expire(w.nextSleeper().until)
		case len(w.async) > 0:
			w.callback(w.async[0], false)
		default:
			next := w.q.nextVisible(w.consumed()...)
			if next.IsZero() {
				return
			}
			w.expire(next)
		}
	}
}

// loadEnds reads each order's task into its end, and reports whether every
// order has ended and left the deadline index.
func (w *World) loadEnds(ctx context.Context) (bool, error) {
	done := true
	for _, o := range w.orders {
		task, _, err := w.store.Load(ctx, o.id)
		if err != nil && !errors.Is(err, statestore.ErrNotFound) {
			return false, err
		}
		o.end = task
		done = done && task.State.Ended() && task.Due.IsZero()
	}
	return done, nil
}

// states are the orders' states, as last loaded.
func (w *World) states() string {
	var s []string
	for _, o := range w.orders {
		s = append(s, fmt.Sprintf("%s %s due %s", o.id, o.end.State, o.end.Due.Format(time.RFC3339)))
	}
	return fmt.Sprint(s)
}

// noteRecords notes the orders' records as they are, for a failure's report.
func (w *World) noteRecords(ctx context.Context) {
	for _, o := range w.orders {
		_, recs, err := w.store.Load(ctx, o.id)
		if err != nil {
			w.note("records of %s: %v", o.id, err)
			continue
		}
		for _, r := range recs {
			w.note("record %s/%s: %s attempt %d due %s stopped %v unalerted %v alerted %v", o.id, r.RecordName(), r.State, r.Attempt,
				r.DueAt.Format("15:04:05"), r.Stopped, r.Unalerted, r.Alerted)
		}
	}
}
