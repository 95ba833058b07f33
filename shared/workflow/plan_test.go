package workflow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

var t0 = time.Unix(1_800_000_000, 0)

// parallelRecords are the parallel example's records with three items to
// pack, as Submission stores them: the three first steps ready.
func parallelRecords() workflow.Records {
	d := workflow.MustExample(workflow.ParallelWorkflow)
	recs := workflow.Records{}
	for i, st := range d.Steps {
		items := []int{0}
		if st.ForEach != "" {
			items = []int{1, 2, 3}
		}
		for _, k := range items {
			ref := workflow.Ref{Index: i, Item: k}
			recs[ref] = workflow.Record{Ref: ref, State: workflow.Pending, Ready: len(d.Needs(i)) == 0, HasUndo: st.Undo != nil}
			if st.Undo != nil {
				u := workflow.Ref{Index: i, Undo: true, Item: k}
				recs[u] = workflow.Record{Ref: u, State: workflow.Pending}
			}
		}
	}
	return recs
}

func set(recs workflow.Records, ref workflow.Ref, st workflow.State, at time.Duration) {
	r := recs[ref]
	r.State, r.Ready, r.DoneAt = st, false, t0.Add(at)
	recs[ref] = r
}

func TestProgressMakesAStepReadyWhenAllItNeedsIsDone(t *testing.T) {
	t.Parallel()
	d := workflow.MustExample(workflow.ParallelWorkflow)
	recs := parallelRecords()
	east, west, auth := workflow.Ref{Index: 0}, workflow.Ref{Index: 1}, workflow.Ref{Index: 2}

	p := d.Progress(recs, east)
	require.Empty(t, p.Ready, "the charge needs the other two")
	require.False(t, p.End)
	require.Equal(t, []workflow.StepDone{{Step: 1, Done: 0}, {Step: 2, Done: 0}}, p.Read,
		"a reservation and the authorization finishing at once with it must not go unseen")

	set(recs, east, workflow.Processed, time.Second)
	set(recs, west, workflow.Processed, 2*time.Second)
	p = d.Progress(recs, auth)
	require.Equal(t, []workflow.Ref{{Index: 3}}, p.Ready, "all three done: the charge")
	require.Empty(t, p.Read, "what it needs is done, and done stays done")

	set(recs, auth, workflow.Processed, 3*time.Second)
	p = d.Progress(recs, workflow.Ref{Index: 3})
	require.Equal(t, []workflow.Ref{{Index: 4, Item: 1}, {Index: 4, Item: 2}, {Index: 4, Item: 3}}, p.Ready, "one record per item")

	set(recs, workflow.Ref{Index: 3}, workflow.Processed, 4*time.Second)
	for k := 1; k <= 3; k++ {
		r := recs[workflow.Ref{Index: 4, Item: k}]
		r.Ready = true
		recs[workflow.Ref{Index: 4, Item: k}] = r
	}
	p = d.Progress(recs, workflow.Ref{Index: 4, Item: 2})
	require.Empty(t, p.Ready)
	require.Equal(t, []workflow.StepDone{{Step: 4, Done: 0}}, p.Read, "its items finish one at a time")
	set(recs, workflow.Ref{Index: 4, Item: 1}, workflow.Processed, 5*time.Second)
	set(recs, workflow.Ref{Index: 4, Item: 2}, workflow.Processed, 6*time.Second)
	p = d.Progress(recs, workflow.Ref{Index: 4, Item: 3})
	require.Equal(t, []workflow.Ref{{Index: 5}}, p.Ready, "every item packed: the shipment")
	require.Equal(t, []workflow.StepDone{{Step: 4, Done: 2}}, p.Read)

	set(recs, workflow.Ref{Index: 4, Item: 3}, workflow.Processed, 7*time.Second)
	p = d.Progress(recs, workflow.Ref{Index: 5})
	require.True(t, p.End)
	require.Empty(t, p.Ready)
}

// Two branches with nothing after them: the one that finishes last ends
// the order, whichever it is, and each reads the other.
func TestProgressEndsTheOrderAtItsLastBranch(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("two.yaml", []byte("name: two\nagents: {a: {endpoint: 'http://a'}}\ndefaults: {timeout: 1s}\n"+
		"steps:\n  - {name: x, agent: a}\n  - {name: y, agent: a, needs: []}\n"), workflow.Options{})
	require.NoError(t, err)
	recs := workflow.Records{
		{Index: 0}: {Ref: workflow.Ref{Index: 0}, State: workflow.Processing},
		{Index: 1}: {Ref: workflow.Ref{Index: 1}, State: workflow.Processing},
	}
	p := d.Progress(recs, workflow.Ref{Index: 0})
	require.False(t, p.End)
	require.Equal(t, []workflow.StepDone{{Step: 1, Done: 0}}, p.Read)
	set(recs, workflow.Ref{Index: 0}, workflow.Processed, time.Second)
	require.True(t, d.Progress(recs, workflow.Ref{Index: 1}).End)
}

func TestCompensateAwaitsWhatRunsThenUndoesTheLatestFirst(t *testing.T) {
	t.Parallel()
	recs := parallelRecords()
	east, west, auth := workflow.Ref{Index: 0}, workflow.Ref{Index: 1}, workflow.Ref{Index: 2}
	set(recs, west, workflow.Processed, 2*time.Second)
	set(recs, east, workflow.Error, 3*time.Second) // refused: it did nothing
	r := recs[auth]
	r.State, r.Ready = workflow.Processing, false
	recs[auth] = r

	c := recs.Compensate()
	require.True(t, c.Await, "the authorization runs: its outcome comes first")
	require.Nil(t, c.Undo)

	set(recs, auth, workflow.Processed, 4*time.Second)
	c = recs.Compensate()
	require.Equal(t, &workflow.Ref{Index: 2, Undo: true}, c.Undo, "the latest done first: the authorization")
	set(recs, *c.Undo, workflow.Processed, 5*time.Second)
	require.Equal(t, &workflow.Ref{Index: 1, Undo: true}, recs.Compensate().Undo, "then the west reservation")
	set(recs, workflow.Ref{Index: 1, Undo: true}, workflow.Processed, 6*time.Second)
	require.Equal(t, workflow.Failed, recs.Compensate().End, "the refused one did nothing: all is undone")
}

func TestCompensateStopsWhatIsReadyAndUndoesWhatMayHaveRun(t *testing.T) {
	t.Parallel()
	recs := parallelRecords()
	east, auth := workflow.Ref{Index: 0}, workflow.Ref{Index: 2}
	set(recs, east, workflow.Error, time.Second)
	r := recs[east]
	r.Ran = true // timed out: it may have taken effect
	recs[east] = r
	c := recs.Compensate()
	require.Equal(t, []workflow.Ref{{Index: 1}, {Index: 2}}, c.Stop, "the others were ready, not claimed: they will not run")
	require.Equal(t, &workflow.Ref{Index: 0, Undo: true}, c.Undo, "its own undo, in case it took effect")

	// A record ready again after an attempt of it was recovered (its answer
	// lost) may have taken effect: it stops, and its undo runs first.
	recs = parallelRecords()
	set(recs, auth, workflow.Processed, time.Second)
	set(recs, east, workflow.Error, 2*time.Second) // refused: it did nothing
	west := workflow.Ref{Index: 1}
	r = recs[west]
	r.Ran = true // Pending and ready, its first attempt recovered
	recs[west] = r
	c = recs.Compensate()
	require.Equal(t, []workflow.Ref{west}, c.Stop, "its retry will not run")
	require.Equal(t, &workflow.Ref{Index: 1, Undo: true}, c.Undo, "its own undo first, in case the lost attempt took effect")
	set(recs, *c.Undo, workflow.Processed, 3*time.Second)
	r = recs[west]
	r.Ready = false // stopped
	recs[west] = r
	require.Equal(t, &workflow.Ref{Index: 2, Undo: true}, recs.Compensate().Undo, "then the authorization")

	// A step with no undo that took effect cannot be undone: an operator's case.
	recs = parallelRecords()
	ship := workflow.Ref{Index: 5}
	set(recs, auth, workflow.Processed, time.Second)
	set(recs, ship, workflow.Processed, 2*time.Second)
	set(recs, east, workflow.Error, 3*time.Second)
	c = recs.Compensate()
	require.Equal(t, workflow.CompensationFailed, c.End)
	require.Equal(t, ship, c.Pivot)
}
