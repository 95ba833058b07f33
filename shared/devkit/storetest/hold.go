package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// holdTests are the cases of a step that holds its order on failure
// (onFailure: hold) and of the operator's decisions on a held order.
var holdTests = map[string]func(*testing.T, *statestore.Store){
	"AHeldStepsFailureHoldsTheOrderUndoingNothing":  holdHolds,
	"RetryRunsTheHeldStepAgainItsFailuresForgotten": holdRetry,
	"SkipGoesOnWithTheResultGivenByHand":            holdSkip,
	"UndoUndoesTheHeldOrderAsItsFailureWould":       holdUndo,
	"AHoldEndsInAnUndo":                             holdEnds,
	"AHeldOrderStartsNothingAndGoesOnWhereItStood":  holdParallel,
	"DecisionsOnAHeldOrderRaceOneWins":              holdRace,
	"ACancelUndoesAHeldOrder":                       holdCancel,
	"ACompletionDecidedBeforeASkipSeesTheStepDone":  holdSkipThenStale,
}

// holding is a workflow of three steps (two with undo actions) whose
// second holds the order on failure for an hour.
func holding() workflow.Definition {
	d := def(3)
	d.Name = "holding"
	d.Steps[1].HoldFor = time.Hour
	return d
}

// heldAt stores order id of holding(), runs its first step and has its
// second refused at at: the order is held.
func heldAt(t *testing.T, s *statestore.Store, id string, at time.Time) {
	t.Helper()
	ctx := context.Background()
	created, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`, Workflow: holding(), Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	run(t, s, id, step0, t0)
	st := claimed(t, s, id, step1, t0)
	rec, err := refuse(ctx, s, id, step1, st.Attempt, "card expired", at)
	require.NoError(t, err)
	require.Equal(t, workflow.Held, rec.State)
}

// decide takes an operator's decision on a held order, starting nothing.
func decide(s *statestore.Store, d outcome.HoldDecision) (outcome.HoldDecided, error) {
	if d.By == "" {
		d.By = "ops"
	}
	return outcome.Holds{Store: s, Pickup: time.Minute}.Decide(context.Background(), d)
}

func holdHolds(t *testing.T, s *statestore.Store) {
	at := t0.Add(time.Second)
	heldAt(t, s, "o-1", at)
	task, recs := state(t, s)
	require.Equal(t, workflow.Held, task.State)
	require.Equal(t, at, task.HeldAt)
	require.Equal(t, at.Add(time.Hour), task.HeldUntil)
	require.Equal(t, workflow.Error, recs[step1].State)
	require.Equal(t, workflow.Held, recs[step1].After, "its alert says the order is held")
	require.True(t, recs[undo0].DueAt.IsZero(), "nothing is undone")
	_, err := claim(context.Background(), s, "o-1", step2, "agent", at)
	require.ErrorIs(t, err, statestore.ErrNotClaimable)
	snap, err := s.Read(context.Background(), "o-1")
	require.NoError(t, err)
	require.False(t, snap.HoldEnded(at.Add(59*time.Minute)))
	require.True(t, snap.HoldEnded(at.Add(time.Hour)))

	// A step that does not hold is undone as before.
	submit(t, s, "o-2", 3)
	run(t, s, "o-2", step0, t0)
	st := claimed(t, s, "o-2", step1, t0)
	rec, err := refuse(context.Background(), s, "o-2", step1, st.Attempt, "no", t0)
	require.NoError(t, err)
	require.Equal(t, workflow.Compensating, rec.State)
}

func holdRetry(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	heldAt(t, s, "o-1", t0)
	before, _ := state(t, s)
	at := t0.Add(10 * time.Minute)
	res, err := decide(s, outcome.HoldDecision{OrderID: "o-1", Action: outcome.HoldRetry, Now: at})
	require.NoError(t, err)
	require.Equal(t, workflow.Pending, res.State)
	require.Equal(t, "s1", res.Step)
	require.Equal(t, []workflow.Ref{step1}, res.Start, "its request is sent")
	task, recs := state(t, s)
	require.Equal(t, workflow.Pending, task.State)
	require.True(t, task.HeldUntil.IsZero())
	require.Equal(t, workflow.Pending, recs[step1].State)
	require.Zero(t, recs[step1].FailureCount, "its failures forgotten")
	require.Equal(t, at.Add(time.Minute), recs[step1].DueAt, "ready, due at its pickup deadline")
	require.True(t, recs[step1].DoneAt.IsZero())
	require.Equal(t, before.Deadline.Add(10*time.Minute), task.Deadline, "the deadline stood still while it was held")
	require.Contains(t, recs[step1].History()[len(recs[step1].History())-1].What, "retried by ops")

	_, err = decide(s, outcome.HoldDecision{OrderID: "o-1", Action: outcome.HoldRetry, Now: at})
	require.True(t, outcome.IsHeldError(err), "decided once: %v", err)
	require.ErrorContains(t, err, "order o-1 is Pending, not held")

	st := claimed(t, s, "o-1", step1, at)
	rec, err := complete(ctx, s, "o-1", step1, st.Attempt, at)
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{step2}, rec.Ready)
	rec = run(t, s, "o-1", step2, at)
	require.Equal(t, workflow.Processed, rec.State)
}

func holdSkip(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	heldAt(t, s, "o-1", t0)
	_, err := decide(s, outcome.HoldDecision{OrderID: "o-1", Action: outcome.HoldSkip, Step: "s0", Now: t0})
	require.ErrorContains(t, err, "step s0 does not hold order o-1 (held by s1)")
	res, err := decide(s, outcome.HoldDecision{OrderID: "o-1", Action: outcome.HoldSkip, Step: "s1",
		Result: json.RawMessage(`{"charged":"by hand"}`), Now: t0.Add(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, workflow.Pending, res.State)
	require.Equal(t, []workflow.Ref{step2}, res.Start, "what follows it is ready")
	task, recs := state(t, s)
	require.Equal(t, workflow.Pending, task.State)
	require.Equal(t, workflow.Processed, recs[step1].State)
	require.True(t, recs[step1].HasResult)
	require.False(t, recs[step2].DueAt.IsZero())
	st := claimed(t, s, "o-1", step2, t0.Add(time.Minute))
	doc, err := document(ctx, s, nil, st, json.RawMessage(`{}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"charged":"by hand"}`, string(doc.Results["s1"]), "the next step reads the result given")
	rec, err := complete(ctx, s, "o-1", step2, st.Attempt, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, workflow.Processed, rec.State)

	// Skipping the last step ends the order.
	d := def(2)
	d.Steps[1].HoldFor = time.Hour
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-2", Order: `{}`, Workflow: d, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	run(t, s, "o-2", step0, t0)
	st = claimed(t, s, "o-2", step1, t0)
	_, err = refuse(ctx, s, "o-2", step1, st.Attempt, "no", t0)
	require.NoError(t, err)
	res, err = decide(s, outcome.HoldDecision{OrderID: "o-2", Action: outcome.HoldSkip, Now: t0})
	require.NoError(t, err)
	require.Equal(t, workflow.Processed, res.State)
	require.Empty(t, overdueAt(t, s, t0.Add(48*time.Hour)), "ended, alerted for its hold: out of the index")
}

func holdUndo(t *testing.T, s *statestore.Store) {
	heldAt(t, s, "o-1", t0)
	res, err := decide(s, outcome.HoldDecision{OrderID: "o-1", Action: outcome.HoldUndo, Now: t0.Add(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, workflow.Compensating, res.State)
	require.Equal(t, []workflow.Ref{undo0}, res.Start, "the completed step's undo")
	task, _ := state(t, s)
	require.Equal(t, workflow.Compensating, task.State)
	require.Equal(t, t0.Add(time.Minute).Add(24*time.Hour), task.Deadline, "the undoing has as long as the order had")
	require.Equal(t, workflow.Failed, finishUndo(t, s, "o-1", undo0))
	_, err = decide(s, outcome.HoldDecision{OrderID: "o-1", Action: outcome.HoldUndo, Now: t0})
	require.ErrorContains(t, err, "the order is Failed, not held")
}

// The hold's end: the held record is due, and the Supervisor's decision
// (UndoHeld on the order as read) undoes the order.
func holdEnds(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	heldAt(t, s, "o-1", t0)
	snap, err := s.Read(ctx, "o-1")
	require.NoError(t, err)
	require.NoError(t, s.MarkAlerted(ctx, "o-1", step1, t0))
	require.Empty(t, overdueAt(t, s, t0.Add(59*time.Minute)), "alerted, it waits for its operator")
	due := overdueAt(t, s, t0.Add(time.Hour))
	require.Len(t, due, 1, "its hold ended")
	require.Equal(t, step1, due[0].Ref)
	snap = *due[0].Read
	m, err := snap.Order().UndoHeld()
	require.NoError(t, err)
	_, err = s.Apply(ctx, snap, statestore.Write{Move: m, Due: t0.Add(time.Hour + time.Minute), Now: t0.Add(time.Hour)})
	require.NoError(t, err)
	task, recs := state(t, s)
	require.Equal(t, workflow.Compensating, task.State)
	require.False(t, recs[undo0].DueAt.IsZero(), "undone")
}

// A held order of parallel branches: a ready branch is not claimed, a
// running one completes and is recorded, and when the operator retries the
// held one, the stopped branch's request is sent again and the join waits
// for all three.
func holdParallel(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	d := fanout()
	d.Steps[0].HoldFor = time.Hour
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-1", Order: `{"items":[1,2,3]}`, Workflow: d,
		Items: map[int]int{4: 3}, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	a, b := claimed(t, s, "o-1", pa, t0), claimed(t, s, "o-1", pb, t0)
	require.Equal(t, workflow.Held, record(t, s, a, "card expired", t0).State)
	_, err = claim(ctx, s, "o-1", pc, "agent", t0)
	require.ErrorIs(t, err, statestore.ErrNotClaimable, "a held order starts nothing")
	rec := record(t, s, b, "", t0)
	require.Equal(t, workflow.Held, rec.State, "a running branch completes")
	require.Empty(t, rec.Ready)
	res, err := decide(s, outcome.HoldDecision{OrderID: "o-1", Action: outcome.HoldRetry, Now: t0.Add(time.Minute)})
	require.NoError(t, err)
	require.ElementsMatch(t, []workflow.Ref{pa, pc}, res.Start, "the stopped branch goes on, and the retried one")
	for _, r := range []workflow.Ref{pa, pc} {
		record(t, s, claimed(t, s, "o-1", r, t0.Add(time.Minute)), "", t0.Add(time.Minute))
	}
	_, recs := state(t, s)
	require.False(t, recs[pd].DueAt.IsZero(), "the join, once its three are done")

	// A branch that does not hold fails while another holds: the order is
	// undone (here nothing had taken effect: it ends Failed at once).
	created, err = s.Submit(ctx, statestore.Submission{OrderID: "o-2", Order: `{"items":[1]}`, Workflow: d,
		Items: map[int]int{4: 1}, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	a, b = claimed(t, s, "o-2", pa, t0), claimed(t, s, "o-2", pb, t0)
	require.Equal(t, workflow.Held, record(t, s, a, "card expired", t0).State)
	require.Equal(t, workflow.Failed, record(t, s, b, "out of stock", t0).State)
}

// Two operators decide on one held order at once, every pair of choices:
// one decision is taken, the other refused with the reason, and the order
// is as the one taken left it.
func holdRace(t *testing.T, s *statestore.Store) {
	actions := []outcome.HoldAction{outcome.HoldRetry, outcome.HoldSkip, outcome.HoldUndo}
	n := 0
	for _, x := range actions {
		for _, y := range actions {
			n++
			id := fmt.Sprintf("o-r%d", n)
			heldAt(t, s, id, t0)
			var wg sync.WaitGroup
			results := make([]outcome.HoldDecided, 2)
			errs := make([]error, 2)
			for i, act := range []outcome.HoldAction{x, y} {
				wg.Go(func() {
					results[i], errs[i] = decide(s, outcome.HoldDecision{OrderID: id, Action: act, By: fmt.Sprint("op", i), Now: t0})
				})
			}
			wg.Wait()
			won := -1
			for i, err := range errs {
				if err == nil {
					require.Equal(t, -1, won, "%s: %s and %s both taken", id, x, y)
					won = i
					continue
				}
				require.True(t, outcome.IsHeldError(err), "%s: %v", id, err)
			}
			require.NotEqual(t, -1, won, "%s: one of %s and %s is taken", id, x, y)
			task, _, err := s.Load(context.Background(), id)
			require.NoError(t, err)
			require.Equal(t, results[won].State, task.State, "%s: as the decision taken left it", id)
		}
	}
}

func holdCancel(t *testing.T, s *statestore.Store) {
	heldAt(t, s, "o-1", t0)
	res, err := cancel(context.Background(), s, cancelReq("o-1", t0.Add(time.Minute)))
	require.NoError(t, err)
	require.Equal(t, workflow.CancelStops, res.Verdict)
	require.Equal(t, &undo0, res.Undo)
	require.Equal(t, workflow.Cancelled, finishUndo(t, s, "o-1", undo0))
}

// Two branches, the second holding on failure: the first is claimed (its
// claim reads the second running), the second fails and holds the order,
// the operator skips it (the order goes on, the first still running), then
// the first completes, deciding first on what its claim read. The skip
// finished a step since: the completion must see it, and end the order
// Processed. (Found by the explorer, seed 588323654: the skip did not move
// the count of writes that finish a step on, so the stale decision landed,
// and the order stayed Pending with every step done, out of the index.)
func holdSkipThenStale(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	d := def(2)
	d.Name = "branches"
	d.Steps[1].NoNeeds, d.Steps[1].HoldFor = true, time.Hour
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-1", Order: `{"orderId":"o-1"}`, Workflow: d, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	first := claimedAs(t, s, "o-1", step0, t0)
	second := claimedAs(t, s, "o-1", step1, t0)
	require.Equal(t, workflow.Held, finish(t, s, d, second, "card expired", t0).State)
	res, err := decide(s, outcome.HoldDecision{OrderID: "o-1", Action: outcome.HoldSkip, Result: json.RawMessage(`{"ok":true}`),
		Now: t0.Add(time.Minute)})
	require.NoError(t, err)
	require.Empty(t, res.Start)
	r := finish(t, s, d, first, "", t0.Add(2*time.Minute)) // decided first on its claim's read
	require.Equal(t, workflow.Processed, r.State, "every step done: the order ends")
	task, _ := state(t, s)
	require.Equal(t, workflow.Processed, task.State)
}
