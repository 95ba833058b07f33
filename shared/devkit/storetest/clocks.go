package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// clockTests are the cases of the three clocks: queue wait (never a
// failure), an attempt's CompleteBy, and the order's deadline.
var clockTests = map[string]func(*testing.T, *statestore.Store){
	"WaitingIsNoFailure":                  waitingIsNoFailure,
	"WaitedIsConditionalOnVersionRead":    waitedRace,
	"ClaimPullsTheIndexInToCompleteBy":    claimPullsIndexIn,
	"ClaimRefusesAnotherAgentsRecord":     claimWrongAgent,
	"OrderDeadlineMakesTheWorkingStepDue": deadlineDue,
	"CompensationHasItsOwnDeadline":       compensationDeadline,
	"LateReplyCompletesARequeuedRecord":   lateReplyOfLatestAttempt,
	"ResubmitGivesANewDeadline":           resubmitNewDeadline,
	"CensusCountsTheStepsAtWork":          census,
	"CensusCountsOnlyOrdersInFlight":      censusInFlight,
}

func overdueAt(t *testing.T, s *statestore.Store, at time.Time) []statestore.Step {
	t.Helper()
	due, err := Overdue(context.Background(), s, at, 10)
	require.NoError(t, err)
	return due
}

// waitingIsNoFailure: a ready record found unclaimed is waited on, again and
// again, and never gains a failure; the order stays in the index at the new
// look, and a claim still takes it.
func waitingIsNoFailure(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	require.Empty(t, overdueAt(t, s, t0.Add(59*time.Second)), "not before the pickup deadline")
	at := t0.Add(time.Minute)
	for i := range 4 {
		due := overdueAt(t, s, at)
		require.Len(t, due, 1, "look %d", i)
		require.Equal(t, workflow.Pending, due[0].State)
		require.Equal(t, i, due[0].Waits)
		require.Equal(t, t0, due[0].ReadyAt, "ready since submission")
		next := at.Add(workflow.WaitInterval(time.Minute, at.Sub(t0)))
		require.NoError(t, waited(ctx, s, due[0], i%2 == 0, false, next, at))
		require.Empty(t, overdueAt(t, s, next.Add(-time.Millisecond)), "not looked at before the new due time")
		at = next
	}
	_, recs := state(t, s)
	require.Zero(t, recs[step0].FailureCount, "waiting is not failing")
	require.Equal(t, 4, recs[step0].Waits)
	require.Equal(t, 2, recs[step0].Resent, "the looks that re-sent its message")
	require.Empty(t, recs[step0].Incidents, "a wait is counted, not written down")
	require.Equal(t, workflow.Pending, recs[step0].State)
	st, err := claim(ctx, s, "o-1", step0, "agent-a", at)
	require.NoError(t, err)
	require.Equal(t, 1, st.Attempt)
	require.Equal(t, at.Add(10*time.Second), st.CompleteBy)
}

// waitedRace: of several supervisors recording the same wait, one wins.
func waitedRace(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1)
	at := t0.Add(time.Minute)
	read := overdueAt(t, s, at)
	require.Len(t, read, 1)
	var wins, stale int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			err := waited(ctx, s, read[0], true, false, at.Add(time.Hour), at)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins++
			} else {
				require.True(t, isConflict(err), "%v", err)
				stale++
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, wins)
	require.Equal(t, 3, stale)
	_, recs := state(t, s)
	require.Equal(t, 1, recs[step0].Waits)
}

// claimPullsIndexIn: after long waits moved the order's look far out, a claim
// pulls it in to the attempt's CompleteBy, so a hung attempt is found then.
func claimPullsIndexIn(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1)
	at := t0.Add(time.Minute)
	read := overdueAt(t, s, at)
	require.Len(t, read, 1)
	require.NoError(t, waited(ctx, s, read[0], false, false, at.Add(15*time.Minute), at))
	st, err := claim(ctx, s, "o-1", step0, "agent-a", at.Add(time.Second))
	require.NoError(t, err)
	due := overdueAt(t, s, st.CompleteBy)
	require.Len(t, due, 1, "found at its CompleteBy, not at the wait's look 15 minutes out")
	require.Equal(t, workflow.Processing, due[0].State)
}

func claimWrongAgent(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1)
	_, err := s.Claim(ctx, statestore.Claim{OrderID: "o-1", Ref: step0, Agent: "other", Owner: "x", Now: t0})
	require.ErrorIs(t, err, statestore.ErrWrongAgent)
	require.ErrorContains(t, err, `"svc"`)
	_, recs := state(t, s)
	require.Equal(t, workflow.Pending, recs[step0].State, "nothing changed")
	_, err = claim(ctx, s, "o-1", step0, "agent-a", t0)
	require.NoError(t, err)
	_, err = s.Claim(ctx, statestore.Claim{OrderID: "o-1", Ref: step0, Agent: "other", Owner: "x", Now: t0})
	require.ErrorIs(t, err, statestore.ErrNotClaimable, "claimed already: not a routing error")
}

// deadlineDue: past the order's deadline its working step is due whatever
// its own deadline, and a give-up for it fails the order (never run: nothing
// of it to undo, the earlier steps are undone).
func deadlineDue(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 2, 1) // step 0 done, step 1 ready
	read := overdueAt(t, s, t0.Add(time.Minute))
	require.Len(t, read, 1)
	require.Equal(t, t0.Add(24*time.Hour), read[0].Deadline)
	far := t0.Add(30 * time.Hour)
	require.NoError(t, waited(ctx, s, read[0], false, false, far, t0.Add(time.Minute)))
	end := t0.Add(24 * time.Hour)
	require.Empty(t, overdueAt(t, s, end.Add(-time.Millisecond)))
	due := overdueAt(t, s, end)
	require.Len(t, due, 1, "due at the order's deadline, before its own")
	require.Equal(t, step1, due[0].Ref)
	_, err := giveUp(ctx, s, due[0], due[0].FailureCount, workflow.Expired, "order deadline passed", end.Add(time.Minute), end)
	require.NoError(t, err)
	task, recs := state(t, s)
	require.Equal(t, workflow.Compensating, task.State)
	require.Equal(t, workflow.Expired, recs[step1].Cause)
	require.True(t, recs[step1].GaveUp())
	require.Zero(t, recs[step1].FailureCount, "no failure was seen")
	require.Equal(t, workflow.Compensating, recs[step1].After, "never ran: the earlier step is undone")
	require.False(t, recs[undo0].DueAt.IsZero(), "the undo is ready")
}

// compensationDeadline: compensation, once started, has as long as the order
// had: an undo action that can never be claimed is due by then, and fails
// the compensation for good (the operator is told which undo did not run).
func compensationDeadline(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 2, 1)
	st, err := claim(ctx, s, "o-1", step1, "agent-a", t0)
	require.NoError(t, err)
	failed := t0.Add(20 * time.Hour)
	_, err = refuse(ctx, s, "o-1", step1, st.Attempt, "declined", failed)
	require.NoError(t, err)
	require.NoError(t, s.MarkAlerted(ctx, "o-1", step1, failed))
	read := overdueAt(t, s, failed.Add(time.Minute))
	require.Len(t, read, 1)
	require.Equal(t, undo0, read[0].Ref)
	require.Equal(t, failed.Add(24*time.Hour), read[0].Deadline, "its own deadline, from when it started")
	require.NoError(t, waited(ctx, s, read[0], false, false, failed.Add(48*time.Hour), failed.Add(time.Minute)))
	require.Empty(t, overdueAt(t, s, t0.Add(25*time.Hour)), "the order's own deadline no longer counts")
	due := overdueAt(t, s, failed.Add(24*time.Hour))
	require.Len(t, due, 1)
	_, err = giveUp(ctx, s, due[0], 0, workflow.Expired, "compensation deadline passed", failed.Add(25*time.Hour), failed.Add(24*time.Hour))
	require.NoError(t, err)
	task, _ := state(t, s)
	require.Equal(t, workflow.CompensationFailed, task.State)
}

// lateReplyOfLatestAttempt: the Supervisor sent an overdue attempt back to
// Pending (its reply was in a queue); the reply of that attempt, the latest,
// still completes the record, until a later attempt is claimed.
func lateReplyOfLatestAttempt(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	submit(t, s, "o-2", 2)
	for _, id := range []string{"o-1", "o-2"} {
		_, err := claim(ctx, s, id, step0, "agent-a", t0)
		require.NoError(t, err)
	}
	at := t0.Add(time.Minute)
	for _, st := range overdueAt(t, s, at) {
		require.NoError(t, giveBack(ctx, s, st, 1, "timed out", at, at.Add(time.Minute), at))
	}
	_, err := recordAttempt(ctx, s, outcome.Attempt{OrderID: "o-1", Ref: step0, Attempt: 1, Round: 2, Now: at})
	require.ErrorIs(t, err, statestore.ErrStale, "another round's reply")
	_, err = complete(ctx, s, "o-1", step0, 1, at)
	require.NoError(t, err, "the latest attempt's reply")
	_, recs := state(t, s)
	require.Equal(t, workflow.Processed, recs[step0].State)
	require.False(t, recs[step1].DueAt.IsZero(), "the next step is ready")
	_, err = claim(ctx, s, "o-1", step0, "agent-a", at)
	require.ErrorIs(t, err, statestore.ErrNotClaimable, "the re-sent request finds nothing to claim")

	again, err := claim(ctx, s, "o-2", step0, "agent-b", at)
	require.NoError(t, err)
	require.Equal(t, 2, again.Attempt)
	_, err = complete(ctx, s, "o-2", step0, 1, at)
	require.ErrorIs(t, err, statestore.ErrStale, "once a later attempt began, the earlier one's reply changes nothing")
	_, err = refuse(ctx, s, "o-2", step0, 1, "late refusal", at)
	require.ErrorIs(t, err, statestore.ErrStale)
	_, err = complete(ctx, s, "o-2", step0, 2, at)
	require.NoError(t, err)
}

func resubmitNewDeadline(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1)
	st, err := claim(ctx, s, "o-1", step0, "agent-a", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, "o-1", step0, st.Attempt, "declined", t0)
	require.NoError(t, err)
	later := t0.Add(72 * time.Hour)
	_, err = s.Resubmit(ctx, "o-1", "", time.Minute, later)
	require.NoError(t, err)
	_, recs := state(t, s)
	require.Equal(t, later.Add(24*time.Hour), recs[step0].Deadline, "a new round, a new deadline")
	require.Equal(t, later, recs[step0].ReadyAt)
	require.Empty(t, recs[step0].Cause)
	require.Len(t, overdueAt(t, s, later.Add(time.Minute)), 1, "due by its pickup deadline")
}

// census: the orders by state, their ready steps waiting for a claim (and
// the longest wait) and their claimed ones.
func census(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	submit(t, s, "o-2", 1)
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-3", Order: `{"orderId":"o-3"}`, Workflow: def(1),
		Now: t0.Add(30 * time.Second)})
	require.NoError(t, err)
	require.True(t, created)
	_, err = claim(ctx, s, "o-2", step0, "agent-a", t0)
	require.NoError(t, err)
	c, err := s.Census(ctx, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, map[workflow.State]int{workflow.Pending: 3}, c.ByState)
	require.Equal(t, 2, c.Waiting)
	require.Equal(t, 1, c.Running)
	require.Equal(t, time.Minute, c.LongestWait, "o-1's first step, ready since t0")
}

// censusInFlight: an ended order's records are not at work, whatever they
// hold: a cancelled order's never-run step is not waiting for a claim.
func censusInFlight(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-2", Order: `{"orderId":"o-2"}`, Workflow: def(1),
		Now: t0.Add(30 * time.Second)})
	require.NoError(t, err)
	require.True(t, created)
	res, err := cancel(ctx, s, cancelReq("o-1", t0.Add(40*time.Second)))
	require.NoError(t, err)
	require.Equal(t, workflow.Cancelled, res.State, "nothing ran: it ends at once")
	c, err := s.Census(ctx, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, map[workflow.State]int{workflow.Pending: 1, workflow.Cancelled: 1}, c.ByState)
	require.Equal(t, 1, c.Waiting, "o-2's first step only")
	require.Zero(t, c.Running)
	require.Equal(t, 30*time.Second, c.LongestWait, "o-2's, ready since t0+30s")
}
