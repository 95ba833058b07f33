package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// cancelTests are the cases of an order's cancellation.
var cancelTests = map[string]func(*testing.T, *statestore.Store){
	"CancelBeforeAnyStepRanEndsIt":           cancelAtOnce,
	"CancelStopsTheReadyStepAndUndoes":       cancelStops,
	"CancelUndoesAStepWhoseAttemptRecovered": cancelRecovered,
	"CancelAwaitsTheRunningStep":             cancelAwaits,
	"CancelRacesACompletingStep":             cancelRace,
	"CancelRefusesAnEndedOrderOrAPivot":      cancelRefused,
	"CancelWhileCompensatingEndsFailed":      cancelWhileCompensating,
	"CancelOfARefusedStepStillEndsCancelled": cancelThenRefusal,
	"CancelUndoesAnAcceptedAsyncAttempt":     cancelAccepted,
}

func cancelReq(id string, at time.Time) statestore.CancelRequest {
	return statestore.CancelRequest{OrderID: id, By: "ops", Reason: "customer asked", Pickup: time.Minute, Now: at}
}

// finishUndo claims and completes an undo action, returning the task's
// state after.
func finishUndo(t *testing.T, s *statestore.Store, id string, u workflow.Ref) workflow.State {
	t.Helper()
	ctx := context.Background()
	st, err := claim(ctx, s, id, u, "agent-u", t0)
	require.NoError(t, err)
	rec, err := complete(ctx, s, id, u, st.Attempt, t0)
	require.NoError(t, err)
	return rec.State
}

func cancelAtOnce(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 3)
	res, err := cancel(ctx, s, cancelReq("o-1", t0))
	require.NoError(t, err)
	require.Equal(t, workflow.CancelStops, res.Verdict)
	require.Equal(t, workflow.Cancelled, res.State, "nothing ran: nothing to undo")
	require.Nil(t, res.Undo)
	task, recs := state(t, s)
	require.Equal(t, workflow.Cancelled, task.State)
	require.Equal(t, "ops", task.CancelledBy)
	require.Equal(t, "customer asked", task.CancelReason)
	require.False(t, task.CompletedAt.IsZero())
	require.True(t, recs[step0].Stopped, "the ready step is stopped")
	_, err = claim(ctx, s, "o-1", step0, "agent-a", t0)
	require.ErrorIs(t, err, statestore.ErrNotClaimable, "a request still in the queue runs nothing")
	require.Empty(t, overdueAt(t, s, t0.Add(48*time.Hour)), "it left the index")
	again, err := cancel(ctx, s, cancelReq("o-1", t0))
	require.NoError(t, err, "asking twice is no error")
	require.Equal(t, workflow.CancelRepeated, again.Verdict)
}

func cancelStops(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 2) // steps 0 and 1 done, step 2 ready
	res, err := cancel(ctx, s, cancelReq("o-1", t0))
	require.NoError(t, err)
	require.Equal(t, "s2", res.Stopped)
	require.Equal(t, &undo1, res.Undo, "the latest completed step's undo first")
	task, recs := state(t, s)
	require.Equal(t, workflow.Compensating, task.State)
	require.True(t, recs[step2].Stopped, "the stopped step will not run")
	require.Contains(t, recs[step2].History()[len(recs[step2].History())-1].What, "stopped before it ran")
	_, err = claim(ctx, s, "o-1", step2, "agent-a", t0)
	require.ErrorIs(t, err, statestore.ErrNotClaimable, "its request, still in a queue, runs nothing")
	due := overdueAt(t, s, t0.Add(2*time.Minute))
	require.Len(t, due, 1, "the stopped step is not due: only the undo")
	require.Equal(t, undo1, due[0].Ref)
	require.Equal(t, workflow.Compensating, finishUndo(t, s, "o-1", undo1))
	require.Equal(t, workflow.Cancelled, finishUndo(t, s, "o-1", undo0), "undone, the order ends Cancelled, not Failed")
}

// A step whose attempt was recovered (its answer lost: its call may have
// taken effect) waits for its retry when the cancel comes: the retry does
// not run, and the step's own undo runs first, then the earlier ones. The
// same for a step without an undo refuses the cancel.
func cancelRecovered(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 1) // step 0 done, step 1 ready
	_, err := claim(ctx, s, "o-1", step1, "agent-a", t0)
	require.NoError(t, err)
	due := overdueAt(t, s, t0.Add(time.Hour))
	require.Len(t, due, 1)
	require.NoError(t, giveBack(ctx, s, due[0], 1, "no outcome by CompleteBy", t0.Add(time.Hour), t0.Add(2*time.Hour), t0.Add(time.Hour)))
	res, err := cancel(ctx, s, cancelReq("o-1", t0.Add(time.Hour)))
	require.NoError(t, err)
	require.Equal(t, "s1", res.Stopped)
	require.Equal(t, &undo1, res.Undo, "its own undo, in case the lost attempt took effect")
	_, recs := state(t, s)
	h := recs[step1].History()
	require.Contains(t, h[len(h)-1].What, "attempt 1 may have taken effect")
	require.Equal(t, workflow.Compensating, finishUndo(t, s, "o-1", undo1))
	require.Equal(t, workflow.Cancelled, finishUndo(t, s, "o-1", undo0))

	submitAs(t, s, "o-pivot", 3)
	for _, r := range []workflow.Ref{step0, step1} {
		run(t, s, "o-pivot", r, t0)
	}
	_, err = claim(ctx, s, "o-pivot", step2, "agent-a", t0)
	require.NoError(t, err)
	for _, st := range overdueAt(t, s, t0.Add(time.Hour)) {
		if st.OrderID == "o-pivot" {
			require.NoError(t, giveBack(ctx, s, st, 1, "no outcome by CompleteBy", t0.Add(time.Hour), t0.Add(2*time.Hour), t0.Add(time.Hour)))
		}
	}
	_, err = cancel(ctx, s, cancelReq("o-pivot", t0.Add(time.Hour)))
	require.True(t, statestore.IsNotCancellable(err), "%v", err)
}

func cancelAwaits(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 1)
	st, err := claim(ctx, s, "o-1", step1, "agent-a", t0)
	require.NoError(t, err)
	res, err := cancel(ctx, s, cancelReq("o-1", t0))
	require.NoError(t, err)
	require.Equal(t, workflow.CancelAwaits, res.Verdict)
	require.Equal(t, workflow.Compensating, res.State, "the order is undone from now on: nothing new starts")
	require.Nil(t, res.Undo, "the running step's outcome comes first")
	rec, err := complete(ctx, s, "o-1", step1, st.Attempt, t0)
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{undo1}, rec.Ready, "the running step's reply starts its own undo, not the next step")
	require.Equal(t, workflow.Compensating, rec.State)
	_, recs := state(t, s)
	require.Equal(t, workflow.Processed, recs[step1].State)
	require.True(t, recs[step2].DueAt.IsZero(), "the next step never became ready")
	require.Equal(t, workflow.Compensating, finishUndo(t, s, "o-1", undo1), "its own undo first")
	require.Equal(t, workflow.Cancelled, finishUndo(t, s, "o-1", undo0))
}

// cancelRace: a cancel and the running step's reply land at once, in either
// order; either way the next step never runs, the completed steps' undoing
// starts once, and the order ends Cancelled.
func cancelRace(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	for i := range 6 {
		id := fmt.Sprintf("o-race-%d", i)
		submitAs(t, s, id, 3)
		st, err := claim(ctx, s, id, step0, "agent-a", t0)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var res statestore.Cancellation
		var byReply []workflow.Ref
		wg.Go(func() {
			var err error
			res, err = cancel(ctx, s, cancelReq(id, t0))
			require.NoError(t, err)
		})
		wg.Go(func() {
			rec, err := complete(ctx, s, id, step0, st.Attempt, t0)
			require.NoError(t, err)
			byReply = rec.Ready
		})
		wg.Wait()
		if res.Undo == nil {
			require.Equal(t, []workflow.Ref{undo0}, byReply, "the reply, recorded second, starts the undoing")
		} else {
			require.Equal(t, &undo0, res.Undo, "the cancel, second, starts the undoing")
			require.Equal(t, []workflow.Ref{step1}, byReply, "the reply, first, made the next step ready, which the cancel stopped")
		}
		task, recs, err := s.Load(ctx, id)
		require.NoError(t, err)
		byRef := map[workflow.Ref]statestore.Step{}
		for _, r := range recs {
			byRef[r.Ref] = r
		}
		require.Equal(t, workflow.Compensating, task.State)
		require.Equal(t, workflow.Processed, byRef[step0].State)
		require.True(t, byRef[step1].Attempt == 0 && (byRef[step1].DueAt.IsZero() || byRef[step1].Stopped), "the next step never runs")
		require.False(t, byRef[undo0].DueAt.IsZero(), "its undo is ready")
	}
}

func submitAs(t *testing.T, s *statestore.Store, id string, steps int) {
	t.Helper()
	created, err := s.Submit(context.Background(), statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`,
		Workflow: def(steps), Now: t0})
	require.NoError(t, err)
	require.True(t, created)
}

func cancelRefused(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 2)
	st, err := claim(ctx, s, "o-1", step2, "agent-a", t0) // s2 has no undo: a pivot
	require.NoError(t, err)
	_, err = cancel(ctx, s, cancelReq("o-1", t0))
	require.True(t, statestore.IsNotCancellable(err))
	require.ErrorContains(t, err, "step s2 has run, or is running, and cannot be undone")
	_, err = complete(ctx, s, "o-1", step2, st.Attempt, t0)
	require.NoError(t, err)
	_, err = cancel(ctx, s, cancelReq("o-1", t0))
	require.EqualError(t, err, "order o-1 cannot be cancelled: the order is Processed: there is nothing to cancel")
	var nc *statestore.NotCancellableError
	require.ErrorAs(t, err, &nc)
	require.Equal(t, "o-1", nc.OrderID)
	require.Equal(t, "the order is Processed: there is nothing to cancel", nc.Reason,
		"why, naming no order: a bulk cancel's refusals group by it")
	task, _ := state(t, s)
	require.Equal(t, workflow.Processed, task.State)
	require.Empty(t, task.CancelledBy, "a refusal writes nothing")
	_, err = cancel(ctx, s, cancelReq("o-none", t0))
	require.ErrorIs(t, err, statestore.ErrNotFound)
}

func cancelWhileCompensating(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 1)
	st, err := claim(ctx, s, "o-1", step1, "agent-a", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, "o-1", step1, st.Attempt, "declined", t0)
	require.NoError(t, err)
	res, err := cancel(ctx, s, cancelReq("o-1", t0))
	require.NoError(t, err)
	require.Equal(t, workflow.CancelCompensates, res.Verdict)
	require.Nil(t, res.Undo, "the undoing is under way already")
	task, _ := state(t, s)
	require.Equal(t, "ops", task.CancelledBy, "noted")
	require.Equal(t, workflow.Failed, finishUndo(t, s, "o-1", undo0), "a failure happened first: it ends Failed")

	// Resubmitted, round 2 runs forward: the cancel asked in round 1 is
	// not carried into it.
	_, err = s.Resubmit(ctx, "o-1", "", time.Minute, t0.Add(time.Hour))
	require.NoError(t, err)
	task, _ = state(t, s)
	require.Empty(t, task.CancelledBy, "round 1's cancel request is cleared")
	require.Empty(t, task.CancelReason)
	st, err = claim(ctx, s, "o-1", step0, "agent-a", t0.Add(time.Hour))
	require.NoError(t, err)
	got, err := recordAttempt(ctx, s, outcome.Attempt{OrderID: "o-1", Ref: step0, Attempt: st.Attempt, Round: st.Round, Now: t0.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, workflow.Pending, got.State, "round 2 goes on")
	require.Equal(t, []workflow.Ref{step1}, got.Ready)
}

// cancelThenRefusal: a cancel awaits the running step, which its remote
// refuses: the failure is recorded (and alerted) as any, and the order,
// its work undone, ends Cancelled, as asked.
func cancelThenRefusal(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 1)
	st, err := claim(ctx, s, "o-1", step1, "agent-a", t0)
	require.NoError(t, err)
	_, err = cancel(ctx, s, cancelReq("o-1", t0))
	require.NoError(t, err)
	got, err := refuse(ctx, s, "o-1", step1, st.Attempt, "declined", t0)
	require.NoError(t, err)
	require.Equal(t, workflow.Compensating, got.State)
	require.Equal(t, workflow.Cancelled, finishUndo(t, s, "o-1", undo0))
}

// cancelAccepted: an async attempt whose service accepted the call (its
// Agent noted it) is not awaited by a cancel, whose callback may be hours
// away: the attempt is given back, its token refused from now on, and it is
// undone first; the order ends Cancelled. One not accepted yet (its Agent
// may still be calling) is awaited, as any running step.
func cancelAccepted(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 3, 1)
	st, err := s.Claim(ctx, statestore.Claim{OrderID: "o-1", Ref: step1, Agent: "svc", Owner: "a-1", Token: "n1", Now: t0})
	require.NoError(t, err)
	require.ErrorIs(t, s.Accept(ctx, statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: 1}, Attempt: st.Attempt},
		OrderOf: statestore.OrderOf{OrderID: "o-1"},
		AtWork:  statestore.AtWork{Round: st.Round, Token: "n2"}}, t0),
		statestore.ErrStale, "fenced by the token")
	require.NoError(t, s.Accept(ctx, st, t0))
	res, err := cancel(ctx, s, cancelReq("o-1", t0.Add(time.Second)))
	require.NoError(t, err)
	require.Equal(t, workflow.CancelStops, res.Verdict, "not awaited")
	require.Equal(t, &undo1, res.Undo, "the accepted attempt is undone first")
	_, recs := state(t, s)
	require.Equal(t, workflow.Pending, recs[step1].State)
	require.Contains(t, recs[step1].Incidents[len(recs[step1].Incidents)-1].What, "attempt given back by the cancel")
	tok := outcome.Token{OrderID: "o-1", Ref: step1, Round: 1, Attempt: st.Attempt, Nonce: "n1"}
	_, err = outcome.Recorder{Store: s}.Event(ctx, def(3), callback(tok, `{"late":true}`))
	require.True(t, err == nil || outcome.IsRefused(err), "%v", err)
	_, recs = state(t, s)
	require.Equal(t, workflow.Pending, recs[step1].State, "its callback, later, records nothing")
	require.Equal(t, workflow.Compensating, finishUndo(t, s, "o-1", undo1))
	require.Equal(t, workflow.Cancelled, finishUndo(t, s, "o-1", undo0))

	// Not accepted (yet): awaited.
	submitAs(t, s, "o-2", 3)
	run(t, s, "o-2", step0, t0)
	_, err = s.Claim(ctx, statestore.Claim{OrderID: "o-2", Ref: step1, Agent: "svc", Owner: "a-1", Token: "n1", Now: t0})
	require.NoError(t, err)
	res, err = cancel(ctx, s, cancelReq("o-2", t0.Add(time.Second)))
	require.NoError(t, err)
	require.Equal(t, workflow.CancelAwaits, res.Verdict, "its Agent may still be calling")
}
