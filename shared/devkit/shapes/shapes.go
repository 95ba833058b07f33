// Package shapes generates workflows of random shapes for the explorer and
// the chaos run: lines, branches of different lengths, joins, steps per item,
// waits, timers and async calls, each valid as a workflow file is.
package shapes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
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
	d := workflow.Definition{Name: name, PickupTimeout: o.Pickup, Deadline: o.Deadline}
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
		d.AgentSpecs[a] = workflow.Agent{Name: a, Endpoint: o.Endpoint(a), Timeout: workflow.DefaultAgentTimeout}
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
	d := workflow.Definition{Name: "branches", PickupTimeout: o.Pickup, Deadline: o.Deadline, Version: "branches-1",
		Steps: []workflow.Step{mk("slow-a"), mk("fast-b"), mk("fast-c", "fast-b"), mk("join", "slow-a", "fast-c")}}
	declare(&d, o)
	return d
}
