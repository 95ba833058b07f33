package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// sends records what was sent where, and after how long.
type sends []struct {
	url   string
	v     any
	delay time.Duration
}

func (s *sends) SendJSON(_ context.Context, url string, v any, delay time.Duration) error {
	*s = append(*s, struct {
		url   string
		v     any
		delay time.Duration
	}{url, v, delay})
	return nil
}

// A record's request goes straight to its Agent, built from the record
// alone; a wait or a timer goes to the Scheduler, which has its workflow.
func TestARecordStartsStraightAtItsAgent(t *testing.T) {
	t.Parallel()
	var out sends
	r := dispatch.Restarter{AgentQueues: map[string]string{"inventory": "q/inventory"}, SchedulerQueueURL: "q/scheduler", Send: &out}
	pack := statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: 4, Item: 2},
		Action: workflow.Action{Name: "pack-item", Agent: "inventory", Do: "pack"}, Kind: workflow.KindAgent},
		OrderOf: statestore.OrderOf{OrderID: "o-1", Workflow: "parallel", WfVersion: "v1"}}
	require.NoError(t, r.StartRecord(context.Background(), pack, 5*time.Second))
	undo := statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: 0, Undo: true},
		Action: workflow.Action{Name: "release-east", Agent: "inventory"}},
		OrderOf: statestore.OrderOf{OrderID: "o-1", Workflow: "parallel"}}
	require.NoError(t, r.StartRecord(context.Background(), undo, 0))
	timer := statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: 2}, Action: workflow.Action{Name: "cool-off"}, Kind: workflow.KindTimer},
		OrderOf: statestore.OrderOf{OrderID: "o-1", Workflow: "parallel", WfVersion: "v1"}}
	require.NoError(t, r.StartRecord(context.Background(), timer, 0))
	require.Len(t, out, 3)
	require.Equal(t, "q/inventory", out[0].url)
	require.Equal(t, message.AgentRequest{OrderID: "o-1", Step: 4, Item: 2, StepName: "pack-item", Action: "pack",
		Workflow: "parallel", Version: "v1"}, out[0].v)
	require.Equal(t, 5*time.Second, out[0].delay, "a retry's backoff rides on its request")
	require.Equal(t, workflow.Ref{Index: 0, Undo: true}, out[1].v.(message.AgentRequest).Ref())
	require.Equal(t, "q/scheduler", out[2].url)
	require.Equal(t, message.NewSchedule("o-1", workflow.Ref{Index: 2}, "parallel", "v1"), out[2].v)
	require.ErrorContains(t, r.StartRecord(context.Background(), statestore.Step{Rec: workflow.Rec{Action: workflow.Action{Agent: "nobody"}},
		OrderOf: statestore.OrderOf{OrderID: "o-1"}}, 0), `no request queue for agent "nobody"`)
}
