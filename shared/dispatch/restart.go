package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// RecordReader reads records of an order, all from one read.
type RecordReader interface {
	RecordsOf(ctx context.Context, orderID string, refs []workflow.Ref) ([]statestore.Step, error)
}

// Restarter starts records from what they say, with no workflow: for the
// Supervisor (a lost request, a retry, a give-up's first undo) and the
// operator (a resubmission, a cancel). An agent step's or an undo's request
// goes straight to its Agent; a wait or a timer to the Scheduler, which
// arms it.
type Restarter struct {
	Records           RecordReader      // for Start: the records it is given by ref
	AgentQueues       map[string]string // agent name → its request queue URL
	SchedulerQueueURL string
	Send              Sender
}

// Start starts the order's records refs, after delay.
func (r Restarter) Start(ctx context.Context, orderID string, refs []workflow.Ref, delay time.Duration) error {
	if len(refs) == 0 {
		return nil
	}
	sts, err := r.Records.RecordsOf(ctx, orderID, refs)
	if err != nil {
		return fmt.Errorf("start %s: %w", orderID, err)
	}
	for _, st := range sts {
		if err := r.StartRecord(ctx, st, delay); err != nil {
			return err
		}
	}
	return nil
}

// StartRecord starts record st after delay. If the send is lost, the
// record's pickup deadline brings the Supervisor, which starts it again.
func (r Restarter) StartRecord(ctx context.Context, st statestore.Step, delay time.Duration) error {
	url := r.QueueOf(st)
	switch {
	case parked(st):
		return r.Send.SendJSON(ctx, url, message.NewSchedule(st.OrderID, st.Ref, st.Workflow, st.WfVersion), delay)
	case url == "":
		return fmt.Errorf("start %s: no request queue for agent %q", st.Key(), st.Agent)
	}
	return r.Send.SendJSON(ctx, url, st.Request(), delay)
}

// QueueOf is the queue record st's start goes to, and may wait in: its
// agent's request queue, or, a wait's or a timer's, the scheduler queue
// ("" for an agent with no queue known).
func (r Restarter) QueueOf(st statestore.Step) string {
	if parked(st) {
		return r.SchedulerQueueURL
	}
	return r.AgentQueues[st.Agent]
}

// parked reports whether st is a wait or a timer, which the Scheduler arms.
func parked(st statestore.Step) bool { return !st.Undo && st.Kind != workflow.KindAgent }
