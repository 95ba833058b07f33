package localrun_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/workflow"
)

// requireEndMetric checks that e's handlers emitted one end of workflow wf
// in state st in its workflow's health metrics: OrdersEnded by Workflow
// and State, and OrdersFailed by Workflow (what its failure rate alarm
// reads), 1 for a failure, else 0.
func requireEndMetric(t *testing.T, e *env, wf string, st workflow.State) {
	t.Helper()
	var ended []map[string]any
	for _, l := range e.stack.Tally.Lines(metrics.OrdersEnded) {
		if l[metrics.DimensionWorkflow] == wf && l[metrics.DimensionState] == string(st) {
			ended = append(ended, l)
		}
	}
	require.Len(t, ended, 1, "workflow %s's end in %s, in its metrics", wf, st)
	failed := 0.0
	if st == workflow.Failed || st == workflow.CompensationFailed {
		failed = 1
	}
	require.EqualValues(t, 1, ended[0][metrics.OrdersEnded])
	require.EqualValues(t, failed, ended[0][metrics.OrdersFailed])
	require.Contains(t, ended[0], metrics.OrderDuration)
}

// An order held by its first step's failure, which no operator decides on
// within its hold, is undone by the Supervisor: nothing ran, so its write
// ends the order Failed, and that end is in the workflow's metrics as
// every other end is (the Supervisor counted only the ends of its
// give-ups).
func TestAHoldsEndByTheSupervisorIsInItsWorkflowsMetrics(t *testing.T) {
	t.Parallel()
	text, err := workflow.ExampleFile(workflow.OrderWorkflow)
	require.NoError(t, err)
	held := strings.Replace(string(text), "  - name: reserve-inventory\n    agent: inventory\n",
		"  - name: reserve-inventory\n    agent: inventory\n    onFailure: hold\n    holdFor: 2s\n", 1)
	require.NotEqual(t, string(text), held)
	e := newEnv(t, remotesim.Faults{}, running(t, held))
	e.sim.SetFaults("inventory", remotesim.Faults{PermanentOrders: []string{"o-held"}})
	e.order("o-held", "")
	tasks := e.waitEndedWithin([]string{"o-held"}, time.Minute)
	require.Equal(t, workflow.Failed, tasks["o-held"].State, "nothing ran: nothing to undo")
	e.stop() // every invocation ended: its metrics are written
	require.EqualValues(t, 1, e.stack.Tally.Sum(metrics.HoldsEnded))
	requireEndMetric(t, e, workflow.OrderWorkflow, workflow.Failed)
}
