package workflow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// orderAgents are the example order workflow's agents.
var orderAgents = []string{"inventory", "payment", "shipping"}

func valid() workflow.Definition {
	return workflow.Orders(workflow.Settings{})
}

func TestValidateAcceptsTheDefaultWorkflow(t *testing.T) {
	t.Parallel()
	require.NoError(t, valid().Validate(orderAgents))
	require.Equal(t, orderAgents, valid().Agents())
}

func TestValidateRejectsBadDefinitions(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		edit func(*workflow.Definition) // on a deep copy of the default
		want string
	}{
		"unknown agent":  {func(d *workflow.Definition) { d.Steps[0].Agent = "nobody" }, `unknown agent "nobody"`},
		"duplicate step": {func(d *workflow.Definition) { d.Steps = append(d.Steps, d.Steps[0]) }, "duplicate step"},
		"undo named as a step": {func(d *workflow.Definition) { d.Steps[1].Undo.Name = "reserve-inventory" },
			`duplicate step "reserve-inventory"`},
		"undo of unknown agent": {func(d *workflow.Definition) { d.Steps[0].Undo.Agent = "vault" }, `unknown agent "vault"`},
		"undo without timeout":  {func(d *workflow.Definition) { d.Steps[0].Undo.Timeout = 0 }, `step "release-inventory" has no timeout`},
		"missing timeout":       {func(d *workflow.Definition) { d.Steps[0].Timeout = 0 }, "no timeout"},
		"no threshold":          {func(d *workflow.Definition) { d.Steps[0].MaxFailures = 0 }, "failure threshold"},
		"no steps":              {func(d *workflow.Definition) { d.Steps = nil }, "no steps"},
		"no name":               {func(d *workflow.Definition) { d.Name = "" }, "no name"},
		"unnamed step":          {func(d *workflow.Definition) { d.Steps[0].Name = "" }, "has no name"},
		"no pickup":             {func(d *workflow.Definition) { d.PickupTimeout = 0 }, "pickup timeout"},
		"no deadline":           {func(d *workflow.Definition) { d.Deadline = 0 }, "order deadline"},
		"negative backoff":      {func(d *workflow.Definition) { d.Steps[0].RetryBackoff = -1 }, "negative retry backoff"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := valid()
			for i, st := range d.Steps { // copy the undo actions before editing them
				if st.Undo != nil {
					u := *st.Undo
					d.Steps[i].Undo = &u
				}
			}
			c.edit(&d)
			err := d.Validate(orderAgents)
			require.ErrorContains(t, err, c.want)
		})
	}
}

func TestDecideRetriesAnAttemptBelowThresholdThenGivesUp(t *testing.T) {
	t.Parallel()
	a := workflow.Action{MaxFailures: 3, RetryBackoff: time.Second}
	decide := func(failures int) workflow.Decision {
		return workflow.Decide(workflow.Found{Action: a, State: workflow.Processing, FailureCount: failures}, time.Minute)
	}
	require.Equal(t, workflow.Decision{Verdict: workflow.Retry, FailureCount: 1, After: time.Second}, decide(0))
	require.Equal(t, workflow.Decision{Verdict: workflow.Retry, FailureCount: 2, After: 2 * time.Second}, decide(1))
	require.Equal(t, workflow.Decision{Verdict: workflow.GiveUp, FailureCount: 3}, decide(2))
	// however it got there, never past the threshold
	require.Equal(t, workflow.Decision{Verdict: workflow.GiveUp, FailureCount: 3}, decide(7))
}

func TestDecideNeverCountsQueueWaitAsAFailure(t *testing.T) {
	t.Parallel()
	a := workflow.Action{MaxFailures: 1, RetryBackoff: time.Second} // one failure would give up
	for waited := time.Second; waited < 48*time.Hour; waited *= 2 {
		for _, backlogged := range []bool{false, true} {
			d := workflow.Decide(workflow.Found{Action: a, State: workflow.Pending, Waited: waited, Backlogged: backlogged}, time.Second)
			require.Zero(t, d.FailureCount, "waited %s", waited)
			require.Contains(t, []workflow.Verdict{workflow.Resend, workflow.Hold}, d.Verdict)
			require.Equal(t, backlogged, d.Verdict == workflow.Hold, "a backlog holds the re-send back")
			require.Equal(t, workflow.WaitInterval(time.Second, waited), d.After)
		}
	}
}

// A wait held back by its agent holding its calls (paused, or slowed by its
// service) is looked at again when that hold may have ended and a pickup
// later, however long it waited: in a chaos run, the last order's lost
// request waited 15 minutes behind a pause that had ended long before.
func TestAWaitHeldByAPauseIsLookedAtWhenThePauseMayHaveEnded(t *testing.T) {
	t.Parallel()
	a := workflow.Action{MaxFailures: 3}
	pickup := 10 * time.Second
	for _, c := range []struct {
		waited, ends, after time.Duration
	}{
		{time.Hour, 30 * time.Second, 40 * time.Second},      // paused: its requests look again every 30 s
		{time.Hour, 2 * time.Minute, 2*time.Minute + pickup}, // slowed: until its slow-down ends
		{5 * time.Second, time.Minute, pickup},               // never later than the growing interval
		{time.Hour, 0, workflow.MaxRecoveryDelay},            // another backlog: the growing interval
	} {
		d := workflow.Decide(workflow.Found{Action: a, State: workflow.Pending, Waited: c.waited, Backlogged: true,
			BacklogEnds: c.ends}, pickup)
		require.Equal(t, workflow.Decision{Verdict: workflow.Hold, After: c.after}, d, "%+v", c)
	}
}

// An attempt past its CompleteBy is judged then, whatever the queues hold:
// its Agent records the outcome before it replies, so a reply still in a
// queue means a recorded outcome, never a claimed record.
func TestDecideJudgesAnOverdueAttemptWhateverTheQueuesHold(t *testing.T) {
	t.Parallel()
	a := workflow.Action{MaxFailures: 3, RetryBackoff: time.Second}
	for _, backlogged := range []bool{false, true} {
		d := workflow.Decide(workflow.Found{Action: a, State: workflow.Processing, Backlogged: backlogged}, 7*time.Second)
		require.Equal(t, workflow.Decision{Verdict: workflow.Retry, FailureCount: 1, After: time.Second}, d)
	}
}

func TestDecideGivesUpPastTheOrderDeadlineWhateverItWaitsFor(t *testing.T) {
	t.Parallel()
	a := workflow.Action{MaxFailures: 5}
	for _, st := range []workflow.State{workflow.Pending, workflow.Processing} {
		for _, backlogged := range []bool{false, true} {
			d := workflow.Decide(workflow.Found{Action: a, State: st, FailureCount: 2, PastDeadline: true,
				Backlogged: backlogged}, time.Second)
			require.Equal(t, workflow.Decision{Verdict: workflow.GiveUp, FailureCount: 2}, d, "%s backlogged=%v", st, backlogged)
		}
	}
}

func TestWaitIntervalDoublesTheWaitAndCaps(t *testing.T) {
	t.Parallel()
	require.Equal(t, time.Second, workflow.WaitInterval(time.Second, 0), "at least the pickup timeout")
	require.Equal(t, 3*time.Second, workflow.WaitInterval(time.Second, 3*time.Second), "as long again")
	looks, at := 0, time.Second // the first look, at the pickup timeout
	for at < time.Hour {
		at += workflow.WaitInterval(time.Second, at)
		looks++
	}
	require.Less(t, looks, 20, "an hour's wait is a handful of looks: %d", looks)
	require.Equal(t, workflow.MaxRecoveryDelay, workflow.WaitInterval(time.Minute, 5*time.Hour))
}

func TestCauseSaysWhetherTheSupervisorGaveUp(t *testing.T) {
	t.Parallel()
	require.False(t, workflow.Refused.GaveUp())
	require.True(t, workflow.TimedOut.GaveUp())
	require.True(t, workflow.Expired.GaveUp())
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
	for _, s := range []workflow.State{workflow.Processed, workflow.Failed, workflow.CompensationFailed} {
		require.True(t, s.Ended(), s)
	}
	for _, s := range []workflow.State{workflow.Pending, workflow.Processing, workflow.Compensating, workflow.Error} {
		require.False(t, s.Ended(), s)
	}
}

func TestIdempotencyKeyIsTheSameForEveryAttempt(t *testing.T) {
	t.Parallel()
	require.Equal(t, "o-1/reserve-inventory", workflow.IdempotencyKey("o-1", "reserve-inventory", 1))
	require.Equal(t, "o-1/reserve-inventory/r2", workflow.IdempotencyKey("o-1", "reserve-inventory", 2),
		"a resubmitted order's effects are new")
}

func TestActionNamesAStepsOrItsUndosAction(t *testing.T) {
	t.Parallel()
	d := valid()
	d.Steps[1].Undo = nil
	_, ok := d.Action(workflow.Ref{Index: 1, Undo: true})
	require.False(t, ok)
	a, ok := d.Action(workflow.Ref{Index: 0, Undo: true})
	require.True(t, ok)
	require.Equal(t, "release-inventory", a.Name)
	_, ok = d.Action(workflow.Ref{Index: 9})
	require.False(t, ok)
}

func TestSeqOrdersEveryEventOfEveryRound(t *testing.T) {
	t.Parallel()
	at := func(i int) workflow.Ref { return workflow.Ref{Index: i} }
	order := []int{
		workflow.Seq(1, workflow.EventReceived, at(0)),
		workflow.Seq(1, workflow.EventStepDone, at(0)),
		workflow.Seq(1, workflow.EventStepDone, at(1)),
		workflow.Seq(1, workflow.EventFailed, at(2)),
		workflow.Seq(1, workflow.EventUndoDone, at(1)),
		workflow.Seq(1, workflow.EventUndoDone, at(0)),
		workflow.Seq(1, workflow.EventCompensated, at(0)),
		workflow.Seq(2, workflow.EventReceived, at(0)),
		workflow.Seq(2, workflow.EventStepDone, at(0)),
		workflow.Seq(2, workflow.EventProcessed, at(0)),
	}
	for i := 1; i < len(order); i++ {
		require.Greater(t, order[i], order[i-1], "event %d", i)
	}
	last := workflow.Ref{Index: workflow.MaxSteps - 1, Item: workflow.MaxForEachItems}
	require.Less(t, workflow.Seq(1, workflow.EventStepDone, last), workflow.Seq(1, workflow.EventProcessed, at(0)))
	require.Less(t, workflow.Seq(1, workflow.EventFailed, last), workflow.Seq(1, workflow.EventCancelRequested, at(0)))
	require.Less(t, workflow.Seq(1, workflow.EventUndoDone, workflow.Ref{Index: 0}), workflow.Seq(1, workflow.EventCompensated, at(0)))
	require.Less(t, workflow.Seq(9, workflow.EventRejected, at(0)), workflow.Seq(10, workflow.EventReceived, at(0)))
	require.Equal(t, workflow.Seq(1, workflow.EventStepDone, at(1)), workflow.Seq(1, workflow.EventStepDone, at(1)), "a duplicate has the same number")
	seen := map[int]workflow.Ref{}
	for i := range workflow.MaxSteps {
		for k := range workflow.MaxForEachItems + 1 {
			for _, e := range []workflow.Event{workflow.EventStepDone, workflow.EventFailed, workflow.EventUndoDone} {
				r := workflow.Ref{Index: i, Item: k}
				n := workflow.Seq(1, e, r)
				prev, dup := seen[n]
				require.False(t, dup, "%s of %v has the number of %v", e, r, prev)
				seen[n] = r
			}
		}
	}
}

func TestDecideGivesUpOnACancelledOrdersOverdueWork(t *testing.T) {
	t.Parallel()
	a := workflow.Action{MaxFailures: 5}
	d := workflow.Decide(workflow.Found{Action: a, State: workflow.Processing, FailureCount: 1, Cancelled: true}, time.Second)
	require.Equal(t, workflow.Decision{Verdict: workflow.GiveUp, FailureCount: 1}, d, "not retried: nothing starts again")
	d = workflow.Decide(workflow.Found{Action: a, State: workflow.Processing, Cancelled: true, Backlogged: true}, time.Second)
	require.Equal(t, workflow.GiveUp, d.Verdict, "an unrecorded outcome is in no queue: a backlog changes nothing")
}
