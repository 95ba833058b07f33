package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/health"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

var healthTests = map[string]func(*testing.T, *statestore.Store){
	"HealthCountsEachEndOnceInItsHour": healthCountsEachEnd,
	"HealthOfAnHourWithNoEndIsEmpty":   healthEmpty,
}

// Each order's end is counted once, by the write that ended it, in its
// workflow version's hour: its state, its duration, each step's, whether
// its work was undone. A late duplicate of the ending outcome (stale)
// counts nothing, and no order list sees the counts' items.
func healthCountsEachEnd(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		submit(t, s, id, 2)
	}
	run(t, s, "o-1", step0, t0.Add(100*time.Millisecond))
	rec := run(t, s, "o-1", step1, t0.Add(2*time.Second))
	require.Equal(t, workflow.Processed, rec.State)
	require.Equal(t, 2*time.Second, rec.End.Took(), "the end the write made, for the metrics")

	st, err := claim(ctx, s, "o-2", step0, "sched", t0)
	require.NoError(t, err)
	rec, err = refuse(ctx, s, "o-2", step0, st.Attempt, "no", t0.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, workflow.Failed, rec.State, "nothing ran: nothing to undo")

	run(t, s, "o-3", step0, t0.Add(time.Second))
	st, err = claim(ctx, s, "o-3", step1, "sched", t0.Add(time.Second))
	require.NoError(t, err)
	_, err = refuse(ctx, s, "o-3", step1, st.Attempt, "no", t0.Add(2*time.Second))
	require.NoError(t, err)
	rec = run(t, s, "o-3", undo0, t0.Add(3*time.Second))
	require.Equal(t, workflow.Failed, rec.State)
	_, err = complete(ctx, s, "o-3", undo0, 1, t0.Add(4*time.Second))
	require.ErrorIs(t, err, statestore.ErrStale, "a duplicate of the ending outcome")

	hours, err := s.Health(ctx, t0.Add(-time.Hour), t0.Add(time.Hour))
	require.NoError(t, err)
	w := health.Sum(hours, t0)
	require.Len(t, w, 1)
	require.Equal(t, "test", w[0].Workflow)
	require.Equal(t, map[workflow.State]int64{workflow.Processed: 1, workflow.Failed: 2}, w[0].Ended)
	require.EqualValues(t, 1, w[0].Undone, "o-3's work was undone")
	require.EqualValues(t, 3, w[0].Order.Count())
	require.EqualValues(t, 3, w[0].StartedEnded)
	require.Equal(t, 5*time.Second, w[0].Order.Percentile(0.99), "o-3 took 3 s: the 5 s bucket")
	require.Equal(t, time.Second, w[0].Order.Percentile(0.01), "o-2 took 1 s, the least: the 1 s bucket")
	require.EqualValues(t, 2, w[0].Steps["s0"].Count(), "o-1's and o-3's first step")
	require.EqualValues(t, 1, w[0].Steps["s1"].Count())

	tasks, _, err := s.ScanAll(ctx)
	require.NoError(t, err)
	require.Len(t, tasks, 3, "the counts are no order")
	listed, _, err := s.SearchTasks(ctx, statestore.TaskFilter{}, 10, "")
	require.NoError(t, err)
	require.Len(t, listed, 3)
}

// An hour no order ended in reads as nothing, in one Query per shard.
func healthEmpty(t *testing.T, s *statestore.Store) {
	hours, err := s.Health(context.Background(), t0, t0)
	require.NoError(t, err)
	require.Empty(t, hours)
	require.Empty(t, health.Sum(hours, t0))
}
