package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The suite's cases of a failure's compensation, of a give-up, and of a
// failed order resubmitted.

func failureStartsCompensation(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 2)
	st, err := claim(ctx, s, "o-1", step2, "sched", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, "o-1", step2, st.Attempt, "no courier", t0)
	require.NoError(t, err)
	task, recs := state(t, s)
	require.Equal(t, workflow.Compensating, task.State)
	require.Equal(t, workflow.Error, recs[step2].State)
	require.Equal(t, workflow.Compensating, recs[step2].After, "what its failure decided, for its alert")
	require.Equal(t, t0.Add(time.Minute), recs[undo1].DueAt, "the latest undo is ready, due at its pickup deadline")
	require.True(t, recs[undo0].DueAt.IsZero(), "the earlier one waits its turn")
	_, err = claim(ctx, s, "o-1", undo0, "sched", t0)
	require.ErrorIs(t, err, statestore.ErrNotClaimable)
	_, err = claim(ctx, s, "o-1", undo1, "sched", t0)
	require.NoError(t, err)
}

func undoChainEndsFailed(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 2)
	st, _ := claim(ctx, s, "o-1", step2, "sched", t0)
	_, err := refuse(ctx, s, "o-1", step2, st.Attempt, "no courier", t0)
	require.NoError(t, err)
	u1, err := claim(ctx, s, "o-1", undo1, "sched", t0)
	require.NoError(t, err)
	rec, err := complete(ctx, s, "o-1", undo1, u1.Attempt, t0)
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{undo0}, rec.Ready)
	u0, err := claim(ctx, s, "o-1", undo0, "sched", t0)
	require.NoError(t, err)
	_, err = complete(ctx, s, "o-1", undo0, u0.Attempt+1, t0)
	require.ErrorIs(t, err, statestore.ErrStale)
	_, err = complete(ctx, s, "o-1", undo0, u0.Attempt, t0)
	require.NoError(t, err)
	task, recs := state(t, s)
	require.Equal(t, workflow.Failed, task.State, "work undone")
	require.False(t, task.CompletedAt.IsZero())
	require.Equal(t, workflow.Processed, recs[undo0].State)
	require.Equal(t, workflow.Processed, recs[undo1].State)
}

func undoFailure(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 2)
	st, _ := claim(ctx, s, "o-1", step2, "sched", t0)
	_, err := refuse(ctx, s, "o-1", step2, st.Attempt, "no courier", t0)
	require.NoError(t, err)
	u1, err := claim(ctx, s, "o-1", undo1, "sched", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, "o-1", undo1, u1.Attempt, "refund refused", t0)
	require.NoError(t, err)
	task, recs := state(t, s)
	require.Equal(t, workflow.CompensationFailed, task.State)
	require.Contains(t, task.LastError, "undo-s1 (undo): refund refused", "the operator sees which undo did not happen")
	require.Equal(t, workflow.Error, recs[undo1].State)
	require.Equal(t, workflow.Pending, recs[undo0].State, "not run")
}

func giveUpCompensates(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 1)
	_, err := claim(ctx, s, "o-1", step1, "sched", t0)
	require.NoError(t, err)
	due, err := Overdue(ctx, s, t0.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.True(t, due[0].HasUndo, "the record tells the supervisor what it can undo")
	now := t0.Add(time.Hour)
	_, err = giveUp(ctx, s, due[0], 3, workflow.TimedOut, "timed out", now.Add(time.Minute), now)
	require.NoError(t, err, "a timed-out step may have taken effect: its own undo first")
	task, recs := state(t, s)
	require.Equal(t, workflow.Compensating, task.State)
	require.Equal(t, now.Add(time.Minute), recs[undo1].DueAt)
	require.True(t, recs[undo0].DueAt.IsZero(), "then the earlier step's")
}

// giveUpPivot: the last step has no undo action; timed out for good, it may
// have taken effect, so nothing is undone (a refund for an order that shipped
// is as wrong as a charge for one that did not): the task ends
// CompensationFailed for the operator, and a resubmission runs the step again
// in the same round (same idempotency key), so the order goes on.
func giveUpPivot(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 2)
	_, err := claim(ctx, s, "o-1", step2, "sched", t0)
	require.NoError(t, err)
	now := t0.Add(time.Hour)
	due, err := Overdue(ctx, s, now, 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.False(t, due[0].HasUndo)
	_, err = giveUp(ctx, s, due[0], 3, workflow.TimedOut, "timed out", now.Add(time.Minute), now)
	require.NoError(t, err)
	task, recs := state(t, s)
	require.Equal(t, workflow.CompensationFailed, task.State, "ended: the operator decides")
	require.False(t, task.CompletedAt.IsZero())
	require.Contains(t, task.LastError, "s2: timed out")
	require.Equal(t, workflow.Error, recs[step2].State)
	require.True(t, recs[step2].GaveUp())
	require.Equal(t, workflow.CompensationFailed, recs[step2].After, "read back the same for a late alert")
	for _, u := range []workflow.Ref{undo0, undo1} {
		require.Equal(t, workflow.Pending, recs[u].State, "nothing undone")
		require.True(t, recs[u].DueAt.IsZero(), "nothing made ready")
	}
	require.False(t, recs[step2].DueAt.IsZero(), "due until the alert is confirmed")

	r, err := s.Resubmit(ctx, "o-1", "", time.Minute, now)
	require.NoError(t, err)
	require.Equal(t, statestore.Resubmission{Ref: step2, Ready: []workflow.Ref{step2}, Step: "s2", Round: 1, Workflow: "test"}, r, "the step again, same round and keys")
	task, recs = state(t, s)
	require.Equal(t, workflow.Pending, task.State)
	require.True(t, task.CompletedAt.IsZero())
	require.Equal(t, workflow.Pending, recs[step2].State)
	require.Zero(t, recs[step2].FailureCount)
	again, err := claim(ctx, s, "o-1", step2, "sched", now)
	require.NoError(t, err)
	require.Equal(t, 2, again.Attempt, "attempts keep counting (fencing)")
	_, err = complete(ctx, s, "o-1", step2, again.Attempt, now)
	require.NoError(t, err)
	task, _ = state(t, s)
	require.Equal(t, workflow.Processed, task.State)
}

func resubmitFailed(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 2, 1)
	st, _ := claim(ctx, s, "o-1", step1, "sched", t0)
	_, err := refuse(ctx, s, "o-1", step1, st.Attempt, "declined", t0)
	require.NoError(t, err)
	u0, _ := claim(ctx, s, "o-1", undo0, "sched", t0)
	_, err = complete(ctx, s, "o-1", undo0, u0.Attempt, t0)
	require.NoError(t, err)

	_, err = s.Resubmit(ctx, "o-1", "s0", time.Minute, t0)
	require.ErrorContains(t, err, `step "s0" is not one that failed (s1)`)
	r, err := s.Resubmit(ctx, "o-1", "s1", time.Minute, t0)
	require.NoError(t, err)
	require.Equal(t, statestore.Resubmission{Ref: step0, Ready: []workflow.Ref{step0}, Step: "s0", Round: 2, Workflow: "test"}, r, "a compensated order runs again from its first step")
	task, recs := state(t, s)
	require.Equal(t, workflow.Pending, task.State)
	require.Equal(t, 2, task.Round)
	require.True(t, task.CompletedAt.IsZero())
	for ref, rec := range recs {
		require.Equal(t, workflow.Pending, rec.State, ref)
		require.Zero(t, rec.FailureCount)
		require.Equal(t, 2, rec.Round)
		require.Equal(t, ref == step0, !rec.DueAt.IsZero(), "only the first step is ready")
	}
	again, err := claim(ctx, s, "o-1", step0, "sched", t0)
	require.NoError(t, err)
	require.Equal(t, 2, again.Attempt, "attempts keep counting across rounds (fencing)")
	_, err = complete(ctx, s, "o-1", step0, 1, t0)
	require.ErrorIs(t, err, statestore.ErrStale, "round 1's reply is stale")
	require.Contains(t, again.Incidents[len(again.Incidents)-1].What, "resubmitted by the operator (round 2)")
}

func resubmitUndo(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 2)
	st, _ := claim(ctx, s, "o-1", step2, "sched", t0)
	_, err := refuse(ctx, s, "o-1", step2, st.Attempt, "no courier", t0)
	require.NoError(t, err)
	u1, _ := claim(ctx, s, "o-1", undo1, "sched", t0)
	_, err = refuse(ctx, s, "o-1", undo1, u1.Attempt, "refund refused", t0)
	require.NoError(t, err)
	r, err := s.Resubmit(ctx, "o-1", "", time.Minute, t0)
	require.NoError(t, err)
	require.Equal(t, statestore.Resubmission{Ref: undo1, Ready: []workflow.Ref{undo1}, Step: "undo-s1", Round: 1, Workflow: "test"}, r)
	task, recs := state(t, s)
	require.Equal(t, workflow.Compensating, task.State)
	require.Equal(t, 1, task.Round)
	require.Equal(t, workflow.Pending, recs[undo1].State)
	require.Equal(t, workflow.Error, recs[step2].State, "the failed step stays failed")
	require.Equal(t, workflow.Processed, recs[step0].State)
	_, err = claim(ctx, s, "o-1", undo1, "sched", t0)
	require.NoError(t, err)
}

func resubmitRefused(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	_, err := s.Resubmit(ctx, "o-1", "", time.Minute, t0)
	require.True(t, statestore.IsNotResubmittable(err))
	require.ErrorContains(t, err, "order o-1 is Pending; only Failed or CompensationFailed orders can be resubmitted")
	_, err = s.Resubmit(ctx, "nope", "", time.Minute, t0)
	require.ErrorIs(t, err, statestore.ErrNotFound)
}
