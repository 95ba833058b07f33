package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/health"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

var healthTests = map[string]func(*testing.T, *statestore.Store){
	"HealthCountsEachEndOnceInItsHour":       healthCountsEachEnd,
	"HealthOfAnHourWithNoEndIsEmpty":         healthEmpty,
	"EveryEndIsToldOnceWhoeverWroteIt":       endsToldOnce,
	"AnEndIsToldWithItsWorkflowAndDurations": endToldWhole,
}

// ends collects the ends a store tells (statestore.Store.WithEnds).
type ends struct {
	mu  sync.Mutex
	got []health.End
}

// tell is the store's observer.
func (e *ends) tell(end health.End) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, end)
}

// states are the ends told so far, by order id.
func (e *ends) states() map[string]workflow.State {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]workflow.State{}
	for _, end := range e.got {
		out[end.OrderID] = end.State
	}
	return out
}

// Each order's end is counted once, by the write that ended it, in its
// workflow version's hour: its state, its duration, each step's, whether
// its work was undone. A late duplicate of the ending outcome (stale)
// counts nothing, and no order list sees the counts' items.
func healthCountsEachEnd(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	told := &ends{}
	s.WithEnds(told.tell)
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		submit(t, s, id, 2)
	}
	run(t, s, "o-1", step0, t0.Add(100*time.Millisecond))
	rec := run(t, s, "o-1", step1, t0.Add(2*time.Second))
	require.Equal(t, workflow.Processed, rec.State)
	require.Len(t, told.got, 1)
	require.Equal(t, 2*time.Second, told.got[0].Took(), "the end the write made, for the metrics")

	st, err := claim(ctx, s, "o-2", step0, "sched", t0)
	require.NoError(t, err)
	rec, err = refuse(ctx, s, "o-2", step0, st.Attempt, "no", t0.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, workflow.Failed, rec.State, "nothing ran: nothing to undo")

	run(t, s, "o-3", step0, t0.Add(time.Second))
	st, err = claim(ctx, s, "o-3", step1, "sched", t0.Add(time.Second))
	require.NoError(t, err)
	_, err = refuse(ctx, s, "o-3", step1, st.Attempt, "no", t0.Add(2*time.Second))
	require.NoError(t, err)
	rec = run(t, s, "o-3", undo0, t0.Add(3*time.Second))
	require.Equal(t, workflow.Failed, rec.State)
	_, err = complete(ctx, s, "o-3", undo0, 1, t0.Add(4*time.Second))
	require.ErrorIs(t, err, statestore.ErrStale, "a duplicate of the ending outcome")
	require.Len(t, told.got, 3, "each end told once, as it is counted")

	hours, err := s.Health(ctx, t0.Add(-time.Hour), t0.Add(time.Hour))
	require.NoError(t, err)
	w := health.Sum(hours, t0)
	require.Len(t, w, 1)
	require.Equal(t, "test", w[0].Workflow)
	require.Equal(t, map[workflow.State]int64{workflow.Processed: 1, workflow.Failed: 2}, w[0].Ended)
	require.EqualValues(t, 1, w[0].Undone, "o-3's work was undone")
	require.EqualValues(t, 3, w[0].Order.Count())
	require.EqualValues(t, 3, w[0].StartedEnded)
	require.Equal(t, 5*time.Second, w[0].Order.Percentile(0.99), "o-3 took 3 s: the 5 s bucket")
	require.Equal(t, time.Second, w[0].Order.Percentile(0.01), "o-2 took 1 s, the least: the 1 s bucket")
	require.EqualValues(t, 2, w[0].Steps["s0"].Count(), "o-1's and o-3's first step")
	require.EqualValues(t, 1, w[0].Steps["s1"].Count())

	tasks, _, err := s.ScanAll(ctx)
	require.NoError(t, err)
	require.Len(t, tasks, 3, "the counts are no order")
	listed, _, err := s.SearchTasks(ctx, statestore.TaskFilter{}, 10, "")
	require.NoError(t, err)
	require.Len(t, listed, 3)
}

// An hour no order ended in reads as nothing, in one Query per shard.
func healthEmpty(t *testing.T, s *statestore.Store) {
	hours, err := s.Health(context.Background(), t0, t0)
	require.NoError(t, err)
	require.Empty(t, hours)
	require.Empty(t, health.Sum(hours, t0))
}

// Every end is told to the store's observer once, by the write that made
// it, whatever decided it: a cancel with nothing to undo, an operator's
// undo of a held order with nothing to undo, a skip of an order's last
// step, the Supervisor's undo at a hold's end; a write that ends nothing
// tells nothing, and neither does a decision taken again on an ended order.
func endsToldOnce(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	told := &ends{}
	s.WithEnds(told.tell)
	firstHolds := def(2)
	firstHolds.Steps[0].HoldFor = time.Hour
	for _, id := range []string{"o-undo", "o-skip", "o-hold-ends"} {
		created, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: `{}`, Workflow: firstHolds, Now: t0})
		require.NoError(t, err)
		require.True(t, created)
		st := claimed(t, s, id, step0, t0)
		_, err = refuse(ctx, s, id, step0, st.Attempt, "card expired", t0)
		require.NoError(t, err)
	}
	submit(t, s, "o-cancel", 2)
	require.Empty(t, told.got, "nothing ended yet")

	_, err := cancel(ctx, s, cancelReq("o-cancel", t0.Add(time.Second)))
	require.NoError(t, err)
	_, err = cancel(ctx, s, cancelReq("o-cancel", t0.Add(2*time.Second)))
	require.NoError(t, err, "asked again: a repeat")
	res, err := decide(s, outcome.HoldDecision{OrderID: "o-undo", Action: outcome.HoldUndo, Now: t0.Add(time.Second)})
	require.NoError(t, err)
	require.Equal(t, workflow.Failed, res.State, "nothing ran: nothing to undo")
	_, err = decide(s, outcome.HoldDecision{OrderID: "o-skip", Action: outcome.HoldSkip, Now: t0.Add(time.Second)})
	require.NoError(t, err)
	run(t, s, "o-skip", step1, t0.Add(2*time.Second))
	snap, err := s.Read(ctx, "o-hold-ends")
	require.NoError(t, err)
	m, err := snap.Order().UndoHeld() // as the Supervisor decides at the hold's end
	require.NoError(t, err)
	_, err = s.Apply(ctx, snap, statestore.Write{Move: m, Due: t0.Add(time.Hour + time.Minute), Now: t0.Add(time.Hour)})
	require.NoError(t, err)

	require.Equal(t, map[string]workflow.State{"o-cancel": workflow.Cancelled, "o-undo": workflow.Failed,
		"o-skip": workflow.Processed, "o-hold-ends": workflow.Failed}, told.states())
	require.Len(t, told.got, 4, "each once")
	hours, err := s.Health(ctx, t0.Add(-time.Hour), t0.Add(2*time.Hour))
	require.NoError(t, err)
	var counted int64
	for _, w := range health.Sum(hours, t0) {
		counted += w.Total()
	}
	require.EqualValues(t, 4, counted, "what is told is what is counted")
}

// The end told carries what the end metrics need: the order's workflow and
// version, its state, its duration, each step done and how long it took,
// whether its work was undone.
func endToldWhole(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	told := &ends{}
	s.WithEnds(told.tell)
	submit(t, s, "o-1", 3)
	run(t, s, "o-1", step0, t0.Add(time.Second))
	_, err := cancel(ctx, s, cancelReq("o-1", t0.Add(2*time.Second)))
	require.NoError(t, err)
	require.Empty(t, told.got, "undoing: not ended")
	require.Equal(t, workflow.Cancelled, finishUndoAt(t, s, "o-1", undo0, t0.Add(5*time.Second)))
	require.Len(t, told.got, 1)
	e := told.got[0]
	require.Equal(t, health.End{OrderID: "o-1", Workflow: "test", Version: def(3).Version, State: workflow.Cancelled, Started: t0,
		Ended: t0.Add(5 * time.Second), Undone: true, Steps: []health.StepTime{{Name: "s0", Took: time.Second}}}, e)
}

// finishUndoAt claims and completes an undo action at at, returning the
// task's state after.
func finishUndoAt(t *testing.T, s *statestore.Store, id string, u workflow.Ref, at time.Time) workflow.State {
	t.Helper()
	st, err := claim(context.Background(), s, id, u, "agent-u", at)
	require.NoError(t, err)
	rec, err := complete(context.Background(), s, id, u, st.Attempt, at)
	require.NoError(t, err)
	return rec.State
}
