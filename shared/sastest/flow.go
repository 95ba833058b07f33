package sastest

import (
	"slices"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// An agent's flow control, on the virtual clock, as its Agent keeps it: a
// call whose key's slots are all held (perKey) waits in the key's line and
// is handed a slot when one is let go, first come first served; a call
// waits for its turn of the agent's rate limit (rateLimit, rateBurst: a
// generic cell rate algorithm, decided at the moment of each call, every
// request taking its own turn, a transient failure's call again too). A
// call held so has no attempt yet: no failure is counted, its CompleteBy
// starts when it is made. What it leaves out: the Agent gives such an
// attempt back and claims it again (here it simply waits), and a call
// keeps its key's slot while it waits for its rate turn.

// keyLine is one key's calls in flight and the calls waiting for a slot.
type keyLine struct {
	held []slotHolder // the slots held
	line []slotHolder // waiting, first come first
}

// slotHolder is a record of an order holding (or waiting for) a slot.
type slotHolder struct {
	o   *Order
	ref workflow.Ref
	// attempt is the attempt the slot is for: the record's next when it
	// was handed the slot.
	attempt int
}

// holds reports whether h still holds its slot: its attempt is being
// admitted or at work (an accepted async call holds it until its callback).
func (h slotHolder) holds() bool {
	r, rec := h.o.state.Recs[h.ref], h.o.rec[h.ref]
	if r.State == workflow.Processing {
		return r.Attempt == h.attempt
	}
	return rec.slot && rec.admitting && r.Attempt+1 == h.attempt && r.State == workflow.Pending && h.o.state.Active(r)
}

// waits reports whether h, in its key's line, still wants a slot.
func (h slotHolder) waits() bool {
	r, rec := h.o.state.Recs[h.ref], h.o.rec[h.ref]
	return rec.admitting && !rec.slot && r.State == workflow.Pending && r.Ready && h.o.state.Active(r)
}

// lineOf is agent's line of key.
func (k *Kit) lineOf(agent, key string) *keyLine {
	id := agent + "\x00" + key
	l, ok := k.keys[id]
	if !ok {
		l = &keyLine{}
		k.keys[id] = l
	}
	return l
}

// admit runs agent record ref's flow control before its attempt: a slot
// of its key, then its rate turn; then it claims the attempt.
func (o *Order) admit(ref workflow.Ref) {
	a := o.state.Recs[ref].Action
	spec := o.k.def.AgentSpecs[a.Agent]
	rec := o.rec[ref]
	if rec.admitting {
		return // held already: its line or its turn brings it back
	}
	if spec.PerKey != nil && !rec.slot {
		doc, err := o.document(ref)
		var key string
		if err == nil {
			key, err = spec.PerKey.KeyFor(doc)
		}
		if err != nil { // as the Agent: refused, it ran nothing
			o.fail(ref, workflow.Refused, false, a.Agent+"'s key of its calls in flight: "+err.Error())
			return
		}
		if key != "" {
			l := o.k.lineOf(a.Agent, key)
			l.held = slices.DeleteFunc(l.held, func(h slotHolder) bool { return !h.holds() })
			h := slotHolder{o: o, ref: ref, attempt: o.state.Recs[ref].Attempt + 1}
			rec.admitting = true
			if len(l.held) >= spec.PerKey.InFlight || slices.ContainsFunc(l.line, slotHolder.waits) {
				l.line = append(l.line, h) // handed a slot when one is let go (Kit.letSlots)
				return
			}
			l.held, rec.slot = append(l.held, h), true
		}
	}
	o.turn(ref)
}

// turn waits for agent record ref's rate turn, then claims its attempt.
func (o *Order) turn(ref workflow.Ref) {
	a := o.state.Recs[ref].Action
	rec := o.rec[ref]
	r := o.state.Recs[ref]
	if r.State != workflow.Pending || !r.Ready || !o.state.Active(r) {
		rec.admitting, rec.slot = false, false
		return
	}
	if ok, next := o.k.turn(a.Agent); !ok {
		rec.admitting = true
		o.k.at(next, true, nil, func() { o.turn(ref) })
		return
	}
	rec.slot = false // the attempt holds it now (slotHolder.holds)
	o.claim(ref)
}

// turn takes a turn of agent's rate limit now, if it has one: ok, or when
// the next turn is (GCRA: a call may go while the schedule's theoretical
// arrival time is at most a burst's tolerance past now, and it moves that
// time on to max(it, now) + one interval; kept exactly, as the Agent keeps
// it: a run of turns from its start, turn n at Span(n), so that 3/s puts
// three calls into a second, never a fourth).
func (k *Kit) turn(agent string) (ok bool, next time.Time) {
	limit := k.def.AgentSpecs[agent].RateLimit
	if limit.Calls == 0 {
		return true, k.now
	}
	tolerance := limit.Tolerance()
	r, known := k.runs[agent]
	tat := r.start.Add(limit.Span(r.turns))
	if known && tat.After(k.now.Add(tolerance)) {
		return false, tat.Add(-tolerance)
	}
	if !known || tat.Before(k.now) {
		r = run{start: k.now}
	}
	r.turns++
	k.runs[agent] = r
	return true, k.now
}

// run is an agent's schedule: turns taken since start.
type run struct {
	start time.Time
	turns int64
}

// letSlots lets go the slots whose attempts ended and hands each to the
// first call in its key's line that still waits for one.
func (k *Kit) letSlots() {
	for _, id := range k.keyIDs() {
		l := k.keys[id]
		l.held = slices.DeleteFunc(l.held, func(h slotHolder) bool { return !h.holds() })
		l.line = slices.DeleteFunc(l.line, func(h slotHolder) bool { return !h.waits() })
		for len(l.line) > 0 && len(l.held) < k.inFlight(id) {
			h := l.line[0]
			l.line = l.line[1:]
			l.held = append(l.held, h)
			h.o.rec[h.ref].slot = true
			k.at(k.now, true, nil, func() { h.o.turn(h.ref) })
		}
	}
}

// keyIDs are the keys with a line, in a stable order.
func (k *Kit) keyIDs() []string {
	ids := make([]string, 0, len(k.keys))
	for id := range k.keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// inFlight is the calls in flight a key of the line id allows.
func (k *Kit) inFlight(id string) int {
	for i := range len(id) {
		if id[i] == 0 {
			if pk := k.def.AgentSpecs[id[:i]].PerKey; pk != nil {
				return pk.InFlight
			}
		}
	}
	return 1
}
