// Package shapes generates workflows of random shapes for the explorer and
// the chaos run: lines, branches of different lengths, joins, steps per item,
// waits, timers and async calls, and, with Options.Flow, flow control (rate
// limits, calls in flight per key, holds on failure), each valid as a
// workflow file is.
package shapes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Options say what a generated workflow may hold.
type Options struct {
	MaxSteps int      // steps, at most (at least 1)
	Agents   []string // the agents the steps call, one at random each
	// Waits allows a wait for an event (at most one), Timers and Async
	// timers and async calls beside plain calls; ForEach a step per item
	// of the order's "items" (at most one).
	Waits, Timers, Async, ForEach bool
	// Timeout is a call's (an async call waits four times as long), Pickup
	// the pickup timeout, Deadline the order's.
	Timeout, Pickup, Deadline time.Duration
	MaxFailures               int
	// Endpoint, if set, is where an agent's service is (a workflow file's
	// endpoint: ${VAR}s allowed): the workflow declares its agents so.
	Endpoint func(agent string) string
	// Flow, if set, adds flow control: steps that call its agents, and
	// steps that hold the order on failure. Without it the shapes a seed
	// gives are those it gave before Flow was.
	Flow *Flow
	// IDField, if set, is the member of the workflow's orders that is
	// their id (its id:; none: orderId): their bodies name it so
	// (WithIDField). It draws nothing from the seed.
	IDField string
}

// ApplicationID is the id field a generated workflow that names one names.
const ApplicationID = "applicationId"

// WithIDField is an order body made by shop.Order (its first member its
// orderId) with that member named field, the id field of the workflow it
// is for: body itself for none, or orderId.
func WithIDField(body, field string) string {
	rest, ok := strings.CutPrefix(body, `{"orderId":`)
	if !ok || field == "" || field == workflow.DefaultIDField {
		return body
	}
	return `{"` + field + `":` + rest
}

// Flow is the flow control a generated workflow may declare.
type Flow struct {
	// Agents are the flow-controlled agents (their RateLimit, PerKey), by
	// name: a step that calls an agent calls one of them, not one of
	// Options.Agents, with the chance Share. Each is one service, declared
	// alike in every workflow that calls it (workflow.NewSet requires it).
	Agents map[string]workflow.Agent
	Share  float64
	// Hold is the chance that a step that calls an agent holds the order on
	// failure (onFailure: hold) for its operator, for HoldFor at most.
	Hold    float64
	HoldFor time.Duration
}

// PerCustomer is the key FlowAgents bound calls in flight by: the order's
// customer.
const PerCustomer = ".order.customerId"

// FlowAgents are three flow-controlled agents: "rated" (at most rate),
// "keyed" (at most inFlight calls at once per customer) and "metered"
// (both).
func FlowAgents(rate workflow.Rate, inFlight int) map[string]workflow.Agent {
	key := func() *workflow.PerKey { return &workflow.PerKey{Key: PerCustomer, InFlight: inFlight} }
	return map[string]workflow.Agent{
		"rated":   {RateLimit: rate},
		"keyed":   {PerKey: key()},
		"metered": {RateLimit: rate, PerKey: key()},
	}
}

// names are the flow's agents, sorted (a seed's choice must not follow
// the map's order).
func (f *Flow) names() []string { return slices.Sorted(maps.Keys(f.Agents)) }

// flowStep may move agent step st to a flow-controlled agent, and make it
// hold the order on failure.
func (f *Flow) flowStep(rng *rand.Rand, st *workflow.Step) {
	if names := f.names(); len(names) > 0 && rng.Float64() < f.Share {
		st.Agent = names[rng.IntN(len(names))]
	}
	if rng.Float64() < f.Hold {
		st.HoldFor = f.HoldFor
	}
}

// Defaults are the options the explorer uses: five steps over three agents,
// every kind.
func Defaults() Options {
	return Options{MaxSteps: 5, Agents: []string{"alpha", "beta", "gamma"}, Waits: true, Timers: true, Async: true, ForEach: true,
		Timeout: 20 * time.Second, Pickup: 10 * time.Second, Deadline: 30 * time.Minute, MaxFailures: 2}
}

// Random is a random workflow named name. Each step after the first needs
// the step before it, nothing, or some of the steps before it (so branches
// of different lengths and joins come up); most call an agent, with an undo
// or not.
func Random(rng *rand.Rand, name string, o Options) workflow.Definition {
	d := workflow.Definition{Name: name, PickupTimeout: o.Pickup, Deadline: o.Deadline, IDField: o.IDField}
	n := 1 + rng.IntN(max(o.MaxSteps, 1))
	waited, perItem := false, false
	for i := range n {
		st := workflow.Step{Action: action(rng, fmt.Sprintf("s%d", i), o)}
		switch k := rng.IntN(10); {
		case o.Waits && k == 0 && !waited:
			waited = true
			st.Wait = &workflow.Wait{Event: "approved", Timeout: 4 * o.Timeout, Continue: rng.IntN(2) == 0}
		case o.Timers && k == 1:
			st.Sleep = &workflow.Sleep{For: o.Timeout / 2}
		case o.Async && k == 2:
			st.Async, st.Timeout = true, 4*o.Timeout
		}
		if o.Flow != nil && st.Kind() == workflow.KindAgent {
			o.Flow.flowStep(rng, &st)
		}
		if o.ForEach && st.Kind() == workflow.KindAgent && !perItem && rng.IntN(10) < 3 {
			perItem, st.ForEach = true, "items" // an async call per item too
		}
		if st.Kind() == workflow.KindAgent && rng.IntN(10) < 7 {
			u := action(rng, fmt.Sprintf("undo-s%d", i), o)
			u.Agent = st.Agent
			st.Undo = &u
		}
		if st.Kind() != workflow.KindAgent {
			st.Action = workflow.Action{Name: st.Name, Timeout: o.Timeout, MaxFailures: 1}
		}
		if i > 0 {
			needs(rng, &st, i)
		}
		d.Steps = append(d.Steps, st)
	}
	declare(&d, o)
	b, _ := json.Marshal(d)
	sum := sha256.Sum256(b)
	d.Version = hex.EncodeToString(sum[:6])
	return d
}

// declare declares the agents d calls, where o says they are.
func declare(d *workflow.Definition, o Options) {
	if o.Endpoint == nil {
		return
	}
	d.AgentSpecs = map[string]workflow.Agent{}
	for _, a := range d.Agents() {
		var spec workflow.Agent
		if o.Flow != nil {
			spec = o.Flow.Agents[a]
		}
		spec.Name, spec.Endpoint, spec.Timeout = a, o.Endpoint(a), workflow.DefaultAgentTimeout
		d.AgentSpecs[a] = spec
	}
}

func action(rng *rand.Rand, name string, o Options) workflow.Action {
	return workflow.Action{Name: name, Agent: o.Agents[rng.IntN(len(o.Agents))], Timeout: o.Timeout,
		MaxFailures: 1 + rng.IntN(max(o.MaxFailures, 1)), RetryBackoff: time.Second}
}

// needs sets what step i needs: the step before it (the default), nothing,
// or a random set of the steps before it.
func needs(rng *rand.Rand, st *workflow.Step, i int) {
	switch rng.IntN(3) {
	case 0: // the one before
	case 1:
		st.NoNeeds = true
	default:
		for j := range i {
			if rng.IntN(2) == 0 {
				st.Needs = append(st.Needs, fmt.Sprintf("s%d", j))
			}
		}
		if len(st.Needs) == 0 {
			st.Needs = []string{fmt.Sprintf("s%d", rng.IntN(i))}
		}
	}
}

// Branches is the shape a user found stalling: slow-a beside fast-b then
// fast-c, and a join that needs slow-a and fast-c.
func Branches(o Options) workflow.Definition {
	mk := func(name string, needs ...string) workflow.Step {
		st := workflow.Step{Action: workflow.Action{Name: name, Agent: o.Agents[0], Timeout: o.Timeout, MaxFailures: o.MaxFailures,
			RetryBackoff: time.Second}, Needs: needs}
		st.NoNeeds = needs == nil
		u := workflow.Action{Name: "undo-" + name, Agent: o.Agents[0], Timeout: o.Timeout, MaxFailures: o.MaxFailures}
		st.Undo = &u
		return st
	}
	d := workflow.Definition{Name: "branches", PickupTimeout: o.Pickup, Deadline: o.Deadline, Version: "branches-1", IDField: o.IDField,
		Steps: []workflow.Step{mk("slow-a"), mk("fast-b"), mk("fast-c", "fast-b"), mk("join", "slow-a", "fast-c")}}
	declare(&d, o)
	return d
}
