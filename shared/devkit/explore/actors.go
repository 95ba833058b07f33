package explore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/offload"
)

// actor is one handler invocation: it runs until it ends, or parks in a
// service call or a sleep.
type actor struct {
	m    *msg // nil: a sweep
	what string
	inst *instance // an Agent's: busy until it ends
	resp events.SQSEventResponse
	err  error
	// rejected: the invocation sent its message to a DLQ (set in its own
	// goroutine, read once it ended).
	rejected bool
}

// actorKey carries an invocation's actor in its context: a service call or
// a sleep made under it parks it.
type actorKey struct{}

func actorOf(ctx context.Context) *actor {
	a, _ := ctx.Value(actorKey{}).(*actor)
	return a
}

// parking is an invocation parked: in a service call, or asleep.
type parking struct {
	call  *call
	sleep *sleeper
}

// sleeper is an invocation asleep (a backoff, a wait for its rate turn)
// until the explorer's clock reaches until.
type sleeper struct {
	actor *actor
	until time.Time
	why   string
	wake  chan struct{}
}

// sleeper is a Sleep of the handlers: the invocation parks until the
// explorer wakes it, at until and not before (the clock moves there).
func (w *World) sleeper(why string) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		a := actorOf(ctx)
		if a == nil || d <= 0 {
			return ctx.Err()
		}
		s := &sleeper{actor: a, until: w.clock().Add(d), why: why, wake: make(chan struct{})}
		w.count("sleeps: " + why)
		select {
		case w.yields <- parking{sleep: s}:
		case <-w.ctx.Done():
			return w.ctx.Err()
		}
		select {
		case <-s.wake:
		case <-w.ctx.Done():
			return w.ctx.Err()
		}
		return ctx.Err()
	}
}

// deliver hands each of msgs to its queue's consumer, as one SQS delivery
// each, all at once: in flight (invisible) while handled, deleted once
// handled, back after the visibility timeout if it failed. It returns when
// every invocation has ended or parked.
func (w *World) deliver(msgs ...*msg) {
	var started []*actor
	for _, m := range msgs {
		started = append(started, w.deliverOne(m))
	}
	w.settle(started...)
}

// deliverOne starts the invocation that handles m.
func (w *World) deliverOne(m *msg) *actor {
	m.receives++
	w.q.hide(m, w.clock().Add(visibility))
	w.mu.Lock()
	if body, ok := w.offloaded[m.body]; ok {
		if _, key, _ := offload.Pointer(m.body); string(w.bucket.object(key)) != body {
			w.drove["pointers delivered again once written over"]++
		}
	}
	w.mu.Unlock()
	handle, what, inst := w.consumer(m.queue)
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: m.id, Body: m.body, EventSourceARN: "arn:aws:sqs:::" + m.queue,
		Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives),
			"SentTimestamp": strconv.FormatInt(m.sentAt.UnixMilli(), 10)}}}}
	a := &actor{m: m, what: what, inst: inst}
	w.run1(a, func(ctx context.Context) error {
		var err error
		a.resp, err = handle(ctx, ev)
		return err
	})
	return a
}

// run1 runs f as a's invocation, in its own goroutine.
func (w *World) run1(a *actor, f func(context.Context) error) {
	ctx := context.WithValue(context.Background(), actorKey{}, a)
	go func() {
		a.err = f(ctx)
		select {
		case w.finished <- a:
		case <-w.ctx.Done():
		}
	}()
}

// settle waits for each of actors to end or park (or for the run's real
// time to end: an invocation that does neither is stuck).
func (w *World) settle(actors ...*actor) {
	for n := len(actors); n > 0; n-- {
		select {
		case <-w.ctx.Done():
			var names []string
			for _, a := range actors {
				names = append(names, a.what)
			}
			w.note("  %s neither ended nor parked: stuck", strings.Join(names, ", "))
			return
		case a := <-w.finished:
			w.ended(a)
		case p := <-w.yields:
			w.park(p)
		}
	}
}

// ended takes the end of a's invocation: its message deleted, or left to
// come back after its visibility timeout.
func (w *World) ended(a *actor) {
	if a.inst != nil {
		a.inst.busy = false
	}
	if a.m == nil {
		return
	}
	if a.err != nil || len(a.resp.BatchItemFailures) > 0 {
		w.note("  %s failed: it comes back after its visibility timeout", a.what)
		return // invisible until the visibility timeout set at delivery
	}
	w.q.remove(a.m)
	w.calledBack(a.m)
	w.mu.Lock()
	if _, ok := w.offloaded[a.m.body]; ok && !a.rejected {
		w.takenPointers[a.m.body] = true
	}
	w.mu.Unlock()
}

// park takes an invocation parked.
func (w *World) park(p parking) {
	switch {
	case p.call != nil:
		w.parked = append(w.parked, p.call)
		w.note("  %s calls %s %s", p.call.actor.what, p.call.agent, p.call.action)
	case p.sleep != nil:
		w.sleeping = append(w.sleeping, p.sleep)
		w.note("  %s sleeps until %s (%s)", p.sleep.actor.what, p.sleep.until.Format("15:04:05.000"), p.sleep.why)
	}
}

// wake wakes s at its time, and waits for its invocation to end or park.
func (w *World) wake(s *sleeper) {
	w.sleeping = remove(w.sleeping, s)
	w.advance(s.until)
	close(s.wake)
	w.settle(s.actor)
}

// background runs a handler's background work (an Agent's refresh of its
// flow control) in the invocation that starts it, so that every request a
// handler makes is one of the explorer's steps: none races the world's
// state, and a seed replays the same run.
func (w *World) background(what string) func(func()) {
	return func(f func()) {
		w.count(what)
		f()
	}
}
