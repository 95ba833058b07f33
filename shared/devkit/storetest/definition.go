package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// definitionTests are the cases of an order keeping the workflow it
// started with.
var definitionTests = map[string]func(*testing.T, *statestore.Store){
	"DefinitionReadsBackTheWorkflowAnOrderStartedWith": definitionReadBack,
	"CancelMakesTheUndoReadyByTheOrdersPickupTimeout":  cancelUsesOrdersPickup,
}

// fulfilment is the example four-step workflow, its pickup timeout 7m.
func fulfilment() workflow.Definition {
	return workflow.MustExample(workflow.FulfilmentWorkflow).With(workflow.Settings{PickupTimeout: 7 * time.Minute})
}

func definitionReadBack(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	want := fulfilment()
	_, err := s.Submit(ctx, statestore.Submission{OrderID: "o-def", Order: `{"orderId":"o-def"}`, Workflow: want, Now: t0})
	require.NoError(t, err)
	got, err := s.Definition(ctx, "o-def")
	require.NoError(t, err)
	require.Equal(t, want.Name, got.Name)
	require.Equal(t, want.Version, got.Version)
	require.Equal(t, 7*time.Minute, got.PickupTimeout)
	require.Equal(t, 48*time.Hour, got.Deadline)
	require.Equal(t, want.Steps, got.Steps, "every action: its name, agent, service action, timeout, threshold, backoff, undo")
	require.Equal(t, "picks", got.Steps[0].DoName())
	task, steps, err := s.Load(ctx, "o-def")
	require.NoError(t, err)
	require.Equal(t, want.Version, task.Version)
	require.Equal(t, want.Version, steps[0].WfVersion)
	require.Equal(t, "fulfilment", steps[0].Workflow)
	require.Equal(t, 7*time.Minute, steps[0].Pickup)
	_, err = s.Definition(ctx, "o-none")
	require.ErrorIs(t, err, statestore.ErrNotFound)
}

func cancelUsesOrdersPickup(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	_, err := s.Submit(ctx, statestore.Submission{OrderID: "o-pk", Order: `{"orderId":"o-pk"}`, Workflow: fulfilment(), Now: t0})
	require.NoError(t, err)
	st, err := s.Claim(ctx, statestore.Claim{OrderID: "o-pk", Ref: workflow.Ref{}, Agent: "warehouse", Owner: "w1", Now: t0})
	require.NoError(t, err)
	_, err = complete(ctx, s, "o-pk", workflow.Ref{}, st.Attempt, t0)
	require.NoError(t, err)
	res, err := cancel(ctx, s, cancelReq("o-pk", t0)) // asks for a 1m pickup: the order's own is 7m
	require.NoError(t, err)
	require.Equal(t, &workflow.Ref{Index: 0, Undo: true}, res.Undo)
	require.Equal(t, "fulfilment", res.Workflow)
	_, steps, err := s.Load(ctx, "o-pk")
	require.NoError(t, err)
	for _, r := range steps {
		if r.Undo && r.Index == 0 {
			require.Equal(t, t0.Add(7*time.Minute).UnixMilli(), r.DueAt.UnixMilli())
		}
	}
}
