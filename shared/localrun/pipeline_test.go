package localrun_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/remotesim"
	"github.com/sas-go/sas/shared/workflow"
)

func TestHappyPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, nil)
	ids := e.orders(20)
	tasks := e.waitEnded(ids)
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State, id)
		st := e.step(id)
		require.Equal(t, workflow.Processed, st.State)
		require.Equal(t, 1, st.Attempt)
		require.Zero(t, st.FailureCount)
		require.Empty(t, st.LockedBy)
	}
	e.requireEffectsOnce(ids)
	require.EqualValues(t, 20, e.stack.Tally.Sum(metrics.OrdersProcessed))
	dlq, err := e.stack.Peek(context.Background(), e.stack.QueueURL(e.stack.Topology().OrdersQueue().DLQName))
	require.NoError(t, err)
	require.Empty(t, dlq)
}
