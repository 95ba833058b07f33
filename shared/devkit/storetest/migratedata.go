package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The cases of a move that reads the order's data: a plan that rewrites
// it or a result it kept, a new step that runs per item. Here the order
// and its results are inline and clear (kept.New(nil, nil)); MovedSealedData
// moves a sealed order whose data is in the payload bucket.

// inline keeps every value inline and clear.
var inline = kept.New(nil, nil)

func moveRewrites(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	v1, v2 := versions()
	v2.Migrate.Transform = workflow.Transform{Order: `.amount |= tonumber`, Results: map[string]string{"s1": `. + {moved: true}`}}
	const sent = `{"orderId":"o-1","amount":"12"}`
	_, err := s.Submit(ctx, statestore.Submission{OrderID: "o-1", Order: sent, Workflow: v1, Now: t0})
	require.NoError(t, err)
	for _, r := range []workflow.Ref{step0, step1} {
		st := claimedAs(t, s, "o-1", r, t0)
		require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: "o-1", Ref: r, Name: st.Name, Round: 1, Attempt: st.Attempt,
			JSON: json.RawMessage(`{"from":"` + st.Name + `"}`), Now: t0}))
		_, err = recordAttempt(ctx, s, outcome.Attempt{OrderID: "o-1", Ref: r, Attempt: st.Attempt, Round: 1, ResultBytes: 12, Now: t0})
		require.NoError(t, err)
	}
	_, err = s.Migrate(ctx, statestore.Move{OrderID: "o-1", To: v2, By: "ops", Now: t0})
	require.ErrorContains(t, err, "nothing to read it with", "a plan that rewrites is never applied without reading")

	dry, err := s.Migrate(ctx, statestore.Move{OrderID: "o-1", To: v2, By: "ops", DryRun: true, Now: t0, Kept: inline})
	require.NoError(t, err)
	require.True(t, dry.Rewritten)
	order, err := s.Order(ctx, "o-1")
	require.NoError(t, err)
	require.Equal(t, sent, order, "a dry run writes nothing")

	moved, err := s.Migrate(ctx, statestore.Move{OrderID: "o-1", To: v2, By: "ops", Now: t0, Kept: inline})
	require.NoError(t, err)
	require.True(t, moved.Rewritten)
	order, err = s.Order(ctx, "o-1")
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"o-1","amount":12}`, order)
	results, err := s.Results(ctx, "o-1", 1)
	require.NoError(t, err)
	s0, s1 := workflow.Ref{Index: v2.Index("s0")}, workflow.Ref{Index: v2.Index("s1")}
	require.JSONEq(t, `{"from":"s0"}`, string(results[s0].JSON), "a result the plan does not name is as it was")
	require.JSONEq(t, `{"from":"s1","moved":true}`, string(results[s1].JSON))
	require.Equal(t, "s1", results[s1].Name)

	was, err := s.WasSent(ctx, "o-1", sent)
	require.NoError(t, err)
	require.True(t, was, "a resend of the order as first accepted is the order still")
	was, err = s.WasSent(ctx, "o-1", `{"orderId":"o-1","amount":"13"}`)
	require.NoError(t, err)
	require.False(t, was)
	task, _ := stateOf(t, s, "o-1")
	require.Contains(t, task.Moves[len(task.Moves)-1].What, "its data rewritten")
}

func moveCountsNewItems(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	v1, v2 := versions()
	v2.Steps[0].ForEach, v2.Steps[0].NoUndo = "items", true
	v2.Migrate = workflow.Migration{}
	_, err := s.Submit(ctx, statestore.Submission{OrderID: "o-1", Order: `{"orderId":"o-1","items":["a","b","c"]}`, Workflow: v1, Now: t0})
	require.NoError(t, err)
	_, err = s.Migrate(ctx, statestore.Move{OrderID: "o-1", To: v2, By: "ops", Now: t0})
	require.ErrorContains(t, err, "which this one did not read", "not given its data, the move cannot count the items")

	at := t0.Add(time.Minute)
	moved, err := s.Migrate(ctx, statestore.Move{OrderID: "o-1", To: v2, By: "ops", Now: at, Kept: inline})
	require.NoError(t, err)
	require.ElementsMatch(t, []workflow.Ref{{Index: 0, Item: 1}, {Index: 0, Item: 2}, {Index: 0, Item: 3}}, moved.Move.Ready)
	var rec outcome.Recorded
	for k := 1; k <= 3; k++ {
		item := workflow.Ref{Index: 0, Item: k}
		st, err := s.Claim(ctx, statestore.Claim{OrderID: "o-1", Ref: item, Agent: "svc", Owner: "a", Version: "v2", Now: at})
		require.NoError(t, err)
		rec, err = complete(ctx, s, "o-1", item, st.Attempt, at)
		require.NoError(t, err, "item %d's outcome", k)
	}
	require.Equal(t, []workflow.Ref{{Index: 1}}, rec.Ready, "its items done, the step after them is ready")
}

func moveToAWait(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	v1 := def(3)
	v1.Name, v1.Version = "waiting", "n1"
	to := waiting()
	to.Version = "n2"
	submitDef(t, s, "o-1", v1)
	_, err := s.Migrate(ctx, statestore.Move{OrderID: "o-1", To: to, By: "ops", Now: t0})
	require.NoError(t, err)
	got, err := outcome.Recorder{Store: s}.Event(ctx, to, outcome.Event{OrderID: "o-1", Name: "approved", EventID: "e-1",
		Data: json.RawMessage(`{"cents":5}`), Now: t0})
	require.NoError(t, err, "the order moved to a version that waits takes its event")
	require.True(t, got.Kept, "before it reaches its wait, kept")
	task, _ := stateOf(t, s, "o-1")
	require.Equal(t, "e-1", task.Events["approved"])
}
