package chaos

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/workflow"
)

// Plan is a chaos run: how many orders, and how often each fault strikes.
type Plan struct {
	Seed   uint64
	Orders int
	// On every queue, per delivery (no drop before Submission first sees an order).
	Drop, Delay, Duplicate float64
	DelayFor               time.Duration
	// Crash is the chance a handler is killed at each crash point it reaches:
	// after each write, before the send that follows.
	Crash float64
	// Pause is the chance an Agent stops for PauseFor between its service's
	// answer and the record of it (a GC pause, a slow network): longer than
	// the step timeout, so the outcome comes after the attempt was recovered,
	// often after the next attempt was claimed, and the fence refuses it.
	Pause    float64
	PauseFor time.Duration
	// The remote services.
	Transient   float64       // share of calls answered 503
	Stall       float64       // share of actions whose first call hangs (the agent never replies)
	Slow        float64       // share of calls slowed by SlowBy
	SlowBy      time.Duration // more than the step timeout: the reply comes after CompleteBy
	Permanent   float64       // share of actions refused for good
	UndoFailure float64       // share of undo actions refused for good
	Outage      time.Duration // the payment service is down this long, starting 2 s in
	// Cancel is the share of orders a cancel message is sent for, at a
	// random point up to CancelWithin after the order.
	Cancel       float64
	CancelWithin time.Duration
	// Migrate is the share of orders an operator tries to move to another
	// version of their workflow (each workflow's second version, made by
	// a mutation the seed chooses: Plan.versions), at a random point up to
	// MigrateWithin after the order (while its steps run, wait, are undone
	// or held), through the product's own path (operator.MigrateOrder),
	// trying again a few times while it is refused; some of those moved are
	// moved back later.
	Migrate       float64
	MigrateWithin time.Duration
	// Several schedulers and supervisors at once.
	Schedulers, Supervisors int
	SupervisorEvery         time.Duration // each supervisor's schedule
	Settings                workflow.Settings
	Timeout                 time.Duration // give up waiting for the orders to end
	// DynamoDBEndpoint is a separate DynamoDB engine (DynamoDB Local) for the
	// state store, if any; otherwise DynamoDB is the endpoint's.
	DynamoDBEndpoint string
	// QueuesEndpoint serves SQS and SNS instead of the endpoint, if set (the
	// in-process queues of shared/devkit/sqsmem).
	QueuesEndpoint string
	// InFlight caps the orders sent but not ended (0: send all at once), so a
	// long run keeps the emulator's queues short.
	InFlight int
	// Throttle caps functions' pace (localrun.Options.Throttle): a burst
	// plan makes a backlog with it.
	Throttle map[string]time.Duration
	// Waits is the share of orders run on the waits workflow (waits.yaml: an
	// event wait, a timer, an async step). Their approvals go by fate: none
	// for NoEvent (the wait times out and the order is undone), with the
	// order for EarlyEvent (kept until the wait), late and then again for
	// TwiceEvent, and late for the rest, at a random point up to
	// EventWithin after the order.
	Waits, NoEvent, EarlyEvent, TwiceEvent float64
	EventWithin                            time.Duration
	// Parallel is the share of orders (of those not waiting) run on the
	// parallel example: two reservations and an authorization at once, a
	// charge, a pack per item (one to three items), the shipment.
	Parallel float64
	// Generated is the share of orders (of those not waiting) run on
	// workflows of generated shapes (shapes.Random: lines, branches of
	// different lengths, joins, a step per item, timers, async calls),
	// Shapes of them, over three agents each at its own latency.
	Generated float64
	Shapes    int
	// Large is the share of orders (of those not waiting nor on a flow
	// shape) run on the large workflow (large.yaml):
	// documents of 4 KB to 600 KB, answers of about LargeResult bytes,
	// claim checks through every fault.
	Large       float64
	LargeResult int
	// AtLimit is how many of those large orders (the first) are at the
	// limits instead, on the limit workflow (large.yaml with room in its
	// timeouts, which the plan's Settings do not override): an order of 16
	// MB, sent by pointer, whose scan answers 16 MB; read back whole, with
	// the scan's answer, for the steps after it and their undos.
	AtLimit int
	limits  map[string]bool // the orders at the limits (limitOrders)
	// Hostile is the share of the payloads made of what encoders change
	// (shared/devkit/hostile: <, >, &, control characters, U+FFFD, U+2028,
	// and in answers raw control bytes and invalid UTF-8), each at a size
	// either side of a limit, measured on the bytes that travel: the large
	// orders' documents (in turn at the inline limit, over it, at SQS's
	// limit and over it: documentClasses) and their services' answers;
	// the orders at the limits' documents; the approvals (approvalClasses);
	// the flow orders' customers, the keys of their calls in flight, at
	// 141 to 400 bytes (keyBytes); and every service's answers, half of
	// them not JSON (quoted when kept), at and under their result limit.
	Hostile  float64
	hostiles map[string]int // the hostile large orders, and their size classes (hostileOrders)
	// Seal seals every order's data, results and events' data under a data
	// key of its own (sealData), KMS being moto's.
	Seal bool
	// BadInput sends malformed and ambiguous messages among the orders
	// (a member twice, a reply queue walking out of its prefix, events for
	// no order), and approvals to ended orders: each must be rejected to the
	// orders DLQ with its reason.
	BadInput bool
	// Flow runs a share of the orders on shapes with flow control, under a
	// pauser, a storm of 429s and an operator deciding held orders
	// (FlowPlan; its zero value: none).
	Flow FlowPlan
	// StoreFaults is the share of the handlers' DynamoDB requests that
	// fail: half before the engine sees them, half (of the writes) applied
	// and their answers lost. The SDK tries them again, as against AWS.
	StoreFaults float64
	// Search has the generated and flow shapes declare searchable fields
	// (searchOf) and their orders carry values of them (searchValues); at
	// the end, and before each bulk action, every value searched finds
	// every order that carries it and no other.
	Search bool
	// Bulk is how many actions the run's operator takes on orders found by
	// a query (operator.Bulk, paced), at moments spread over the run: a
	// sample of the orders of a searchable value cancelled, the Failed ones
	// resubmitted, and with flow control the held ones retried or undone.
	Bulk int
	// BatchWindow is the event source mappings' batching window. None by
	// default: the plan's timeouts are seconds (a 3 s step timeout, a 5 s
	// pickup deadline), and a deployment's 1 s a hop would be a third of
	// them; with it, 200 orders took 146 s, not 84, and recoveries
	// quadrupled, every invariant still held.
	BatchWindow time.Duration
}

// DefaultPlan is every fault switched on at a rate a few hundred orders show.
func DefaultPlan(seed uint64, orders int) Plan {
	return Plan{
		Seed: seed, Orders: orders,
		Drop: 0.02, Delay: 0.03, Duplicate: 0.03, DelayFor: 4 * time.Second,
		Crash: 0.03, Pause: 0.02, PauseFor: 6 * time.Second,
		Transient: 0.10, Stall: 0.02, Slow: 0.02, SlowBy: 5 * time.Second,
		Permanent: 0.02, UndoFailure: 0.10, Outage: 4 * time.Second,
		Cancel: 0.05, CancelWithin: 4 * time.Second, Migrate: 0.1, MigrateWithin: 4 * time.Second,
		Waits: 0.3, NoEvent: 0.15, EarlyEvent: 0.2, TwiceEvent: 0.15, EventWithin: 8 * time.Second, BadInput: true,
		Parallel: 0.3, Generated: 0.3, Shapes: 12, Large: 0.05, LargeResult: 100 << 10, AtLimit: 1, Hostile: 0.5, Seal: true,
		StoreFaults: 0.05, Search: true, Bulk: 4,
		Schedulers: 2, Supervisors: 2, SupervisorEvery: 500 * time.Millisecond,
		Settings: workflow.Settings{StepTimeout: 3 * time.Second, MaxFailures: 6, RetryBackoff: 500 * time.Millisecond,
			PickupTimeout: 5 * time.Second},
		// Room for a slow machine: a 10,000-order run takes about an hour.
		Timeout: 10*time.Minute + time.Duration(orders)*500*time.Millisecond,
	}
}

// NoFaults switches every injected fault off, and runs the order workflow
// alone (no flow control either): a burst plan measures waiting alone.
func (p *Plan) NoFaults() {
	p.Waits, p.Parallel, p.Generated, p.BadInput, p.Flow, p.Large, p.AtLimit, p.Hostile = 0, 0, 0, false, FlowPlan{}, 0, 0, 0
	p.Drop, p.Delay, p.Duplicate, p.Crash, p.Pause, p.StoreFaults = 0, 0, 0, 0, 0, 0
	p.Transient, p.Stall, p.Slow, p.Permanent, p.UndoFailure, p.Outage, p.Cancel, p.Migrate = 0, 0, 0, 0, 0, 0, 0, 0
	p.Bulk = 0
}

// faults are the remote simulator's knobs for the plan, by service or action.
func (p Plan) faults(start time.Time) map[string]remotesim.Faults {
	base := remotesim.Faults{Latency: 10 * time.Millisecond, TransientRate: p.Transient, StallRate: p.Stall,
		SlowRate: p.Slow, SlowLatency: p.SlowBy, PermanentRate: p.Permanent, CallbackDelay: 300 * time.Millisecond}
	payment := base
	if p.Outage > 0 {
		payment.Outages = []remotesim.Window{{From: start.Add(2 * time.Second), To: start.Add(2*time.Second + p.Outage)}}
	}
	undo := base
	undo.PermanentRate = p.UndoFailure
	out := map[string]remotesim.Faults{"": base, paymentAgent: payment} // the outage is the payment service's
	for a, latency := range shapeLatency {                              // the generated shapes' agents: one quick, one slower, one slow
		f := base
		f.Latency = latency
		out[a] = f
	}
	archive := base // the large workflow's: large answers
	archive.ResultBytes = p.LargeResult
	out[largeAgent] = archive
	if len(p.limits) > 0 { // the scan of an order at the limits answers 16 MB (the answer's envelope within the limit)
		scan := archive
		scan.OrderResultBytes = map[string]int{}
		for id := range p.limits {
			scan.OrderResultBytes[id] = workflow.MaxResultLimit - 4<<10
		}
		out[largeAgent+"/"+limitScan] = scan
	}
	defs := p.workflows().Definitions()
	for _, v := range p.versions() { // the second versions' undo actions too
		defs = append(defs, v.Second)
	}
	for _, d := range defs {
		for _, st := range d.Steps {
			if st.Undo != nil {
				u := undo
				if st.Undo.Agent == paymentAgent {
					u.Outages = payment.Outages
				}
				out[st.Undo.Agent+"/"+st.Undo.DoName()] = u
			}
		}
	}
	p.withFlowFaults(out)
	p.hostileFaults(out)
	return out
}

// largeAgent is the large workflow's agent, whose service answers large.
const largeAgent = "archive"

// paymentAgent is the order workflow's agent whose service the plan's
// outage takes down.
const paymentAgent = "payment"

// stackWorkflows are the run's workflows as its stack runs them: with the
// plan's overrides (Settings), but for the limit workflow, which keeps its
// own (a step that reads back, seals and keeps 16 MB is given 20 seconds).
func (p Plan) stackWorkflows() workflow.Set {
	var out []workflow.Definition
	for _, d := range p.workflows().Definitions() {
		if d.Name != LimitWorkflow {
			d = d.With(p.Settings)
		}
		out = append(out, d)
	}
	return workflow.MustSet(out...)
}

// workflows are the workflows a run's orders run.
func (p Plan) workflows() workflow.Set {
	return workflow.MustSet(append(append([]workflow.Definition{workflow.MustExample(workflow.OrderWorkflow), waitsDefinition(),
		workflow.MustExample(workflow.ParallelWorkflow), largeDefinition(), limitDefinition()}, p.shapes()...), p.flowShapes()...)...)
}

// shapeLatency is each generated shape's agent's latency.
var shapeLatency = map[string]time.Duration{"alpha": 10 * time.Millisecond, "beta": 150 * time.Millisecond, "gamma": 600 * time.Millisecond}

// shapes are the run's generated workflows (shape0, shape1…), the same for a
// seed: timers and async calls, no waits (the run sends events to the waits
// workflow's orders alone); every other one names its orders by their
// applicationId (shapeIDField).
func (p Plan) shapes() []workflow.Definition {
	o := p.shapeOptions()
	out := make([]workflow.Definition, p.Shapes)
	for k := range out {
		name := fmt.Sprintf("shape%d", k)
		o.IDField = shapeIDField(name)
		out[k] = shapes.Random(rand.New(rand.NewPCG(p.Seed, uint64(k))), name, o)
		out[k].Search = p.searchOf(k, false) // not part of the version: the shape's is as it was
	}
	return out
}

// shapeIDField is the id field of the generated shape name (none: orderId):
// the odd ones name their orders' id applicationId.
func shapeIDField(name string) string {
	k, err := strconv.Atoi(strings.TrimPrefix(name, "shape"))
	if err != nil || !strings.HasPrefix(name, "shape") || k%2 == 0 {
		return ""
	}
	return shapes.ApplicationID
}

// shapeOptions are the generated shapes' options: timers and async calls,
// no waits, the plan's clocks, every agent a service of the simulator.
func (p Plan) shapeOptions() shapes.Options {
	o := shapes.Defaults()
	o.Waits, o.Timeout, o.Pickup, o.Deadline = false, 3*time.Second, 5*time.Second, time.Hour
	o.Endpoint = func(a string) string { return "${SAS_REMOTE_BASE_URL}/v1/services/" + a }
	return o
}
