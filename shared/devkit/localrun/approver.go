package localrun

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

// Approver plays the outside world for orders that wait for an event: once
// an order has parked at a wait, it sends the event the wait is for, as a
// person approving, or a payment provider's webhook, would. The demo runs it
// so that a workflow that waits (examples/approval.yaml) runs to its end.
type Approver struct {
	Stack *Stack
	// Data is the event's data for an order (nil: none).
	Data func(orderID, event string) json.RawMessage
	sent map[string]bool // orderID + "/" + event, signalled
}

// Waits reports whether any workflow of the stack waits for an event: else
// an Approver has nothing to do.
func (s *Stack) Waits() bool {
	for _, d := range s.Deployment.Config.Workflows.Definitions() {
		for _, st := range d.Steps {
			if st.Wait != nil {
				return true
			}
		}
	}
	return false
}

// Run signals the parked waits of the orders ids every interval, until ctx
// ends.
func (a *Approver) Run(ctx context.Context, ids []string, every time.Duration) {
	for {
		_, _ = a.Once(ctx, ids) // a read that failed is tried at the next round
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// Once signals each wait of ids that is parked and not signalled yet; it
// returns how many it signalled.
func (a *Approver) Once(ctx context.Context, ids []string) (int, error) {
	if a.sent == nil {
		a.sent = map[string]bool{}
	}
	tasks, err := a.Stack.Store.Tasks(ctx, ids)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if t, ok := tasks[id]; !ok || t.State.Ended() {
			continue
		}
		_, recs, err := a.Stack.Store.Load(ctx, id)
		if err != nil {
			return n, err
		}
		for _, r := range recs {
			key := id + "/" + r.Event
			if r.Kind != workflow.KindEvent || r.State != workflow.Pending || r.Armed.IsZero() || a.sent[key] {
				continue
			}
			e := message.Event{OrderID: id, Event: r.Event, EventID: "approver-" + r.Event}
			if a.Data != nil {
				e.Data = a.Data(id, r.Event)
			}
			if err := a.Stack.Signal(ctx, e); err != nil {
				return n, err
			}
			a.sent[key] = true
			n++
		}
	}
	return n, nil
}
