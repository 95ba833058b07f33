package workflow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// A held step retried by its operator may have taken effect only if its
// failure said so: a pivot its service refused did nothing, and a cancel
// before it runs again undoes the order (it ended CompensationFailed at
// the pivot, found by the explorer); one whose attempts timed out may have,
// and the order can no longer be cancelled.
func TestARetriedHeldStepMayHaveRunOnlyIfItsFailureSaidSo(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		cause   workflow.Cause
		ran     bool
		verdict workflow.CancelVerdict
	}{
		"refused":   {workflow.Refused, false, workflow.CancelStops},
		"timed out": {workflow.TimedOut, true, workflow.CancelRefused},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := valid()
			d.Steps[2].HoldFor = time.Hour // create-shipment, a pivot
			r := start(t, d, nil)
			r.done(step(0))
			r.done(step(1))
			r.claim(step(2))
			r.fail(step(2), c.cause, c.ran)
			require.Equal(t, workflow.Held, r.o.State)
			m, err := d.RetryHeld(r.o, step(2))
			require.NoError(t, err)
			r.o = r.o.After(m)
			require.Equal(t, workflow.Pending, r.o.State)
			_, verdict, _ := r.o.Cancel()
			require.Equal(t, c.verdict, verdict)
		})
	}
}
