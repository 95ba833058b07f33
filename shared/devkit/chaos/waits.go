package chaos

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/shop"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

//go:embed waits.yaml
var waitsFile []byte

//go:embed large.yaml
var largeFile []byte

// LargeWorkflow is the chaos run's workflow of large orders and results
// (large.yaml).
const LargeWorkflow = "large"

// largeDefinition parses large.yaml.
func largeDefinition() workflow.Definition { return mustParse("chaos/large.yaml", largeFile) }

// large reports whether the plan runs order id on the large workflow (if
// it runs it on neither the waits workflow nor a flow shape).
func (p Plan) large(id string) bool { return remotesim.Mix(p.Seed, "large", id) < p.Large }

// largeBody is the i-th order of the run on the large workflow: documents
// of 4 KB to 600 KB, so that some stay inline, most are kept in the bucket,
// and some come by pointer.
func largeBody(o shop.Order, seed uint64) string {
	n := 4<<10 + int(remotesim.Mix(seed, "documents", o.OrderID)*(600<<10))
	b, _ := json.Marshal(struct {
		shop.Order
		Documents string `json:"documents"`
	}{o, strings.Repeat("d", n)})
	return string(b)
}

// LimitWorkflow is the chaos run's workflow of orders at the limits: the
// large workflow whose steps have the time to read back, seal and keep 16
// MB (its own timeouts, not the plan's overrides: Plan.stackWorkflows).
const LimitWorkflow = "limit"

// limitScan is the limit workflow's step that answers 16 MB.
const limitScan = "scan-documents"

// limitDefinition is large.yaml as LimitWorkflow: 20 seconds for a step
// (the most a local function's 30 s leaves it), 30 for its pickup.
func limitDefinition() workflow.Definition {
	file := strings.Replace(string(largeFile), "name: "+LargeWorkflow+"\n", "name: "+LimitWorkflow+"\n", 1)
	file = strings.Replace(strings.Replace(file, "pickupTimeout: 5s", "pickupTimeout: 30s", 1), "timeout: 3s", "timeout: 20s", 1)
	return mustParse("chaos/limit.yaml", []byte(file))
}

// limitOrders are the plan's first AtLimit orders on the large workflow.
func (p Plan) limitOrders() map[string]bool {
	out := map[string]bool{}
	for i := 0; i < p.Orders && len(out) < p.AtLimit; i++ {
		if id := p.orderID(i); !p.waits(id) && !p.flowOrder(id) && p.large(id) {
			out[id] = true
		}
	}
	return out
}

// orderID is the id of the plan's i-th order.
func (p Plan) orderID(i int) string { return fmt.Sprintf("chaos-%d-%05d", p.Seed, i) }

// orderIDs are the ids of the plan's orders, in the order they are sent.
func (p Plan) orderIDs() []string {
	ids := make([]string, p.Orders)
	for i := range ids {
		ids[i] = p.orderID(i)
	}
	return ids
}

// limitBody is an order at the limits: 16 MB in all, documents and all
// (but 4 KB, for what Submission adds to it), as sent: hostile documents
// in a hostile run.
func (p Plan) limitBody(o shop.Order) string {
	if p.Hostile > 0 {
		return documentsBody(o, p.Seed, payload.MaxBytes-4<<10)
	}
	b, _ := json.Marshal(struct {
		shop.Order
		Documents string `json:"documents"`
	}{o, ""})
	return strings.Replace(string(b), `"documents":""`, `"documents":"`+strings.Repeat("d", payload.MaxBytes-4<<10-len(b))+`"`, 1)
}

// WaitsWorkflow is the chaos run's workflow that waits for an event, sleeps,
// and calls an async service (waits.yaml).
const WaitsWorkflow = "waits"

// waitsDefinition parses waits.yaml.
func waitsDefinition() workflow.Definition { return mustParse("chaos/waits.yaml", waitsFile) }

// mustParse parses a workflow file of the run's own.
func mustParse(name string, file []byte) workflow.Definition {
	d, err := workflow.ParseFile(name, file, workflow.Options{})
	if err != nil {
		panic(err) // a test of this package parses it
	}
	return d
}

// approvedEvent is the event waits.yaml waits for.
const approvedEvent = "approved"

// fate is what the run does with a waits order's approval.
type fate string

const (
	fateLate  fate = "late"  // sent at a random point, usually after the order reached its wait
	fateEarly fate = "early" // sent with the order: kept until the order reaches its wait
	fateTwice fate = "twice" // sent late, then again with the same eventId (a no-op), and once more under another (refused)
	fateNone  fate = "never" // never sent: the wait times out, the order is undone
)

// fateOf is the plan's fate for the approval of order id.
func (p Plan) fateOf(id string) fate {
	x := remotesim.Mix(p.Seed, "event", id)
	switch {
	case x < p.NoEvent:
		return fateNone
	case x < p.NoEvent+p.EarlyEvent:
		return fateEarly
	case x < p.NoEvent+p.EarlyEvent+p.TwiceEvent:
		return fateTwice
	}
	return fateLate
}

// waits reports whether the plan runs order id on the waits workflow.
func (p Plan) waits(id string) bool { return remotesim.Mix(p.Seed, "waits", id) < p.Waits }

// approvedCents is what the approval of the i-th order approves: the charge
// must ask for exactly this (the event's data, through the step's input).
func approvedCents(i int) int64 { return 1000 + int64(i) }

// approval is the approved event for order id (the i-th), under eventID.
func approval(id string, i int, eventID string) string {
	b, _ := json.Marshal(message.Event{Kind: message.KindEvent, OrderID: id, Event: approvedEvent, EventID: eventID,
		Data: json.RawMessage(fmt.Sprintf(`{"amountCents":%d}`, approvedCents(i)))})
	return string(b)
}

// approvalOf is the approval the run sends order id (the i-th) under
// eventID: a hostile one for the plan's share (hostileApproval); in a run
// with large payloads, as many approvals as orders (Large)
// carry a scanned document of 260 KB to 400 KB beside what they approve,
// over SQS's 256 KiB, so that they come by pointer (and, sealed, are
// written over once taken: checkClearCopies).
func (p Plan) approvalOf(id string, i int, eventID string) string {
	if p.approvalHostile(id) {
		return p.hostileApproval(id, i, eventID)
	}
	if remotesim.Mix(p.Seed, "large-event", id) >= p.Large {
		return approval(id, i, eventID)
	}
	n := 260<<10 + int(remotesim.Mix(p.Seed, "event-documents", id)*(140<<10))
	b, _ := json.Marshal(message.Event{Kind: message.KindEvent, OrderID: id, Event: approvedEvent, EventID: eventID,
		Data: json.RawMessage(fmt.Sprintf(`{"amountCents":%d,"scan":%q}`, approvedCents(i), strings.Repeat("s", n)))})
	return string(b)
}

// orderBody is the i-th order of the run, on the workflow the plan gives it
// (workflowOf).
func (p Plan) orderBody(id string, i int) string {
	o := localrun.DemoOrder(id, i)
	switch wf := p.workflowOf(id); {
	case wf == WaitsWorkflow:
		o.Workflow = WaitsWorkflow
	case p.flowOrder(id):
		o.Workflow, o.CustomerID = wf, p.customerOf(id)
		o.Items = items(o.Items, i)
		return p.withSearchValues(id, orderJSON(o)) // a hostile customer's name as its sender writes it
	case wf == LimitWorkflow:
		o.Workflow = LimitWorkflow
		return p.limitBody(o)
	case wf == LargeWorkflow:
		o.Workflow = LargeWorkflow
		if c, ok := p.hostiles[id]; ok {
			return hostileBody(o, p.Seed, documentClasses[c])
		}
		return largeBody(o, p.Seed)
	case wf != workflow.OrderWorkflow: // a generated shape, or the parallel workflow
		o.Workflow = wf
		o.Items = items(o.Items, i)
		// its id by the member its workflow names, and its searchable values
		return p.withSearchValues(id, shapes.WithIDField(o.JSON(), shapeIDField(wf)))
	}
	return o.JSON()
}

// items are one to three items (the first one's the demo order's), for a
// step that runs per item.
func items(first []shop.Item, i int) []shop.Item {
	for k := 1; k < 1+i%3; k++ {
		first = append(first, shop.Item{SKU: fmt.Sprintf("SKU-%d-%d", i%13, k), Quantity: k, UnitPriceCents: 199})
	}
	return first
}

// signaller sends the approvals of the run's waits orders, each by its fate.
type signaller struct {
	stack *localrun.Stack
	plan  Plan
	wg    sync.WaitGroup
	mu    sync.Mutex
	sent  map[fate]int
	index map[string]int // order → its position in the run
}

func newSignaller(stack *localrun.Stack, p Plan, ids []string) *signaller {
	s := &signaller{stack: stack, plan: p, sent: map[fate]int{}, index: map[string]int{}}
	for i, id := range ids {
		s.index[id] = i
	}
	return s
}

// schedule sends the approvals of the waits orders among ids: an early one
// at once, a late one at a random point up to EventWithin after now.
func (s *signaller) schedule(ctx context.Context, ids []string) {
	for _, id := range ids {
		if !s.plan.waits(id) {
			continue
		}
		f, i := s.plan.fateOf(id), s.index[id]
		s.count(f)
		switch f {
		case fateNone:
			continue
		case fateEarly:
			s.send(ctx, s.plan.approvalOf(id, i, "e-"+id))
			continue
		}
		at := time.Duration(remotesim.Mix(s.plan.Seed, "event-at", id) * float64(s.plan.EventWithin))
		s.wg.Go(func() {
			if !sleepCtx(ctx, at) {
				return
			}
			s.send(ctx, s.plan.approvalOf(id, i, "e-"+id))
			if f == fateTwice && sleepCtx(ctx, time.Second) {
				s.send(ctx, s.plan.approvalOf(id, i, "e-"+id))     // a repeat: a no-op
				s.send(ctx, s.plan.approvalOf(id, i, "other-"+id)) // another eventId: refused, or taken if it overtook the first
			}
		})
	}
}

func (s *signaller) send(ctx context.Context, body string) { _ = s.stack.SendEvents(ctx, body) }

func (s *signaller) count(f fate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent[f]++
}

func (s *signaller) wait() { s.wg.Wait() }

// counts is how many waits orders had each fate.
func (s *signaller) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for f, n := range s.sent {
		out["approval "+string(f)] = n
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// checkApprovals checks what only the waits orders can break: an order
// Processed though no approval was sent for it, or charged another amount
// than its approval's (the event's data, through the charge's input).
func checkApprovals(p Plan, ids []string, tasks map[string]statestore.Task, ledger []remotesim.Effect) []string {
	charged := map[string]json.RawMessage{} // order → what its charge-payment was asked
	for _, e := range ledger {
		if e.Action == "charge-payment" {
			charged[e.OrderID] = e.Input
		}
	}
	var out []string
	for i, id := range ids {
		t, ok := tasks[id]
		if !ok || !p.waits(id) {
			continue
		}
		if t.State == workflow.Processed && p.fateOf(id) == fateNone {
			out = append(out, id+": Processed, and no approval was sent")
		}
		in, ok := charged[id]
		if !ok {
			continue
		}
		var v struct {
			AmountCents int64 `json:"amountCents"`
		}
		if json.Unmarshal(in, &v) != nil || v.AmountCents != approvedCents(i) {
			out = append(out, fmt.Sprintf("%s: charged %s, approved %d", id, in, approvedCents(i)))
		}
	}
	return out
}
