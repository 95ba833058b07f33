package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// moveKeepsAStep: a step the version moved to has not, done and kept by
// its plan (migrate.keep), goes with the order to a step of its own
// definition, appended: its record with its state, attempts and DoneAt,
// its result under its name, its undo record. A later failure undoes it,
// with the undo of the version that ran it, in its turn; a resubmission
// of the order undone never runs it again.
func moveKeepsAStep(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	v1 := def(3) // s0, s1 (each with an undo), s2
	v1.Version = "v1"
	v2 := def(3)
	v2.Steps = append(v2.Steps[:1:1], v2.Steps[2])
	v2.Version, v2.Migrate = "v2", workflow.Migration{Keep: []string{"s1"}}
	submitAt(t, s, "o-1", v1, 2)
	_, before := state(t, s)
	at := t0.Add(time.Hour)
	moved, err := s.Migrate(ctx, statestore.Move{OrderID: "o-1", To: v2, By: "ops", Now: at})
	require.NoError(t, err)
	require.Equal(t, "v2", moved.Base, "a version of its own, a form of v2")
	require.Equal(t, 2, moved.Results, "s1's result to its new key, its old one deleted")

	kept, keptUndo := workflow.Ref{Index: 2}, workflow.Ref{Index: 2, Undo: true}
	_, recs := state(t, s)
	require.Equal(t, "s1", recs[kept].Name)
	require.Equal(t, workflow.Processed, recs[kept].State)
	require.Equal(t, 1, recs[kept].Attempt)
	require.Equal(t, before[step1].DoneAt, recs[kept].DoneAt, "when it was done: its turn in the undoing")
	require.True(t, recs[kept].HasUndo)
	require.Equal(t, "undo-s1", recs[keptUndo].Name)
	require.Equal(t, workflow.Pending, recs[workflow.Ref{Index: 1}].State, "s2 runs next, at its place in v2")
	results, err := s.Results(ctx, "o-1", 1)
	require.NoError(t, err)
	require.Len(t, results, 2)
	require.Equal(t, "s1", results[kept].Name)
	require.JSONEq(t, `{"from":"s1"}`, string(results[kept].JSON))
	d, err := s.Definition(ctx, "o-1")
	require.NoError(t, err)
	require.Equal(t, "v1", d.Steps[2].Kept)

	// s2 refused: s1, kept, is undone first (done last), then s0.
	st, err := s.Claim(ctx, statestore.Claim{OrderID: "o-1", Ref: step1, Agent: "svc", Owner: "a", Version: d.Version, Now: at})
	require.NoError(t, err)
	rec, err := refuse(ctx, s, "o-1", step1, st.Attempt, "declined", at)
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{keptUndo}, rec.Ready, "the kept step's undo first")
	u, err := claim(ctx, s, "o-1", keptUndo, "sched", at)
	require.NoError(t, err)
	rec, err = complete(ctx, s, "o-1", keptUndo, u.Attempt, at)
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{undo0}, rec.Ready)
	u, err = claim(ctx, s, "o-1", undo0, "sched", at)
	require.NoError(t, err)
	rec, err = complete(ctx, s, "o-1", undo0, u.Attempt, at)
	require.NoError(t, err)
	require.Equal(t, workflow.Failed, rec.State)

	r, err := s.Resubmit(ctx, "o-1", "", time.Minute, at)
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{step0}, r.Ready, "a new round runs from the first step, never the kept one")
}
