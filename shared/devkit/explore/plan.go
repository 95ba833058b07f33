package explore

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/shop"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// plan is what a seed decides before its run: the workflow, the orders and
// their customers, each agent's flow control, whether faults are injected,
// and, for a large run, its scenario.
type plan struct {
	seed     uint64
	rng      *rand.Rand
	def      workflow.Definition
	orders   []*order
	flows    map[string]agentFlow
	faulty   bool
	scenario scenario // none for an ordinary run
	// runTime, if longer, bounds the run's real time instead of its own
	// (Options.RunTime).
	runTime time.Duration
	// payloads: the run keeps its payloads over payload.MinInline in its
	// bucket (objects), and its orders, answers and callbacks are larger
	// than that (padded): claim checks through every interleaving.
	payloads bool
	// sealed: the run seals its orders' data under data keys of its key
	// (keys), in half of the payload runs: sealed payloads through every
	// interleaving, some kept in the bucket.
	sealed bool
	// pointers: in a payload run, senders send some bodies by SQS
	// Extended Client pointer (World.sendFromOutside); a regression seed
	// found before they did replays without.
	pointers bool
	// storeFaults: the handlers' state store fails reads and writes, and
	// loses writes' answers (storeFaults), in a third of the faulty runs.
	storeFaults bool
	// hostile: the run's orders, answers, callbacks and events are made of
	// what encoders change, in half of the runs (hostile.go); a regression
	// seed found before they were replays without.
	hostile bool
	// next, in a third of the runs, is the workflow's next version (change
	// says how it differs): an operator moves the run's orders to it and
	// back at random moments, as mover decides (migrate.go).
	next   *workflow.Definition
	change string
	mover  *rand.Rand
	// bulker, in a searching run (search.go: half of them), decides when an
	// operator acts on the orders of a customer by query, and how
	// (bulk.go; nil: never).
	bulker *rand.Rand
}

// padBytes is how much a payload run pads its orders, answers and
// callbacks: over the inline limit it runs with, under its shapes' result
// limit.
const padBytes = 1500

// order is one order of a run. Its customer is the key of its calls in
// flight (customerKey): the orders of a run share a hot customer, or have
// one of their own.
type order struct {
	id, customer string
	idField      string // the member its body names its id by (its workflow's id field; "": orderId)
	items        int
	pad          int  // bytes of padding its body carries (a payload run's)
	size         int  // in a hostile run, its body's bytes as sent, hostile text and all (hostileBody)
	sent         bool // its message is on the orders queue
	cancelled    bool
	events       map[string]int  // events sent, by name
	end          statestore.Task // as the store had it when the run ended
}

// hot is the customer most orders of a run share.
const hot = "c-hot"

// customerKey is the perKey expression of the explorer's agents: one key
// per customer.
const customerKey = ".order.customerId"

// agentFlow is one agent's flow control in a run (every agent has a gate:
// pauses and Retry-Afters reach any of them).
type agentFlow struct {
	rate   workflow.Rate
	perKey *workflow.PerKey
}

func (f agentFlow) String() string {
	var s string
	if f.rate.Calls > 0 {
		s = "rate " + f.rate.String()
	}
	if f.perKey != nil {
		s += fmt.Sprintf(" perKey %s inFlight %d", f.perKey.Key, f.perKey.InFlight)
	}
	return s
}

// newPlan is the plan of the run seed names; plain leaves its payloads
// inline, without withStoreFaults its state store has none, and without
// withHostile its payloads are plain (a regression seed replays the run
// that found it).
func newPlan(seed uint64, large, plain, withStoreFaults, withHostile bool) plan {
	p := plan{seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5a5))}
	if large {
		return largePlan(p)
	}
	// Decided by a stream of its own: the seed's other choices are as they
	// were before runs had payloads.
	choice := rand.New(rand.NewPCG(seed, 0xc1a))
	p.payloads = !plain && choice.IntN(3) == 0
	p.sealed = p.payloads && choice.IntN(2) == 0
	p.pointers = p.payloads
	p.hostile = withHostile && hostileRun(seed)
	defer func() {
		for _, o := range p.orders {
			if p.payloads {
				o.pad = padBytes
			}
			if p.hostile {
				o.size = p.sizeOf("order/"+o.id, inlineSizes)
			}
		}
	}()
	rng, o := p.rng, shapes.Defaults()
	if choice.IntN(3) == 0 { // after the payloads' choices: theirs are as they were
		o.IDField = shapes.ApplicationID // its orders named by another member than orderId
	}
	if rng.IntN(6) == 0 {
		p.def = shapes.Branches(o)
	} else {
		p.def = shapes.Random(rng, fmt.Sprintf("shape%d", seed), o)
	}
	if rng.IntN(3) == 0 { // steps that hold their order for the operator on failure
		for i, st := range p.def.Steps {
			if st.Kind() == workflow.KindAgent && rng.IntN(2) == 0 {
				p.def.Steps[i].HoldFor = time.Duration(1+rng.IntN(30)) * time.Minute
			}
		}
	}
	p.faulty = rng.IntN(4) > 0
	p.storeFaults = withStoreFaults && p.faulty && rand.New(rand.NewPCG(seed, 0xdb)).IntN(3) == 0
	p.flows = randomFlows(rng, p.def.Agents())
	for k := range 1 + rng.IntN(3) {
		o := newOrder(seed, k, customer(rng, k), 1+rng.IntN(3))
		o.idField = p.def.IDField
		p.orders = append(p.orders, o)
	}
	return p
}

// driven counts what the plan drives: the flow control of its agents,
// orders sharing a customer, and a workflow that names its id field.
func (p plan) driven(count func(string)) {
	if p.hostile {
		count("runs with hostile payloads")
	}
	if p.def.IDField != "" {
		count("runs whose orders' id is another member than orderId")
	}
	for _, f := range p.flows {
		if f.rate.Calls > 0 {
			count("agents with a rate limit")
		}
		if f.perKey != nil {
			count("agents with calls in flight per key")
		}
	}
	customers := map[string]int{}
	for _, o := range p.orders {
		customers[o.customer]++
	}
	for _, n := range customers {
		if n > 1 && len(p.flows) > 0 {
			count("runs with orders sharing a key")
		}
	}
}

// newOrder is the k-th order of the run seed names.
func newOrder(seed uint64, k int, customer string, items int) *order {
	return &order{id: fmt.Sprintf("x%d-%d", seed, k), customer: customer, items: items, events: map[string]int{}}
}

// customer is the k-th order's: the first is the hot customer's, and most
// of the others too.
func customer(rng *rand.Rand, k int) string {
	if k == 0 || rng.IntN(3) > 0 {
		return hot
	}
	return "c-" + strconv.Itoa(k)
}

// randomFlows is a flow control for each of agents, at random: a rate
// limit (with a burst or not), calls in flight per customer, both or
// neither; in a third of the runs, none at all.
func randomFlows(rng *rand.Rand, agents []string) map[string]agentFlow {
	out := map[string]agentFlow{}
	if rng.IntN(3) == 0 {
		return out
	}
	rates := []workflow.Rate{{Calls: 1, Per: time.Second}, {Calls: 2, Per: time.Second, Burst: 2}, {Calls: 30, Per: time.Minute, Burst: 3}}
	for _, a := range agents {
		var f agentFlow
		if rng.IntN(2) == 0 {
			f.rate = rates[rng.IntN(len(rates))]
		}
		if rng.IntN(2) == 0 {
			f.perKey = &workflow.PerKey{Key: customerKey, InFlight: 1 + rng.IntN(2)}
		}
		if f.rate.Calls > 0 || f.perKey != nil {
			out[a] = f
		}
	}
	return out
}

// body is the order as its client sends it.
func (o *order) body() string {
	so := shop.Order{OrderID: o.id, CustomerID: o.customer}
	for k := range o.items {
		so.Items = append(so.Items, shop.Item{SKU: "SKU-" + strconv.Itoa(k), Quantity: 1, UnitPriceCents: 100})
	}
	if o.size > 0 {
		return hostileBody(so, o.idField, 0, o.size)
	}
	if o.pad == 0 {
		return shapes.WithIDField(so.JSON(), o.idField)
	}
	b, _ := json.Marshal(struct {
		shop.Order
		Note string `json:"note"`
	}{so, strings.Repeat("n", o.pad)})
	return shapes.WithIDField(string(b), o.idField)
}
