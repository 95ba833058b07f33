package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// A step that changes nothing to undo (undo: none) is kept so in its
// record: the undoing passes it by, and a cancel after it ran is taken.
var noUndoTests = map[string]func(*testing.T, *statestore.Store){
	"AStepWithNothingToUndoIsPassedBy": nothingToUndo,
}

func nothingToUndo(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	d := def(3)
	d.Steps[1].Undo, d.Steps[1].NoUndo = nil, true
	for _, id := range []string{"o-1", "o-2"} {
		_, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`, Workflow: d, Now: t0})
		require.NoError(t, err)
		finish(t, s, d, claimedAs(t, s, id, step0, t0), "", t0)
		finish(t, s, d, claimedAs(t, s, id, step1, t0), "", t0.Add(time.Millisecond))
	}
	r := finish(t, s, d, claimedAs(t, s, "o-1", step2, t0), "no", t0.Add(time.Second))
	require.Equal(t, []workflow.Ref{undo0}, r.Ready, "step 1 has nothing to undo: step 0's undo runs")
	require.Equal(t, workflow.Failed, finishUndo(t, s, "o-1", undo0), "undone, no pivot")

	res, err := cancel(ctx, s, cancelReq("o-2", t0.Add(time.Second)))
	require.NoError(t, err, "step 1 ran, and changed nothing that needs undoing")
	require.Equal(t, &undo0, res.Undo)
}
