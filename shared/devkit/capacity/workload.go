package capacity

import (
	"fmt"
	"strings"

	"github.com/sas-go/sas/shared/devkit/costbench"
	"github.com/sas-go/sas/shared/workflow"
)

// Workload is what one order asks of a deployment.
type Workload struct {
	Name string
	// Flows are the messages an order sends through each event source
	// mapping.
	Flows []Flow
	// StateWrites and OrdersWrites are the write units an order costs each
	// table; IndexWrites its deadline-index writes (entering it, leaving it:
	// 2 on the happy path).
	StateWrites, OrdersWrites, IndexWrites float64
	// Looks are the Supervisor's looks at an order at a steady rate (none
	// on the happy path: an order ends before its first look). A burst's
	// come from its queue wait (Burst).
	Looks float64
}

// Flow is an order's messages through one event source mapping: a queue and
// the function that consumes it.
type Flow struct {
	Queue    string // its role: "orders", "scheduler", "<agent> requests", "<agent> responses"
	Consumer Consumer
	PerOrder float64
}

// Consumer is a function that consumes a queue: Submission, the Scheduler,
// or an agent.
type Consumer struct {
	Handler string // its handler's throughput figures: "submission", "scheduler", "agent"
	Agent   string // for an agent: which
}

// String is the function's name, as the stack's metrics carry it.
func (c Consumer) String() string {
	if c.Agent != "" {
		return "agent-" + c.Agent
	}
	return c.Handler
}

// Submission and Scheduler are the consumers of the orders queue and of the
// scheduler and response queues.
var (
	Submission = Consumer{Handler: "submission"}
	Scheduler  = Consumer{Handler: "scheduler"}
)

// Agent is agent a's function.
func Agent(a string) Consumer { return Consumer{Handler: "agent", Agent: a} }

// Happy is the workload of an order of def that goes well: it enters the
// orders queue, each step's request goes to its agent and its reply to the
// Scheduler; on the tables, the write units sasctl bench counts for it
// (stateWrites on the state table besides the index, 2 on the orders table,
// 2 index writes).
func Happy(def workflow.Definition, stateWrites float64) Workload {
	w := Workload{Name: def.Name, StateWrites: stateWrites, OrdersWrites: 2, IndexWrites: 2,
		Flows: []Flow{{Queue: "orders", Consumer: Submission, PerOrder: 1}}}
	add := func(queue string, c Consumer) {
		for i := range w.Flows {
			if w.Flows[i].Queue == queue {
				w.Flows[i].PerOrder++
				return
			}
		}
		w.Flows = append(w.Flows, Flow{Queue: queue, Consumer: c, PerOrder: 1})
	}
	for _, st := range def.Steps {
		if st.Kind() != workflow.KindAgent {
			continue // a wait or a timer: no agent, and no message while it waits
		}
		add(st.Agent+" requests", Agent(st.Agent))
		add(st.Agent+" responses", Scheduler)
	}
	return w
}

// EstimatedStateWrites are the state table's write units of an order of
// def that goes well, as docs/cost.md counts them, besides the index's:
// two in Submission's transaction, and a claim and a completion per step
// that calls an agent (a state item under 1 KB). A bench run measures them
// (FromBench).
func EstimatedStateWrites(def workflow.Definition) float64 {
	n := 2.0
	for _, st := range def.Steps {
		if st.Kind() == workflow.KindAgent {
			n += 2
		}
	}
	return n
}

// FromBench is the workload sasctl bench measured for a run of def: the
// happy path's flows, and the write units it counted, the orders table's
// two (the order's item, in Submission's transaction) and the two index
// writes set apart.
func FromBench(def workflow.Definition, run costbench.Run) (Workload, error) {
	if run.Workflow != def.Name {
		return Workload{}, fmt.Errorf("capacity: a bench run of workflow %q, not %q", run.Workflow, def.Name)
	}
	w := Happy(def, run.PerOrder.WriteUnits-4)
	if w.StateWrites < 0 {
		return Workload{}, fmt.Errorf("capacity: %.1f write units an order is fewer than an order's submission", run.PerOrder.WriteUnits)
	}
	return w, nil
}

// agents are the workload's agents, in flow order.
func (w Workload) agents() []string {
	var out []string
	for _, f := range w.Flows {
		if f.Consumer.Agent != "" && strings.HasSuffix(f.Queue, " requests") {
			out = append(out, f.Consumer.Agent)
		}
	}
	return out
}
