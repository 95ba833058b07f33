package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// parallelTests are the cases of workflows whose steps run at once: races
// between branches, items, and the undoing of what completed.
var parallelTests = map[string]func(*testing.T, *statestore.Store){
	"ParallelSubmitMakesEveryStartReady":             parallelSubmit,
	"BranchesEndingAtOnceAreAllRecorded":             branchesRace,
	"ItemsEndingAtOnceMakeTheNextStepReadyOnce":      itemsRace,
	"AFailedBranchAwaitsItsSiblingsThenUndoes":       failedBranchAwaits,
	"CancelStopsWhatIsReadyAndAwaitsWhatRuns":        parallelCancel,
	"CancelUndoesARecordWhoseAttemptWasRecovered":    parallelCancelRecovered,
	"ARunningSiblingIsGivenUpOnAtItsCompleteBy":      siblingGivenUp,
	"ACompletedStepWithoutUndoStopsTheUndoing":       parallelPivot,
	"AnAlertedStepThatStopsTheUndoingIsAlertedAgain": pivotAlertedAgain,
	"BranchesOfDifferentLengthsMakeTheJoinReady":     unevenBranches,
	"AFailedParallelOrderResubmittedStartsAgain":     parallelResubmit,
	"ALinearOrderKeepsItsWritesWithoutParallelism":   linearUnchanged,
	"AForEachStepsResultIsItsItemsAsTheyWereKept":    itemsAsKept,
}

// fanout is a workflow of three steps that start with the order (a, b and
// c, each with an undo), a join (d, needs all three, with an undo), a
// step per item (e, with an undo), and a last step without undo (f).
func fanout() workflow.Definition {
	d := def(6)
	d.Name = "fanout"
	d.Steps[1].NoNeeds, d.Steps[2].NoNeeds = true, true
	d.Steps[3].Needs = []string{"s0", "s1", "s2"}
	d.Steps[4].ForEach = "items"
	return d
}

var (
	pa, pb, pc, pd, pf = workflow.Ref{Index: 0}, workflow.Ref{Index: 1}, workflow.Ref{Index: 2}, workflow.Ref{Index: 3}, workflow.Ref{Index: 5}
	itemRef            = func(k int) workflow.Ref { return workflow.Ref{Index: 4, Item: k} }
)

// submitFanout stores an order of fanout() with three items.
func submitFanout(t *testing.T, s *statestore.Store, id string) {
	t.Helper()
	created, err := s.Submit(context.Background(), statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `","items":[1,2,3]}`,
		Workflow: fanout(), Items: map[int]int{4: 3}, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
}

// claimed claims r of order id, as its Agent does.
func claimed(t *testing.T, s *statestore.Store, id string, r workflow.Ref, at time.Time) statestore.Step {
	t.Helper()
	st, err := claim(context.Background(), s, id, r, "agent-"+fmt.Sprint(r), at)
	require.NoError(t, err)
	return st
}

// record records the outcome of claimed attempt st (refusal "" for done),
// as its Agent does, with the records its claim read.
func record(t *testing.T, s *statestore.Store, st statestore.Step, refusal string, at time.Time) outcome.Recorded {
	t.Helper()
	rec, err := outcome.Recorder{Store: s}.Record(context.Background(), fanout(), outcome.Attempt{OrderID: st.OrderID, Ref: st.Ref,
		Name: st.Name, Attempt: st.Attempt, Round: st.Round, Refusal: refusal, Read: st.Read, Now: at})
	require.NoError(t, err)
	require.False(t, rec.Stale, "%s recorded", st.Key())
	return rec
}

// recordAtOnce records the attempts' completions all at once, each from
// what its claim read, and returns what they made ready, together.
func recordAtOnce(t *testing.T, s *statestore.Store, sts ...statestore.Step) []workflow.Ref {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		ready []workflow.Ref
	)
	for k, st := range sts {
		wg.Go(func() {
			rec := record(t, s, st, "", t0.Add(time.Duration(k)*time.Millisecond))
			mu.Lock()
			ready = append(ready, rec.Ready...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return ready
}

func parallelSubmit(t *testing.T, s *statestore.Store) {
	submitFanout(t, s, "o-1")
	_, recs := state(t, s)
	for _, r := range []workflow.Ref{pa, pb, pc} {
		require.False(t, recs[r].DueAt.IsZero(), "%v starts with the order", r)
	}
	require.True(t, recs[pd].DueAt.IsZero(), "the join waits")
	for k := 1; k <= 3; k++ {
		require.Equal(t, "s4", recs[itemRef(k)].Name, "a record per item")
		require.Equal(t, k, recs[itemRef(k)].Item)
		require.Contains(t, recs, workflow.Ref{Index: 4, Undo: true, Item: k}, "and an undo per item")
	}
	require.Equal(t, "s4#2", recs[itemRef(2)].RecordName())
	require.Len(t, overdueAt(t, s, t0.Add(61*time.Second)), 3, "the three starts are due at their pickup deadline")
}

// All three branches end at once, each having read the others as running:
// each is recorded, and the join is made ready exactly once.
func branchesRace(t *testing.T, s *statestore.Store) {
	for round := range 4 {
		id := fmt.Sprintf("o-%d", round)
		submitFanout(t, s, id)
		ready := recordAtOnce(t, s, claimed(t, s, id, pa, t0), claimed(t, s, id, pb, t0), claimed(t, s, id, pc, t0))
		require.Equal(t, []workflow.Ref{pd}, ready, "the join, once, by whichever branch ended last")
		task, _, err := s.Load(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, workflow.Pending, task.State)
		_, recs, err := s.Load(context.Background(), id)
		require.NoError(t, err)
		for _, r := range recs[:3] {
			require.Equal(t, workflow.Processed, r.State, "every branch recorded")
		}
		require.False(t, recs[3].DueAt.IsZero(), "the join is ready")
	}
}

// runToItems runs an order of fanout() until its items are ready.
func runToItems(t *testing.T, s *statestore.Store, id string) {
	t.Helper()
	submitFanout(t, s, id)
	for _, r := range []workflow.Ref{pa, pb, pc, pd} {
		record(t, s, claimed(t, s, id, r, t0), "", t0)
	}
}

func itemsRace(t *testing.T, s *statestore.Store) {
	runToItems(t, s, "o-1")
	ready := recordAtOnce(t, s, claimed(t, s, "o-1", itemRef(1), t0), claimed(t, s, "o-1", itemRef(2), t0), claimed(t, s, "o-1", itemRef(3), t0))
	require.Equal(t, []workflow.Ref{pf}, ready, "the last step, once every item is done")
	rec := record(t, s, claimed(t, s, "o-1", pf, t0), "", t0)
	require.Equal(t, workflow.Processed, rec.State)
	require.Empty(t, overdueAt(t, s, t0.Add(48*time.Hour)), "ended: out of the index")
}

// A forEach step's result, as the steps after it read it, is its items'
// results as they were kept, joined: byte for byte, so that it weighs what
// they weighed (kept.Value.Weight, its Agent's budget). Joined by
// json.Marshal, each '<', '>' and '&' of them was written \u003c, six
// times as long as weighed, and each item compacted.
func itemsAsKept(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runToItems(t, s, "o-1")
	answers := []string{`{"html":"<b>a & b</b>","n":1}`, `"<<&&>> \u2028 "`, ` [ 1, {"x": "<"} ] `}
	var ready []workflow.Ref
	for k, a := range answers {
		st := claimed(t, s, "o-1", itemRef(k+1), t0)
		require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: "o-1", Ref: st.Ref, Name: st.Name, Round: 1, Attempt: st.Attempt,
			JSON: json.RawMessage(a), Now: t0}))
		rec, err := outcome.Recorder{Store: s}.Record(ctx, fanout(), outcome.Attempt{OrderID: st.OrderID, Ref: st.Ref, Name: st.Name,
			Attempt: st.Attempt, Round: st.Round, ResultBytes: len(a), Read: st.Read, Now: t0})
		require.NoError(t, err)
		ready = append(ready, rec.Ready...)
	}
	require.Equal(t, []workflow.Ref{pf}, ready)
	doc, err := document(ctx, s, nil, claimed(t, s, "o-1", pf, t0), json.RawMessage(`{"orderId":"o-1","items":[1,2,3]}`))
	require.NoError(t, err)
	require.Equal(t, "["+strings.Join(answers, ",")+"]", string(doc.Results["s4"]))
}

// A branch refused while another runs: the order is undone, but only once
// the running one's outcome is in; then what completed is undone, the
// latest completion first.
func failedBranchAwaits(t *testing.T, s *statestore.Store) {
	submitFanout(t, s, "o-1")
	a, b, c := claimed(t, s, "o-1", pa, t0), claimed(t, s, "o-1", pb, t0), claimed(t, s, "o-1", pc, t0)
	record(t, s, a, "", t0.Add(time.Second))
	rec := record(t, s, c, "no stock", t0.Add(2*time.Second))
	require.Equal(t, workflow.Compensating, rec.State)
	require.Empty(t, rec.Ready, "b runs: its outcome comes first")
	rec = record(t, s, b, "", t0.Add(3*time.Second))
	require.Equal(t, []workflow.Ref{{Index: 1, Undo: true}}, rec.Ready, "b completed last: undone first")
	u := record(t, s, claimed(t, s, "o-1", rec.Ready[0], t0), "", t0.Add(4*time.Second))
	require.Equal(t, []workflow.Ref{{Index: 0, Undo: true}}, u.Ready, "then a")
	u = record(t, s, claimed(t, s, "o-1", u.Ready[0], t0), "", t0.Add(5*time.Second))
	require.Equal(t, workflow.Failed, u.State, "c was refused: it did nothing to undo")
	_, recs := state(t, s)
	require.True(t, recs[pd].DueAt.IsZero(), "the join never started")
}

func parallelCancel(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitFanout(t, s, "o-1")
	a := claimed(t, s, "o-1", pa, t0)
	res, err := cancel(ctx, s, cancelReq("o-1", t0))
	require.NoError(t, err)
	require.Equal(t, workflow.CancelAwaits, res.Verdict)
	require.Equal(t, "s1, s2", res.Stopped)
	_, err = claim(ctx, s, "o-1", pb, "agent-b", t0)
	require.ErrorIs(t, err, statestore.ErrNotClaimable, "a stopped record's request runs nothing")
	rec := record(t, s, a, "", t0.Add(time.Second))
	require.Equal(t, []workflow.Ref{{Index: 0, Undo: true}}, rec.Ready, "what completed is undone")
	u := record(t, s, claimed(t, s, "o-1", rec.Ready[0], t0), "", t0.Add(2*time.Second))
	require.Equal(t, workflow.Cancelled, u.State)
}

// A record whose attempt was recovered (its answer lost: its call may have
// taken effect) and which waits for its retry is stopped by a cancel, and
// its own undo runs, as for a record given up on after it ran.
func parallelCancelRecovered(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitFanout(t, s, "o-1")
	a := claimed(t, s, "o-1", pa, t0)
	record(t, s, a, "", t0.Add(time.Second))
	claimed(t, s, "o-1", pb, t0)
	var lost statestore.Step
	for _, st := range overdueAt(t, s, t0.Add(time.Hour)) {
		if st.Ref == pb {
			lost = st
		}
	}
	require.Equal(t, workflow.Processing, lost.State)
	require.NoError(t, giveBack(ctx, s, lost, 1, "no outcome by CompleteBy", t0.Add(time.Hour), t0.Add(2*time.Hour), t0.Add(time.Hour)))

	res, err := cancel(ctx, s, cancelReq("o-1", t0.Add(time.Hour)))
	require.NoError(t, err)
	require.Equal(t, "s1, s2", res.Stopped)
	require.Equal(t, &workflow.Ref{Index: 1, Undo: true}, res.Undo, "b may have taken effect: its undo first")
	u := record(t, s, claimed(t, s, "o-1", *res.Undo, t0.Add(time.Hour)), "", t0.Add(time.Hour+time.Second))
	require.Equal(t, []workflow.Ref{{Index: 0, Undo: true}}, u.Ready, "then a, which completed")
	u = record(t, s, claimed(t, s, "o-1", u.Ready[0], t0.Add(time.Hour)), "", t0.Add(time.Hour+2*time.Second))
	require.Equal(t, workflow.Cancelled, u.State, "c never ran: nothing more")

	// Without an undo, a record that may have taken effect cannot be
	// undone: the cancel is refused, as for one that ran.
	d := fanout()
	d.Steps[1].Undo = nil
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-2", Order: `{"orderId":"o-2","items":[1]}`, Workflow: d,
		Items: map[int]int{4: 1}, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	claimed(t, s, "o-2", pb, t0)
	for _, st := range overdueAt(t, s, t0.Add(time.Hour)) {
		if st.OrderID == "o-2" && st.Ref == pb {
			require.NoError(t, giveBack(ctx, s, st, 1, "no outcome by CompleteBy", t0.Add(time.Hour), t0.Add(2*time.Hour), t0.Add(time.Hour)))
		}
	}
	_, err = cancel(ctx, s, cancelReq("o-2", t0.Add(time.Hour)))
	require.True(t, statestore.IsNotCancellable(err), "%v", err)
	require.ErrorContains(t, err, "step s1 has run, or is running, and cannot be undone")
}

// The Supervisor gives up on a sibling that does not finish by its
// CompleteBy while its order is undone: no retry; its own undo first.
func siblingGivenUp(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitFanout(t, s, "o-1")
	a, b := claimed(t, s, "o-1", pa, t0), claimed(t, s, "o-1", pb, t0)
	record(t, s, b, "refused", t0)
	due := overdueAt(t, s, t0.Add(time.Hour))
	var overdue statestore.Step
	for _, st := range due {
		if st.Ref == pa {
			overdue = st
		}
	}
	require.Equal(t, a.Attempt, overdue.Attempt)
	require.True(t, overdue.Cancelling, "nothing starts again: it is given up on, not retried")
	d, err := giveUp(ctx, s, overdue, 1, workflow.TimedOut, "no outcome by CompleteBy", t0.Add(time.Hour), t0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{{Index: 0, Undo: true}}, d.Ready, "it may have taken effect: its own undo")
}

// A step without an undo that took effect cannot be undone: the undoing
// stops there, the order ends CompensationFailed, and the record is due
// for its alert.
func parallelPivot(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	d := fanout()
	d.Steps[2].Undo = nil // c: no undo
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-1", Order: `{"orderId":"o-1","items":[1]}`, Workflow: d,
		Items: map[int]int{4: 1}, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	a, c := claimed(t, s, "o-1", pa, t0), claimed(t, s, "o-1", pc, t0)
	rec := outcome.Recorder{Store: s}
	_, err = rec.Record(ctx, d, outcome.Attempt{OrderID: "o-1", Ref: pc, Name: "s2", Attempt: c.Attempt, Round: 1, Read: c.Read, Now: t0.Add(time.Second)})
	require.NoError(t, err)
	got, err := rec.Record(ctx, d, outcome.Attempt{OrderID: "o-1", Ref: pa, Name: "s0", Attempt: a.Attempt, Round: 1, Refusal: "no",
		Read: a.Read, Now: t0.Add(2 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, workflow.CompensationFailed, got.State)
	task, recs := state(t, s)
	require.Contains(t, task.LastError, "s0: no")
	require.True(t, recs[pc].Unalerted || recs[pa].Unalerted)
	due := overdueAt(t, s, t0.Add(2*time.Minute))
	require.NotEmpty(t, due, "its alert is due")
	for _, st := range due {
		require.NoError(t, s.MarkAlerted(ctx, "o-1", st.Ref, t0.Add(time.Minute)))
	}
}

func parallelResubmit(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitFanout(t, s, "o-1")
	a, b, c := claimed(t, s, "o-1", pa, t0), claimed(t, s, "o-1", pb, t0), claimed(t, s, "o-1", pc, t0)
	record(t, s, a, "no", t0)
	record(t, s, b, "no", t0)
	rec := record(t, s, c, "no", t0)
	require.Equal(t, workflow.Failed, rec.State)
	require.NoError(t, s.MarkAlerted(ctx, "o-1", pa, t0))
	res, err := s.Resubmit(ctx, "o-1", "", time.Minute, t0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, res.Round)
	require.Equal(t, []workflow.Ref{pa, pb, pc}, res.Ready, "every step that starts with the order")
	task, recs := state(t, s)
	require.Equal(t, workflow.Pending, task.State)
	for _, r := range []workflow.Ref{pa, pb, pc} {
		require.False(t, recs[r].DueAt.IsZero())
		require.Equal(t, 2, recs[r].Round)
	}
}

// A line of steps is the same engine: its claim's answer is the order as
// the claim left it, on which the completion decides, with no read.
func linearUnchanged(t *testing.T, s *statestore.Store) {
	submit(t, s, "o-1", 2)
	st := claimed(t, s, "o-1", step0, t0)
	require.NotNil(t, st.Read, "the claim returns the order")
	rec, err := outcome.Recorder{Store: s}.Record(context.Background(), def(2), outcome.Attempt{OrderID: "o-1", Ref: step0,
		Name: "s0", Attempt: st.Attempt, Round: 1, Read: st.Read, Now: t0})
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{step1}, rec.Ready)
	require.Equal(t, workflow.Read{Forward: true, Finishes: true}, rec.Move.Read, "conditioned on the order running forward, ordered with the other finishing writes")
}

// A step without undo given up on after it ran (it may have taken effect)
// is alerted for its failure while a sibling still runs; once the sibling,
// done, is undone, the undoing stops at it: it is due for an alert again,
// saying so, and the order leaves the index once that is sent.
func pivotAlertedAgain(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	d := fanout()
	d.Steps[1].Undo = nil // b: no undo
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-1", Order: `{"orderId":"o-1","items":[1]}`, Workflow: d,
		Items: map[int]int{4: 1}, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	a, _ := claimed(t, s, "o-1", pa, t0), claimed(t, s, "o-1", pb, t0)
	var hung statestore.Step
	for _, st := range overdueAt(t, s, t0.Add(11*time.Second)) {
		if st.Ref == pb {
			hung = st
		}
	}
	_, err = giveUp(ctx, s, hung, 3, workflow.TimedOut, "no outcome", t0.Add(time.Minute), t0.Add(11*time.Second))
	require.NoError(t, err)
	require.NoError(t, s.MarkAlerted(ctx, "o-1", pb, t0.Add(11*time.Second)), "its failure alerted")
	rec, err := outcome.Recorder{Store: s}.Record(ctx, d, outcome.Attempt{OrderID: "o-1", Ref: pa, Attempt: a.Attempt, Round: 1,
		Now: t0.Add(12 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{{Index: 0, Undo: true}}, rec.Ready, "a, done last, undone first")
	u := claimed(t, s, "o-1", rec.Ready[0], t0.Add(12*time.Second))
	rec, err = outcome.Recorder{Store: s}.Record(ctx, d, outcome.Attempt{OrderID: "o-1", Ref: u.Ref, Attempt: u.Attempt, Round: 1,
		Now: t0.Add(13 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, workflow.CompensationFailed, rec.State, "b may have taken effect and has no undo: the undoing stops")
	_, recs := state(t, s)
	require.False(t, recs[pb].Alerted, "due for its alert again")
	require.True(t, recs[pb].Unalerted)
	require.Equal(t, workflow.CompensationFailed, recs[pb].After, "its alert says what the undoing came to")
	due := overdueAt(t, s, t0.Add(14*time.Second))
	require.Len(t, due, 1)
	require.Equal(t, pb, due[0].Ref)
	require.NoError(t, s.MarkAlerted(ctx, "o-1", pb, t0.Add(14*time.Second)))
	require.Empty(t, overdueAt(t, s, t0.Add(time.Hour)), "alerted: nothing more is due")
}

// The shape a user found stalling: slow-a beside fast-b then fast-c, and a
// join that needs slow-a and fast-c. slow-a's completion decides on what its
// claim read (fast-c not even ready), after fast-b and fast-c both finished:
// its write, ordered with theirs, is refused and decided again on the order
// as they left it, and makes the join ready; without the join, the last
// branch ends the order.
func unevenBranches(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	for _, join := range []bool{true, false} {
		d := shapes.Branches(shapes.Options{Agents: []string{"svc"}, Timeout: 10 * time.Second, Pickup: time.Minute,
			Deadline: 24 * time.Hour, MaxFailures: 3})
		if !join {
			d.Steps, d.Version = d.Steps[:3], "branches-nojoin"
		}
		id := fmt.Sprintf("o-join-%v", join)
		_, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`, Workflow: d, Now: t0})
		require.NoError(t, err)
		slow := claimed(t, s, id, workflow.Ref{Index: 0}, t0)
		rec := finish(t, s, d, claimed(t, s, id, workflow.Ref{Index: 1}, t0), "", t0.Add(time.Second))
		require.Equal(t, []workflow.Ref{{Index: 2}}, rec.Ready)
		rec = finish(t, s, d, claimed(t, s, id, workflow.Ref{Index: 2}, t0), "", t0.Add(2*time.Second))
		require.Empty(t, rec.Ready, "slow-a still runs")
		require.Equal(t, workflow.Pending, rec.State)
		rec = finish(t, s, d, slow, "", t0.Add(3*time.Second)) // on what its claim read
		if !join {
			require.Equal(t, workflow.Processed, rec.State, "the last branch ends the order")
			continue
		}
		require.Equal(t, []workflow.Ref{{Index: 3}}, rec.Ready, "the last branch makes the join ready")
		rec = finish(t, s, d, claimed(t, s, id, workflow.Ref{Index: 3}, t0), "", t0.Add(4*time.Second))
		require.Equal(t, workflow.Processed, rec.State)
	}
}
