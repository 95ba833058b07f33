package operator

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// A cancel says which step will not run, and, for a held order (whose
// step failed: none is ready to stop), that nothing more runs: never a
// step with no name.
func TestACancelSaysWhatWillNotRun(t *testing.T) {
	for _, c := range []struct {
		res  statestore.Cancellation
		want string
	}{
		{statestore.Cancellation{Verdict: workflow.CancelStops, State: workflow.Cancelled, Stopped: "reserve"},
			"step reserve will not run; nothing completed has anything to undo: it ended Cancelled"},
		{statestore.Cancellation{Verdict: workflow.CancelStops, State: workflow.Compensating, Stopped: "charge"},
			"step charge will not run; the completed steps are being undone, then it ends Cancelled"},
		{statestore.Cancellation{Verdict: workflow.CancelStops, State: workflow.Compensating},
			"nothing more runs; the completed steps are being undone, then it ends Cancelled"},
	} {
		require.Equal(t, c.want, cancelWhat(c.res))
	}
}
