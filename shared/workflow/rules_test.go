package workflow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

var t0 = time.Unix(1_800_000_000, 0)

// run drives the rules over one order, one event at a time, each decided on
// the order as the one before left it.
type run struct {
	t   *testing.T
	d   workflow.Definition
	o   workflow.Order
	now time.Time
}

func start(t *testing.T, d workflow.Definition, items map[int]int) *run {
	return &run{t: t, d: d, o: d.Start(items), now: t0}
}

func (r *run) tick() time.Time { r.now = r.now.Add(time.Second); return r.now }

func (r *run) claim(refs ...workflow.Ref) {
	for _, ref := range refs {
		require.True(r.t, r.o.Active(r.o.Recs[ref]), "%v is ready to claim", ref)
		r.o = r.o.Claimed(ref)
	}
}

// done completes ref (claiming it first if it is only ready) and returns the move.
func (r *run) done(ref workflow.Ref) workflow.Move {
	if r.o.Recs[ref].State == workflow.Pending {
		r.claim(ref)
	}
	m := r.d.Complete(r.o, ref, r.tick())
	r.o = r.o.After(m)
	return m
}

func (r *run) fail(ref workflow.Ref, cause workflow.Cause, ran bool) workflow.Move {
	m := r.o.Fail(ref, cause, ran, r.tick())
	r.o = r.o.After(m)
	return m
}

func step(i int) workflow.Ref { return workflow.Ref{Index: i} }
func undo(i int) workflow.Ref { return workflow.Ref{Index: i, Undo: true} }
func item(i, k int) workflow.Ref {
	return workflow.Ref{Index: i, Item: k}
}

func TestALineRunsEachStepAfterTheOneBeforeIt(t *testing.T) {
	t.Parallel()
	r := start(t, valid(), nil)
	require.True(t, r.o.Recs[step(0)].Ready, "the first step starts with the order")
	require.False(t, r.o.Recs[step(1)].Ready)
	m := r.done(step(0))
	require.Equal(t, []workflow.Ref{step(1)}, m.Ready)
	require.Equal(t, workflow.Read{Forward: true, Finishes: true}, m.Read, "a completion is ordered with the others that finish a step")
	require.Empty(t, m.State)
	require.Equal(t, []workflow.Ref{step(2)}, r.done(step(1)).Ready)
	m = r.done(step(2))
	require.Empty(t, m.Ready)
	require.Equal(t, workflow.Processed, m.State, "the last step ends the order")
}

func TestAFailureUndoesWhatCompletedTheLatestFirst(t *testing.T) {
	t.Parallel()
	r := start(t, valid(), nil) // reserve (undo) → charge (undo) → ship (no undo)
	r.done(step(0))
	r.done(step(1))
	r.claim(step(2))
	m := r.fail(step(2), workflow.Refused, false)
	require.Equal(t, workflow.Compensating, m.State)
	require.Equal(t, []workflow.Ref{undo(1)}, m.Ready, "the refund first")
	require.Equal(t, workflow.Read{Version: true}, m.Read, "a failure reads the whole order")
	m = r.done(undo(1))
	require.Equal(t, []workflow.Ref{undo(0)}, m.Ready, "then the release")
	require.Empty(t, m.State)
	m = r.done(undo(0))
	require.Equal(t, workflow.Failed, m.State, "everything done is undone")
	require.Empty(t, m.Ready)
}

// A step retried after an attempt that did not complete may have taken
// effect with that attempt, whatever the retry answers: a refusal of the
// retry undoes it too (found by the explorer: an async call applied at its
// attempt's CompleteBy, its callback late, the next attempt refused).
func TestARetriedStepRefusedIsUndoneAllTheSame(t *testing.T) {
	t.Parallel()
	r := start(t, valid(), nil) // reserve (undo) → charge (undo) → ship
	r.done(step(0))
	r.claim(step(1))
	r.o = r.o.After(r.o.GiveBack(step(1), true)) // its attempt recovered: given back, to run again
	require.True(t, r.o.Recs[step(1)].Retried)
	r.claim(step(1))
	m := r.fail(step(1), workflow.Refused, false)
	require.Equal(t, workflow.Compensating, m.State)
	require.Equal(t, []workflow.Ref{undo(1)}, m.Ready, "the charge's undo first: its first attempt may have charged")
	require.True(t, r.o.Recs[step(1)].Ran)
	r.done(undo(1))
	require.Equal(t, workflow.Failed, r.done(undo(0)).State)
}

func TestWhatAFailureDecides(t *testing.T) {
	t.Parallel()
	noUndo := valid()
	noUndo.Steps[1].Undo = nil
	cases := map[string]struct {
		d     workflow.Definition
		done  int // steps done before
		fail  workflow.Ref
		cause workflow.Cause
		ran   bool
		state workflow.State
		ready []workflow.Ref
		pivot *workflow.Ref
	}{
		"the first step refused: nothing to undo": {d: valid(), fail: step(0), cause: workflow.Refused, state: workflow.Failed},
		"a step refused: what came before is undone": {d: valid(), done: 1, fail: step(1), cause: workflow.Refused,
			state: workflow.Compensating, ready: []workflow.Ref{undo(0)}},
		"a step with an undo timed out after it ran: its own undo first": {d: valid(), done: 1, fail: step(1),
			cause: workflow.TimedOut, ran: true, state: workflow.Compensating, ready: []workflow.Ref{undo(1)}},
		"a step never claimed given up on: as a refusal": {d: valid(), done: 1, fail: step(1), cause: workflow.Expired,
			state: workflow.Compensating, ready: []workflow.Ref{undo(0)}},
		"a pivot that may have run: nothing is undone": {d: valid(), done: 2, fail: step(2), cause: workflow.TimedOut, ran: true,
			state: workflow.CompensationFailed, pivot: &workflow.Ref{Index: 2}},
		"a step without undo that completed stops the undoing": {d: noUndo, done: 2, fail: step(2), cause: workflow.Refused,
			state: workflow.CompensationFailed, pivot: &workflow.Ref{Index: 1}},
		"an undo that failed": {d: valid(), done: 2, fail: undo(1), cause: workflow.Refused, state: workflow.CompensationFailed},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := start(t, c.d, nil)
			for i := range c.done {
				r.done(step(i))
			}
			if c.fail.Undo { // the undoing has reached it
				r.fail(step(c.done), workflow.Refused, false)
				r.claim(c.fail)
			} else if c.ran {
				r.claim(c.fail)
			}
			m := r.fail(c.fail, c.cause, c.ran)
			require.Equal(t, c.state, r.o.State)
			require.Equal(t, c.ready, m.Ready)
			require.Equal(t, c.pivot, m.Pivot)
		})
	}
}

// The case a user hit: slow-a beside fast-b → fast-c, and a join that needs
// slow-a and fast-c. Whichever branch ends last makes the join ready, and
// both completions finish a step: their writes are ordered, the later
// deciding on the earlier's outcome.
func branches() workflow.Definition {
	d := valid()
	a := d.Steps[0].Action
	mk := func(name string, needs ...string) workflow.Step {
		s := workflow.Step{Action: a, Needs: needs}
		s.Name = name
		if needs == nil {
			s.NoNeeds = true
		}
		return s
	}
	d.Steps = []workflow.Step{mk("slow-a"), mk("fast-b"), mk("fast-c", "fast-b"), mk("join", "slow-a", "fast-c")}
	return d
}

func TestBranchesOfDifferentLengthsMakeTheJoinReadyOnce(t *testing.T) {
	t.Parallel()
	for name, order := range map[string][]int{"the long branch last": {0, 1, 2}, "the short branch last": {1, 2, 0},
		"interleaved": {1, 0, 2}} {
		t.Run(name, func(t *testing.T) {
			r := start(t, branches(), nil)
			r.claim(step(0), step(1))
			var readied []workflow.Ref
			for _, i := range order {
				m := r.done(step(i))
				require.True(t, m.Read.Finishes, "step %d finishes a step: its write is ordered with the others'", i)
				readied = append(readied, m.Ready...)
			}
			require.Contains(t, readied, step(3), "the join")
			require.Equal(t, 1, count(readied, step(3)), "once")
			require.Equal(t, workflow.Processed, r.done(step(3)).State)
		})
	}
	// The same without the join: the last branch to end ends the order.
	d := branches()
	d.Steps = d.Steps[:3]
	r := start(t, d, nil)
	r.done(step(1))
	r.done(step(2))
	require.Equal(t, workflow.Processed, r.done(step(0)).State)
}

func count(refs []workflow.Ref, r workflow.Ref) int {
	n := 0
	for _, x := range refs {
		if x == r {
			n++
		}
	}
	return n
}

func TestItemsOfAForEachStepReadOnlyTheirStepsCount(t *testing.T) {
	t.Parallel()
	d := workflow.MustExample(workflow.ParallelWorkflow) // east, west, auth → charge → pack each item → ship
	r := start(t, d, map[int]int{4: 3})
	for i := range 4 {
		r.done(step(i))
	}
	require.True(t, r.o.Recs[item(4, 1)].Ready && r.o.Recs[item(4, 3)].Ready, "every item is ready at once")
	m := r.done(item(4, 2))
	require.Equal(t, workflow.Read{Forward: true, Items: &workflow.ItemsRead{Step: 4, Done: 0, Of: 3}}, m.Read,
		"not the last item: it reads its step's count alone, and finishes nothing")
	require.Empty(t, m.Ready)
	r.done(item(4, 3))
	m = r.done(item(4, 1))
	require.Equal(t, workflow.Read{Forward: true, Finishes: true, Items: &workflow.ItemsRead{Step: 4, Done: 2, Of: 3}}, m.Read)
	require.True(t, m.Read.Items.Last())
	require.Equal(t, []workflow.Ref{step(5)}, m.Ready, "the last item makes the shipment ready")
}

func TestAFailedBranchAwaitsWhatRunsThenUndoesTheLatestFirst(t *testing.T) {
	t.Parallel()
	d := workflow.MustExample(workflow.ParallelWorkflow)
	r := start(t, d, map[int]int{4: 2})
	r.done(step(1))                               // west reserved
	r.claim(step(2))                              // the authorization runs
	m := r.fail(step(0), workflow.Refused, false) // east refused
	require.Equal(t, workflow.Compensating, m.State)
	require.True(t, m.Awaits, "the authorization's outcome comes first")
	require.Empty(t, m.Ready)
	require.False(t, r.o.Active(r.o.Recs[step(3)]), "nothing starts")
	m = r.done(step(2))
	require.Equal(t, []workflow.Ref{undo(2)}, m.Ready, "the authorization, done last, is voided first")
	require.Equal(t, []workflow.Ref{undo(1)}, r.done(undo(2)).Ready, "then the west reservation")
	require.Equal(t, workflow.Failed, r.done(undo(1)).State)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	retried := func(r *run, ref workflow.Ref) { // an attempt recovered: its call may have been applied
		r.claim(ref)
		r.o = r.o.After(r.o.GiveBack(ref, true))
	}
	cases := map[string]struct {
		d       workflow.Definition
		setup   func(*run)
		verdict workflow.CancelVerdict
		reason  string
		state   workflow.State
		ready   []workflow.Ref
		stopped []workflow.Ref
	}{
		"before the first claim": {d: valid(), setup: func(*run) {}, verdict: workflow.CancelStops, state: workflow.Cancelled,
			stopped: []workflow.Ref{step(0)}},
		"while a step runs": {d: valid(), setup: func(r *run) { r.done(step(0)); r.claim(step(1)) }, verdict: workflow.CancelAwaits,
			state: workflow.Compensating},
		"a step ready: what completed is undone": {d: valid(), setup: func(r *run) { r.done(step(0)) }, verdict: workflow.CancelStops,
			state: workflow.Compensating, ready: []workflow.Ref{undo(0)}, stopped: []workflow.Ref{step(1)}},
		"twice": {d: valid(), setup: func(r *run) {
			r.done(step(0))
			r.claim(step(1))
			m, _, _ := r.o.Cancel()
			r.o = r.o.After(m)
		}, verdict: workflow.CancelRepeated, state: workflow.Compensating},
		"while compensating": {d: valid(), setup: func(r *run) { r.done(step(0)); r.fail(step(1), workflow.Refused, false) },
			verdict: workflow.CancelCompensates, state: workflow.Compensating},
		"ended": {d: valid(), setup: func(r *run) { r.done(step(0)); r.done(step(1)); r.done(step(2)) }, verdict: workflow.CancelRefused,
			reason: "the order is Processed: there is nothing to cancel", state: workflow.Processed},
		"past the point of no return": {d: valid(), setup: func(r *run) { r.done(step(0)); r.done(step(1)); r.claim(step(2)) },
			verdict: workflow.CancelRefused, state: workflow.Pending,
			reason: "step create-shipment has run, or is running, and cannot be undone: the order can no longer be cancelled"},
		"a pivot ready again after a recovered attempt": {d: valid(), setup: func(r *run) { r.done(step(0)); r.done(step(1)); retried(r, step(2)) },
			verdict: workflow.CancelRefused, state: workflow.Pending,
			reason: "step create-shipment has run, or is running, and cannot be undone: the order can no longer be cancelled"},
		"a step ready again after a recovered attempt: its own undo first": {d: valid(),
			setup: func(r *run) { r.done(step(0)); retried(r, step(1)) }, verdict: workflow.CancelStops, state: workflow.Compensating,
			ready: []workflow.Ref{undo(1)}, stopped: []workflow.Ref{step(1)}},
		// A wait changes nothing outside: it is no point of no return.
		"approved, the charge ready": {d: workflow.MustExample(workflow.ApprovalWorkflow),
			setup: func(r *run) { r.done(step(0)); r.done(step(1)) }, verdict: workflow.CancelStops, state: workflow.Compensating,
			ready: []workflow.Ref{undo(0)}, stopped: []workflow.Ref{step(2)}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := start(t, c.d, nil)
			c.setup(r)
			m, verdict, reason := r.o.Cancel()
			require.Equal(t, c.verdict, verdict)
			require.Equal(t, c.reason, reason)
			r.o = r.o.After(m)
			require.Equal(t, c.state, r.o.State)
			require.Equal(t, c.ready, m.Ready)
			require.Equal(t, c.stopped, m.Stopped)
		})
	}
}

func TestACancelledOrderEndsCancelledOnceItsWorkIsUndone(t *testing.T) {
	t.Parallel()
	r := start(t, valid(), nil)
	r.done(step(0))
	r.claim(step(1))
	m, _, _ := r.o.Cancel()
	r.o = r.o.After(m)
	require.Equal(t, []workflow.Ref{undo(1)}, r.done(step(1)).Ready, "the running step, done, is undone first")
	require.Equal(t, []workflow.Ref{undo(0)}, r.done(undo(1)).Ready)
	require.Equal(t, workflow.Cancelled, r.done(undo(0)).State)
}

func TestUndoingFollowsTheDependenciesWhateverTheClocksSay(t *testing.T) {
	t.Parallel()
	r := start(t, valid(), nil)
	r.done(step(0))
	r.now = t0.Add(-time.Hour) // the next outcome is recorded by a machine whose clock is behind
	r.done(step(1))
	require.True(t, r.o.Recs[step(1)].DoneAt.After(r.o.Recs[step(0)].DoneAt), "done after what it needs, as recorded")
	r.claim(step(2))
	m := r.fail(step(2), workflow.Refused, false)
	require.Equal(t, []workflow.Ref{undo(1)}, m.Ready, "the refund before the release")
}

// A step that says undo: none changes nothing to undo: the undoing passes
// it by (it is no pivot), and a cancel after it ran is taken; a step with
// no undo at all is a pivot, as before.
func TestAStepWithNothingToUndoIsNoPivot(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("claims.yaml", []byte(`name: claims
defaults: {timeout: 5s}
agents:
  a: {endpoint: "https://a.example.com"}
steps:
  - {name: reserve, agent: a, undo: {name: release}}
  - {name: ocr, agent: a, undo: none}
  - {name: charge, agent: a, undo: {name: refund}}
  - {name: notify, agent: a}
`), workflow.Options{})
	require.NoError(t, err)
	require.True(t, d.Steps[1].NoUndo)
	require.Nil(t, d.Steps[1].Undo)

	r := start(t, d, nil)
	r.done(step(0))
	r.done(step(1))
	r.done(step(2))
	m := r.fail(step(3), workflow.Refused, false)
	require.Equal(t, []workflow.Ref{undo(2)}, m.Ready, "refund first")
	m = r.done(undo(2))
	require.Equal(t, []workflow.Ref{undo(0)}, m.Ready, "then release: ocr has nothing to undo")
	m = r.done(undo(0))
	require.Equal(t, workflow.Failed, m.State, "undone, not CompensationFailed")

	r = start(t, d, nil)
	r.done(step(0))
	r.done(step(1))
	m, verdict, why := r.o.Cancel()
	require.Equal(t, workflow.CancelStops, verdict, why)
	require.Equal(t, []workflow.Ref{undo(0)}, m.Ready, "ocr ran, and the order can still be cancelled")

	d.Steps[1].NoUndo = false // no undo at all: a pivot
	r = start(t, d, nil)
	r.done(step(0))
	r.done(step(1))
	_, verdict, why = r.o.Cancel()
	require.Equal(t, workflow.CancelRefused, verdict)
	require.Contains(t, why, "step ocr has run, or is running, and cannot be undone")

	_, err = workflow.ParseFile("w.yaml", []byte("name: w\ndefaults: {timeout: 5s}\nsteps:\n  - {name: nap, sleep: 1m, undo: none}\n"), workflow.Options{})
	require.ErrorContains(t, err, "w.yaml:4: steps[0].undo: step \"nap\" waits or sleeps: it calls no agent, so it has no undo")
}
