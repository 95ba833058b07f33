package localrun_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/workflow"
)

func TestHappyPathThreeSteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, patient)
	ids := e.orders(20)
	tasks := e.waitEnded(ids)
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State, id)
		recs := e.records(id)
		require.Len(t, recs, 5, "three steps and two undo actions")
		for i := range forward {
			st := recs[workflow.Ref{Index: i}]
			require.Equal(t, workflow.Processed, st.State)
			require.Equal(t, 1, st.Attempt)
			require.Zero(t, st.FailureCount)
			require.Regexp(t, `^[0-9a-f]{12}$`, st.LockedBy, "the agent instance that ran it")
			require.False(t, st.DoneAt.Before(st.ClaimedAt))
			require.Empty(t, st.Incidents, "a happy path writes no history: the record's times tell it")
		}
		for _, u := range []workflow.Ref{{Index: 0, Undo: true}, {Index: 1, Undo: true}} {
			require.Equal(t, workflow.Pending, recs[u].State, "no undo ran")
			require.Zero(t, recs[u].Attempt)
		}
	}
	e.requireEffectsOnce(ids)
	e.stop() // every invocation ended: its metrics are written (one document a batch)
	require.EqualValues(t, 20, e.stack.Tally.Sum(metrics.OrdersProcessed))
	require.EqualValues(t, 60, e.stack.Tally.Sum(metrics.StepsClaimed))
	dlq, err := e.stack.Peek(context.Background(), e.stack.QueueURL(e.stack.Topology().OrdersQueue().DLQName))
	require.NoError(t, err)
	require.Empty(t, dlq)
}
