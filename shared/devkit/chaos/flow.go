package chaos

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/workflow"
)

// FlowPlan is the flow control a chaos run puts under its faults
// (Plan.Flow). A share of the orders runs on generated shapes whose steps
// call agents with a rate limit ("rated"), with calls in flight bounded per
// customer ("keyed"), or both ("metered"), and hold their order on failure
// for its operator; their customers are a few hot ones (many orders each)
// and many cold ones. Meanwhile a pauser pauses and resumes a flow agent at
// random moments, one flow agent's service answers 429 with Retry-After for
// a few seconds, and an operator decides held orders at random.
type FlowPlan struct {
	// Share is the share of the orders not waiting run on the flow shapes
	// (0: none, and no flow control at all); Shapes how many (flow0…).
	Share  float64
	Shapes int
	// Hot is the share of the flow orders from one of HotKeys customers;
	// each other one is its customer's only order.
	Hot     float64
	HotKeys int
	// Rate is the rate-limited agents' limit, InFlight the keyed agents'
	// calls at once per customer. Zero: the seed chooses, 2 to 5 calls a
	// second with a burst of 1 to 4, and 1 or 2 calls at once.
	Rate     workflow.Rate
	InFlight int
	// Hold is the share of the flow shapes' agent steps that hold the
	// order on failure, for HoldFor; Refuse the share of the flow agents'
	// actions refused for good (their undo actions' are the plan's
	// UndoFailure), so that holds come up.
	Hold, Refuse float64
	HoldFor      time.Duration
	// Decide is the chance the operator decides a held order (retry the
	// step, skip it with a result, or undo the order, at random) within
	// DecideWithin; the others are undone at their hold's end.
	Decide       float64
	DecideWithin time.Duration
	// PauseEvery is the mean time between two pauses of a flow agent (0:
	// none), each up to PauseFor long.
	PauseEvery, PauseFor time.Duration
	// Storm is how long one flow agent's service answers every call 429
	// with a Retry-After of RetryAfter, from StormAt after its first call
	// (longer if no call came meanwhile: until one is answered 429; 0: no
	// storm).
	Storm, StormAt, RetryAfter time.Duration
}

// DefaultFlow is flow control for a share of the orders: a hold on a
// quarter of the flow shapes' agent steps, a tenth of the flow agents'
// actions refused for good, three quarters of the holds
// decided, a pause every 45 s or so, a 4 s storm of 429s 3 s after its
// service's first call.
func DefaultFlow() FlowPlan {
	return FlowPlan{Share: 0.3, Shapes: 8, Hot: 0.3, HotKeys: 3, Hold: 0.25, Refuse: 0.1, HoldFor: 8 * time.Second,
		Decide: 0.75, DecideWithin: 6 * time.Second, PauseEvery: 45 * time.Second, PauseFor: 3 * time.Second,
		Storm: 4 * time.Second, StormAt: 3 * time.Second, RetryAfter: time.Second}
}

// flowOn reports whether the plan runs orders on the flow shapes.
func (p Plan) flowOn() bool { return p.Flow.Share > 0 && p.Flow.Shapes > 0 }

// flowRate is the rate-limited agents' limit.
func (p Plan) flowRate() workflow.Rate {
	if p.Flow.Rate.Calls > 0 {
		return p.Flow.Rate
	}
	return workflow.Rate{Calls: 2 + int(remotesim.Mix(p.Seed, "rate")*4), Per: time.Second,
		Burst: 1 + int(remotesim.Mix(p.Seed, "burst")*4)}
}

// flowInFlight is the keyed agents' calls at once per customer.
func (p Plan) flowInFlight() int {
	if p.Flow.InFlight > 0 {
		return p.Flow.InFlight
	}
	return 1 + int(remotesim.Mix(p.Seed, "in-flight")*2)
}

// flowAgents are the flow shapes' flow-controlled agents, by name.
func (p Plan) flowAgents() map[string]workflow.Agent {
	return shapes.FlowAgents(p.flowRate(), p.flowInFlight())
}

// flowLatency is each flow agent's service's latency: the keyed ones' long
// enough that a hot customer's calls queue for their slots.
var flowLatency = map[string]time.Duration{"rated": 10 * time.Millisecond, "keyed": 150 * time.Millisecond,
	"metered": 60 * time.Millisecond}

// flowShapes are the run's flow shapes (flow0, flow1…), the same for a seed.
func (p Plan) flowShapes() []workflow.Definition {
	if !p.flowOn() {
		return nil
	}
	agents, names := p.flowAgents(), p.flowNames()
	out := make([]workflow.Definition, p.Flow.Shapes)
	for k := range out {
		// Two of the flow agents a shape: each in two shapes of three.
		two := map[string]workflow.Agent{}
		for _, a := range []string{names[k%len(names)], names[(k+1)%len(names)]} {
			two[a] = agents[a]
		}
		o := p.shapeOptions()
		o.Flow = &shapes.Flow{Agents: two, Share: 0.6, Hold: p.Flow.Hold, HoldFor: p.Flow.HoldFor}
		out[k] = shapes.Random(rand.New(rand.NewPCG(p.Seed, 0xf10<<32|uint64(k))), fmt.Sprintf("flow%d", k), o)
		out[k].Search = p.searchOf(k, true)
	}
	return out
}

// flowOrder reports whether the plan runs order id (not a waits one) on a
// flow shape.
func (p Plan) flowOrder(id string) bool {
	return p.flowOn() && remotesim.Mix(p.Seed, "flow", id) < p.Flow.Share
}

// flowShape is the flow shape order id runs.
func (p Plan) flowShape(id string) string {
	return fmt.Sprintf("flow%d", int(remotesim.Mix(p.Seed, "flow-shape", id)*float64(p.Flow.Shapes)))
}

// customerOf is a flow order's customer: a hot one, or its own; in a
// hostile run, a share of them a hostile key (hotCustomer, coldCustomer).
func (p Plan) customerOf(id string) string {
	if p.Flow.HotKeys > 0 && remotesim.Mix(p.Seed, "hot", id) < p.Flow.Hot {
		return p.hotCustomer(int(remotesim.Mix(p.Seed, "hot-key", id) * float64(p.Flow.HotKeys)))
	}
	return p.coldCustomer(id)
}

// flowNames are the flow agents' names, sorted.
func (p Plan) flowNames() []string { return slices.Sorted(maps.Keys(p.flowAgents())) }

// stormAgent is the flow agent whose service answers the storm of 429s.
func (p Plan) stormAgent() string {
	names := p.flowNames()
	return names[int(remotesim.Mix(p.Seed, "storm")*float64(len(names)))]
}

// stormOn reports whether the plan has a storm of 429s.
func (p Plan) stormOn() bool { return p.flowOn() && p.Flow.Storm > 0 }

// withFlowFaults adds the flow agents' latencies and refusals to the
// simulator's knobs.
func (p Plan) withFlowFaults(out map[string]remotesim.Faults) {
	if !p.flowOn() {
		return
	}
	for a, latency := range flowLatency {
		f := out[""]
		f.Latency, f.PermanentRate = latency, p.Flow.Refuse
		out[a] = f
	}
}

// stormFaults are the knobs of the storm's service and of its undo
// actions, of the run's knobs (faults), with the storm in window w.
func (p Plan) stormFaults(faults map[string]remotesim.Faults, w remotesim.Window) map[string]remotesim.Faults {
	storm, out := p.stormAgent(), map[string]remotesim.Faults{}
	for k, f := range faults {
		if k == storm || strings.HasPrefix(k, storm+"/") {
			f.Throttled, f.RetryAfter = []remotesim.Window{w}, p.Flow.RetryAfter
			out[k] = f
		}
	}
	return out
}
