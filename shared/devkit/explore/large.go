package explore

import (
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/workflow"
)

// scenario is what a large run plays before its free choices: a write at
// the documented limits, made by one order whose forEach step has 30 to 100
// items.
type scenario int

const (
	none               scenario = iota
	acceptedThenCancel          // every item's async call accepted, then a cancel gives them all back
	timeoutsInOneSweep          // every item's call hangs: one sweep recovers them all
	heldThenGoOn                // the step before the items holds its order; skipped, every item is ready at once
	largeRandom                 // free choices only
)

func (s scenario) String() string {
	return [...]string{"", "accepted then cancelled", "timing out in one sweep", "held, then going on", "free"}[s]
}

func (w *World) scenarioNote() string {
	if w.scenario == none {
		return ""
	}
	return "; large: " + w.scenario.String()
}

// largePlan is a large run's plan: its scenario, a workflow with a forEach
// step for it, one order of 30 to 100 items, and the flow control of its
// items' agent (a rate, slots for every item, or none).
func largePlan(p plan) plan {
	rng, o := p.rng, shapes.Defaults()
	p.scenario = scenario(1 + rng.IntN(4))
	p.faulty = rng.IntN(2) == 0
	name := fmt.Sprintf("large%d", p.seed)
	step := func(name, agent string, undo bool) workflow.Step {
		st := workflow.Step{Action: workflow.Action{Name: name, Agent: agent, Timeout: o.Timeout, MaxFailures: 2, RetryBackoff: time.Second}}
		if undo {
			st.Undo = &workflow.Action{Name: "undo-" + name, Agent: agent, Timeout: o.Timeout, MaxFailures: 2}
		}
		return st
	}
	items := step("s1", "alpha", true)
	items.ForEach = "items"
	switch p.scenario {
	case acceptedThenCancel:
		items.Name, items.Undo.Name, items.Async, items.Timeout = "s0", "undo-s0", true, 4*o.Timeout
		p.def = workflow.Definition{Name: name, Steps: []workflow.Step{items, step("s2", "beta", true)}}
	case timeoutsInOneSweep:
		items.Name, items.Undo.Name = "s0", "undo-s0"
		p.def = workflow.Definition{Name: name, Steps: []workflow.Step{items, step("s2", "beta", true)}}
	case heldThenGoOn:
		first := step("s0", "beta", true)
		first.HoldFor = 10 * time.Minute
		p.def = workflow.Definition{Name: name, Steps: []workflow.Step{first, items}}
	default:
		p.def = randomWithItems(p, o)
	}
	p.def.PickupTimeout, p.def.Deadline, p.def.Version = o.Pickup, o.Deadline, name
	p.flows = map[string]agentFlow{}
	for _, a := range p.def.Agents() {
		if f := largeFlow(p); (a == "alpha" || p.scenario == largeRandom) && (f.rate.Calls > 0 || f.perKey != nil) {
			p.flows[a] = f
		}
	}
	p.orders = []*order{newOrder(p.seed, 0, hot, 30+rng.IntN(71))}
	return p
}

// randomWithItems is a random shape with a forEach step.
func randomWithItems(p plan, o shapes.Options) workflow.Definition {
	for {
		d := shapes.Random(p.rng, fmt.Sprintf("large%d", p.seed), o)
		for _, st := range d.Steps {
			if st.ForEach != "" {
				return d
			}
		}
	}
}

// largeFlow is an agent's flow control in a large run: a rate with a
// burst, a slot for every item (a key's item with 100 holders) or for two
// calls at once (the free scenario's), both or neither.
func largeFlow(p plan) agentFlow {
	var f agentFlow
	if p.rng.IntN(2) == 0 {
		f.rate = workflow.Rate{Calls: 20, Per: time.Second, Burst: 10}
	}
	if p.rng.IntN(2) == 0 {
		f.perKey = &workflow.PerKey{Key: customerKey, InFlight: 100}
		if p.scenario == largeRandom && p.rng.IntN(2) == 0 {
			f.perKey.InFlight = 2
		}
	}
	return f
}

// script plays a large run's scenario.
func (w *World) script(ctx context.Context) {
	if w.scenario == none {
		return
	}
	w.count("large: " + w.scenario.String())
	o, faulty := w.orders[0], w.faulty
	w.faulty = false
	defer func() { w.faulty = faulty }()
	w.note("large: %s", w.scenario)
	switch w.scenario {
	case acceptedThenCancel:
		w.progress(ctx, func() bool { return len(w.parked) >= o.items })
		for len(w.parked) > 0 {
			w.answer(w.parked[0], answerDone)
		}
		w.cancel(o)
		w.progress(ctx, func() bool { return len(w.q.visible(w.topo.OrdersQueue().Name)) == 0 })
	case timeoutsInOneSweep:
		w.faults = true
		w.progress(ctx, func() bool { return w.claimsOf(o.id, 0) >= o.items })
		w.faulty = true // every call hangs past its deadline
		w.expire(w.latestCompleteBy().Add(time.Second))
		w.faulty = false
		w.sweep()
	case heldThenGoOn:
		w.faults = true
		w.progress(ctx, func() bool { return len(w.parked) > 0 })
		w.answer(w.parked[0], answerRefused)
		w.progress(ctx, func() bool { return w.heldNow(ctx) != nil })
		w.decide(ctx, o, outcome.HoldSkip)
	}
}

// progress delivers, one at a time or several at once, and wakes sleepers
// until done, with no fault and no sweep; time moves only to the next
// message or sleeper.
func (w *World) progress(ctx context.Context, done func() bool) {
	for n := 0; n < 20*w.orders[0].items+200 && ctx.Err() == nil && !done(); n++ {
		visible := w.q.visible(w.consumed()...)
		switch {
		case len(visible) > 1 && w.rng.IntN(3) == 0:
			w.deliverAtOnce(visible)
		case len(visible) > 0:
			w.deliver(visible[0])
		case len(w.sleeping) > 0:
			w.expire(w.nextSleeper().until)
		default:
			next := w.q.nextVisible(w.consumed()...)
			if next.IsZero() {
				return
			}
			w.expire(next)
		}
	}
}

// claimsOf counts the claims of order id's step i's records.
func (w *World) claimsOf(id string, i int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.claims {
		if c.order == id && c.ref.Index == i && !c.ref.Undo {
			n++
		}
	}
	return n
}

// latestCompleteBy is the latest CompleteBy of the claims so far.
func (w *World) latestCompleteBy() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var t time.Time
	for _, c := range w.claims {
		if c.completeBy.After(t) {
			t = c.completeBy
		}
	}
	return t
}
