package explore

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/devkit/hostile"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/outcome"
)

// answerSome answers a parked call at random: with faults, any way a call
// may end (a hang lets time pass to its deadline); without, done or a 429.
// An async call may be accepted with its callback sent before its answer.
func (w *World) answerSome() {
	c := w.parked[w.rng.IntN(len(w.parked))]
	slow := 5
	if c.order != nil && c.order.cancelled {
		slow = 30 // a give-back while its order is undone
	}
	kind := outcomeKind(pick(w.rng, 95, 0, 0, 0, 0, slow))
	if w.faulty {
		kind = outcomeKind(pick(w.rng, 65, 6, 10, 7, 7, slow))
	}
	if c.token != "" && !c.early && !w.tokenAccepted(c.token) && kind == answerDone && w.rng.IntN(3) == 0 {
		w.callbackEarly(c)
		return
	}
	w.note("answer %s %s: %s", c.agent, c.key, kind)
	if kind == answerHang { // time passes to its deadline, and past anything due before
		w.expire(c.deadline.Add(time.Millisecond))
		return
	}
	w.answer(c, kind)
}

// answer ends parked call c as kind says, and runs its invocation on. A hang
// is the call outlasting its caller: time passes to its deadline, its effect
// applied before then, or never.
func (w *World) answer(c *call, kind outcomeKind) {
	w.parked = remove(w.parked, c)
	// A repeat of an async call its service accepted (its answer was lost):
	// accepted still, and nothing more started.
	repeat := c.token != "" && !c.early && w.tokenAccepted(c.token)
	switch {
	case (c.early || repeat) && (kind == answerRefused || kind == answerTransient || kind == answerSlow):
		kind = answerDone // it accepted the call already: it says so
	case kind == answerRefused && w.ledger.at(c.key) >= 0:
		kind = answerDone // a service that applied a key answers its repeats as it did: it refuses no more
	}
	if kind != answerRefused && kind != answerSlow {
		w.ran(c.key) // its caller cannot know it did nothing
	}
	if kind == answerDone && c.token != "" {
		w.acceptedAsync(c)
	}
	retryAfter := time.Duration(1+w.rng.IntN(20)) * time.Second
	switch {
	case kind == answerDone && c.token != "" && !c.early && !repeat:
		w.async = append(w.async, c) // accepted: the callback comes later, by the attempt's CompleteBy
		c.deadline = w.completeBy(c)
		c.answer <- answer{body: []byte(`{"accepted":true}`)}
		w.settle(c.actor)
		return
	case kind == answerDone && (c.early || repeat):
		w.idle(c)
		c.answer <- answer{body: []byte(`{"accepted":true}`)}
		w.settle(c.actor)
		return
	case c.token != "": // an async call's effect comes with its callback
	case kind == answerDone || kind == answerLost, kind == answerHang && w.rng.IntN(2) == 0:
		w.ledger.apply(c.key)
	}
	if kind == answerSlow {
		w.slowed(c.agent, retryAfter)
		w.count("429 with Retry-After")
		if c.order != nil && c.order.cancelled {
			w.count("429 with Retry-After, its order cancelled")
		}
	}
	w.idle(c)
	c.answer <- answerOf(kind, c, retryAfter, w.done(c.key, false))
	w.settle(c.actor)
}

// callbackEarly has the service accept async call c and send its callback
// at once, before its answer reaches the Agent: the callback may be
// recorded before the Agent notes the acceptance.
func (w *World) callbackEarly(c *call) {
	w.note("answer %s %s: accepted, its callback sent before its answer", c.agent, c.key)
	w.count("callbacks before their Accept")
	c.early = true
	w.ran(c.key)
	w.acceptedAsync(c)
	w.callback(c, w.faulty && w.rng.IntN(5) == 0)
}

// expire lets time pass to at: every call whose caller stops waiting
// before then hangs (its effect applied before its deadline, or never),
// every async call past its attempt's CompleteBy is settled at the service
// (applied, its callback to come late, or dropped), and every sleeper whose
// time comes wakes, in the order of their times.
func (w *World) expire(at time.Time) {
	w.deliverCallbacks()
	for {
		var first *call
		for _, c := range append(slices.Clone(w.parked), w.async...) {
			// An async call's work ends at its CompleteBy, when its slot's
			// hold does: at at, it is over.
			due := c.deadline.Before(at) || (c.deadline.Equal(at) && !slices.Contains(w.parked, c))
			if !c.deadline.IsZero() && due && (first == nil || c.deadline.Before(first.deadline)) {
				first = c
			}
		}
		var s *sleeper
		for _, x := range w.sleeping {
			if !x.until.After(at) && (s == nil || x.until.Before(s.until)) {
				s = x
			}
		}
		switch {
		case s != nil && (first == nil || !first.deadline.Before(s.until)):
			w.note("wake %s (%s)", s.actor.what, s.why)
			w.wake(s)
		case first != nil && !w.faulty: // with no fault, every call is answered, every callback recorded, in time
			w.advance(first.deadline.Add(-inTime))
			w.answerInTime(first)
		case first != nil:
			w.advance(first.deadline)
			w.deadlinePassed(first)
		default:
			w.advance(at)
			return
		}
	}
}

// inTime is how long before its deadline a run with no fault answers a call
// that waited that long, or sends and delivers an async call's callback.
const inTime = 50 * time.Millisecond

// answerInTime answers c before its deadline: done, or its callback sent
// and delivered at once.
func (w *World) answerInTime(c *call) {
	if slices.Contains(w.parked, c) {
		w.note("answer %s %s in time: done", c.agent, c.key)
		w.answer(c, answerDone)
		return
	}
	w.callback(c, false)
	if vs := w.q.visible(w.topo.OrdersQueue().Name); len(vs) > 0 {
		w.deliver(vs[len(vs)-1])
	}
}

// deliverCallbacks delivers, in a run with no fault, the callbacks waiting
// in the orders queue before time passes: none comes after its attempt's
// CompleteBy.
func (w *World) deliverCallbacks() {
	if w.faulty {
		return
	}
	for _, m := range w.q.visible(w.topo.OrdersQueue().Name) {
		if w.isCallback(m) {
			w.deliver(m)
		}
	}
}

// deadlinePassed settles c, whose deadline is now: a parked call hangs; an
// accepted async call is applied now and called back late, or never done.
func (w *World) deadlinePassed(c *call) {
	if slices.Contains(w.parked, c) {
		w.note("hang %s %s: its caller gave up", c.agent, c.key)
		w.answer(c, answerHang)
		return
	}
	c.deadline = time.Time{}
	w.idle(c)
	if c.refused != nil {
		// Its callback was sent already (kept to come again): the service
		// answered, and does not take back its answer (one that refused the
		// call does not apply it later).
		w.async = remove(w.async, c)
		return
	}
	if w.rng.IntN(2) == 0 && !w.undoneFirst(c.key) {
		w.note("async %s applied at its attempt's CompleteBy: its callback comes late", c.key)
		w.ledger.apply(c.key)
		refused := false
		c.refused = &refused
		return
	}
	w.note("async %s never done: no callback", c.key)
	w.async = remove(w.async, c)
}

// completeBy is the CompleteBy of the attempt an async call's token names.
func (w *World) completeBy(c *call) time.Time {
	t, err := outcome.ParseToken(c.token)
	if err != nil {
		return time.Time{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cl := range w.claims {
		if cl.order == t.OrderID && cl.ref == t.Ref && cl.attempt == t.Attempt {
			return cl.completeBy
		}
	}
	return time.Time{}
}

// holderOf is the holder of the slot the async attempt c's token names
// holds, if its agent bounds its calls per key.
func (w *World) holderOf(c *call) string {
	if w.flows[c.agent].perKey == nil {
		return ""
	}
	return tokenHolder(c.token)
}

// acceptedAsync books that async call c was accepted by its service: its
// attempt's slot, if it holds one, is held until its callback is taken.
func (w *World) acceptedAsync(c *call) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.svc.tokens[c.token] = true
	if h := w.holderOf(c); h != "" {
		w.svc.accepted[h] = true
	}
}

// tokenAccepted reports whether the async call whose token is token was
// accepted by its service.
func (w *World) tokenAccepted(token string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.svc.tokens[token]
}

// tokenHolder is the holder of the slot of the async attempt token names.
func tokenHolder(token string) string {
	t, err := outcome.ParseToken(token)
	if err != nil {
		return ""
	}
	return keyline.Holder(t.OrderID, t.Ref, t.Round, t.Attempt)
}

// calledBack books a callback Submission took (m, handled): its attempt's
// service ended its work, and its slot must be let go.
func (w *World) calledBack(m *msg) {
	if m.queue != w.topo.OrdersQueue().Name {
		return
	}
	v, err := message.DecodeOrdersMessage(w.sent(m), w.set)
	e, ok := v.(message.Event)
	if err != nil || !ok || e.Token == "" {
		return
	}
	w.mu.Lock()
	if h := tokenHolder(e.Token); w.svc.calledBack[h].IsZero() {
		w.svc.calledBack[h] = w.now
	}
	w.mu.Unlock()
}

// callback answers an accepted async call: its effect applied and its data
// sent back, or its refusal; perhaps twice.
func (w *World) callback(c *call, refuse bool) {
	if c.refused != nil {
		refuse = *c.refused // a repeat of the callback
	}
	c.refused = &refuse
	w.idle(c)
	e := message.Event{Kind: message.KindEvent, OrderID: c.order.id, Token: c.token}
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
		e.Data = w.done(c.key, true)
	}
	if !w.faulty || w.rng.IntN(4) > 0 {
		w.async = remove(w.async, c) // else: it may come again
	} else if !slices.Contains(w.async, c) && !slices.Contains(w.parked, c) {
		w.async = append(w.async, c)
	}
	b, _ := hostile.Marshal(e) // its data as its service wrote it
	w.note("callback %s refused=%v", c.key, refuse)
	if len(e.Data) > 0 {
		w.sendFromOutside(string(b))
	} else {
		w.send(w.topo.OrdersQueue().Name, string(b), 0)
	}
}

// undoneFirst reports whether the undo of the step whose idempotency key
// is key reached its service: an async call accepted before it must not
// take effect after it (docs/workflows.md: a cancel undoes an accepted
// async step without awaiting its callback).
func (w *World) undoneFirst(key string) bool {
	u := w.undoKey(key)
	return u != "" && w.reachedService(u)
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

// pad is how much a service pads what it answers: padBytes in a payload run.
func (w *World) pad() int {
	if w.payloads == nil {
		return 0
	}
	return padBytes
}
