// Package dispatch starts work: it sends a ready step's (or undo action's)
// request to its Agent's queue. It writes nothing, the Agent's claim starts
// the attempt, so the time a request waits in the queue is queue wait.
//
// Starting a record has one route: its request goes straight to its Agent,
// from whoever made it ready or found it lost. Submission dispatches an
// order's first steps where it stores the order, the Scheduler what an
// outcome made ready, the Supervisor a record whose request was lost (or a
// retry, after its backoff) and the first undo of a give-up, the operator a
// resubmission's and a cancel's (Restarter: from the record alone, no
// workflow). Only a wait or a timer goes through the scheduler queue: arming
// or waking it takes its workflow, which the Scheduler has.
package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

// Sender sends queue messages.
type Sender interface {
	SendJSON(ctx context.Context, queueURL string, v any, delay time.Duration) error
}

// Dispatcher sends requests to the Agents' queues.
type Dispatcher struct {
	AgentQueues map[string]string // agent name → its request queue URL
	Send        Sender
}

// Check says which agent of the workflows has no queue, if any.
func (d Dispatcher) Check(workflows workflow.Set) error {
	for _, a := range workflows.Agents() {
		if d.AgentQueues[a] == "" {
			return fmt.Errorf("no request queue configured for agent %q", a)
		}
	}
	return nil
}

// Start sends the request for record r of the order, which runs workflow
// def, to its Agent, carrying the order if the caller has it. If the send is
// lost, the ready record's pickup deadline brings the Supervisor, which has
// it sent again.
func (d Dispatcher) Start(ctx context.Context, def workflow.Definition, orderID string, r workflow.Ref, payload json.RawMessage) error {
	a, ok := def.Action(r)
	if !ok || (r.Item > 0) != (def.Steps[r.Index].ForEach != "") {
		return message.Invalid("%s is not in workflow %q", describe(r), def.Name)
	}
	url := d.AgentQueues[a.Agent]
	if url == "" {
		return message.Invalid("workflow %q: %s calls agent %q, which this deployment does not run", def.Name, describe(r), a.Agent)
	}
	req := message.AgentRequest{OrderID: orderID, Step: r.Index, Undo: r.Undo, Item: r.Item, StepName: a.Name, Action: a.Do,
		Workflow: def.Name, Version: def.Version, Payload: payload}
	return d.Send.SendJSON(ctx, url, req, 0)
}

func describe(r workflow.Ref) string {
	item := ""
	if r.Item > 0 {
		item = fmt.Sprintf(" (item %d)", r.Item)
	}
	if r.Undo {
		return fmt.Sprintf("the undo of step %d%s", r.Index, item)
	}
	return fmt.Sprintf("step %d%s", r.Index, item)
}
