package workflow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

func valid() workflow.Definition {
	return workflow.Orders(workflow.DefaultSettings())
}

func TestValidateAcceptsTheDefaultWorkflow(t *testing.T) {
	t.Parallel()
	require.NoError(t, valid().Validate([]string{workflow.InventoryAgent}))
	require.Equal(t, []string{workflow.InventoryAgent}, valid().Agents())
}

func TestValidateRejectsBadDefinitions(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		edit func(*workflow.Definition)
		want string
	}{
		"unknown agent":    {func(d *workflow.Definition) { d.Steps[0].Agent = "nobody" }, `unknown agent "nobody"`},
		"duplicate step":   {func(d *workflow.Definition) { d.Steps = append(d.Steps, d.Steps[0]) }, "duplicate step"},
		"missing timeout":  {func(d *workflow.Definition) { d.Steps[0].Timeout = 0 }, "no timeout"},
		"no threshold":     {func(d *workflow.Definition) { d.Steps[0].MaxFailures = 0 }, "failure threshold"},
		"no steps":         {func(d *workflow.Definition) { d.Steps = nil }, "no steps"},
		"no name":          {func(d *workflow.Definition) { d.Name = "" }, "no name"},
		"unnamed step":     {func(d *workflow.Definition) { d.Steps[0].Name = "" }, "has no name"},
		"no pickup":        {func(d *workflow.Definition) { d.PickupTimeout = 0 }, "pickup timeout"},
		"negative backoff": {func(d *workflow.Definition) { d.Steps[0].RetryBackoff = -1 }, "negative retry backoff"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := valid()
			c.edit(&d)
			err := d.Validate([]string{workflow.InventoryAgent})
			require.ErrorContains(t, err, c.want)
		})
	}
}

func TestDecideRecoveryRetriesBelowThresholdThenGivesUp(t *testing.T) {
	t.Parallel()
	s := workflow.Step{MaxFailures: 3, RetryBackoff: time.Second}
	r := workflow.DecideRecovery(s, 0)
	require.Equal(t, workflow.Recovery{FailureCount: 1, Delay: time.Second}, r)
	r = workflow.DecideRecovery(s, 1)
	require.Equal(t, workflow.Recovery{FailureCount: 2, Delay: 2 * time.Second}, r)
	r = workflow.DecideRecovery(s, 2)
	require.Equal(t, workflow.Recovery{GiveUp: true, FailureCount: 3}, r)
	r = workflow.DecideRecovery(s, 7) // however it got there, never past the threshold
	require.Equal(t, workflow.Recovery{GiveUp: true, FailureCount: 3}, r)
}

func TestRecoveryDelayDoublesAndCaps(t *testing.T) {
	t.Parallel()
	require.Zero(t, workflow.RecoveryDelay(0, 3))
	require.Zero(t, workflow.RecoveryDelay(time.Second, 0))
	require.Equal(t, time.Second, workflow.RecoveryDelay(time.Second, 1))
	require.Equal(t, 8*time.Second, workflow.RecoveryDelay(time.Second, 4))
	require.Equal(t, workflow.MaxRecoveryDelay, workflow.RecoveryDelay(time.Minute, 10))
	require.Equal(t, workflow.MaxRecoveryDelay, workflow.RecoveryDelay(time.Minute, 1000))
}

func TestStateEnded(t *testing.T) {
	t.Parallel()
	require.True(t, workflow.Processed.Ended())
	require.True(t, workflow.Error.Ended())
	require.False(t, workflow.Pending.Ended())
	require.False(t, workflow.Processing.Ended())
}

func TestIdempotencyKeyIsTheSameForEveryAttempt(t *testing.T) {
	t.Parallel()
	require.Equal(t, "o-1/reserve-inventory", workflow.IdempotencyKey("o-1", "reserve-inventory"))
}
