// Package storetest is the state store's conformance suite: the same tests run
// against every DynamoDB engine the product supports (moto_server, DynamoDB
// Local, LocalStack, AWS), because the conditional writes and transactions are
// the heart of the product.
package storetest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

var tableSeq atomic.Int64

// NewStore creates fresh tables on db for one test and returns a store on them.
func NewStore(t *testing.T, db *dynamodb.Client) *statestore.Store {
	t.Helper()
	topo := NewTables(t, db)
	return statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
}

// NewTables creates fresh tables on db for one test, for a store built on a
// client the test wraps.
func NewTables(t testing.TB, db *dynamodb.Client) topology.Topology {
	t.Helper()
	topo := topology.Default(fmt.Sprintf("conf%x-%d", rand.Uint32(), tableSeq.Add(1)), "svc") // unique across test processes too
	topo.DeadlineShards = 3
	require.NoError(t, provision.EnsureTables(context.Background(), db, topo))
	return topo
}

// def is a workflow of n steps; every step but the last has an undo action.
func def(steps int) workflow.Definition {
	d := workflow.Definition{Name: "test", PickupTimeout: time.Minute, Deadline: 24 * time.Hour}
	act := func(name string) workflow.Action {
		return workflow.Action{Name: name, Agent: "svc", Timeout: 10 * time.Second, MaxFailures: 3, RetryBackoff: time.Second}
	}
	for i := range steps {
		st := workflow.Step{Action: act(fmt.Sprintf("s%d", i))}
		if i < steps-1 {
			u := act(fmt.Sprintf("undo-s%d", i))
			st.Undo = &u
		}
		d.Steps = append(d.Steps, st)
	}
	return d
}

var (
	step0 = workflow.Ref{Index: 0}
	step1 = workflow.Ref{Index: 1}
	step2 = workflow.Ref{Index: 2}
	undo0 = workflow.Ref{Index: 0, Undo: true}
	undo1 = workflow.Ref{Index: 1, Undo: true}
)

var t0 = time.UnixMilli(1_800_000_000_000)

// claim claims r for owner as the suite's one agent, "svc", would.
func claim(ctx context.Context, s *statestore.Store, orderID string, r workflow.Ref, owner string, now time.Time) (statestore.Step, error) {
	return s.Claim(ctx, statestore.Claim{OrderID: orderID, Ref: r, Agent: "svc", Owner: owner, Now: now})
}

func submit(t *testing.T, s *statestore.Store, id string, steps int) {
	t.Helper()
	created, err := s.Submit(context.Background(), statestore.Submission{
		OrderID: id, Order: `{"orderId":"` + id + `"}`, Workflow: def(steps), Now: t0})
	require.NoError(t, err)
	require.True(t, created)
}

// Run runs the suite; newStore returns a store on fresh, empty tables.
func Run(t *testing.T, newStore func(t *testing.T) *statestore.Store) {
	tests := map[string]func(*testing.T, *statestore.Store){
		"SubmitWritesOrderTaskAndSteps":         submitWrites,
		"DuplicateSubmitIsIdempotent":           duplicateSubmit,
		"GiveUpOnPivotLeavesItToTheOperator":    giveUpPivot,
		"SubmitIsAtomic":                        submitAtomic,
		"ClaimIsExclusive":                      claimExclusive,
		"OnlyReadyStepsAreClaimable":            claimNotReady,
		"CompleteIsFencedByAttempt":             completeFenced,
		"CompleteMakesNextStepReady":            completeNext,
		"OverdueReturnsOnlyPastDeadlines":       overdue,
		"RequeueIsConditionalOnVersionRead":     requeue,
		"GiveUpMarksErrorUntilAlerted":          giveUpUntilAlerted,
		"FailIsFencedByAttempt":                 failFenced,
		"TasksReadsManyOrdersInBatches":         tasks,
		"FailureStartsCompensation":             failureStartsCompensation,
		"UndoChainEndsFailed":                   undoChainEndsFailed,
		"UndoFailureEndsCompensationFailed":     undoFailure,
		"GiveUpStartsCompensationFromRecord":    giveUpCompensates,
		"ResubmitFailedRunsANewRound":           resubmitFailed,
		"ResubmitCompensationFailedRetriesUndo": resubmitUndo,
		"ResubmitRefusesOtherStates":            resubmitRefused,
		"ListTasksPagesByState":                 listTasks,
		"OrderFoundDueEarlyMovesOn":             dueEarly,
		"EndLeavesIndexOnlyOnceAlerted":         endUnalerted,
	}
	maps.Copy(tests, clockTests)
	maps.Copy(tests, cancelTests)
	maps.Copy(tests, holdTests)
	maps.Copy(tests, definitionTests)
	maps.Copy(tests, migrateTests)
	maps.Copy(tests, inFlightTests)
	maps.Copy(tests, versionCensusTests)
	maps.Copy(tests, parkedTests)
	maps.Copy(tests, waitsTests)
	maps.Copy(tests, callbackTests)
	maps.Copy(tests, sweepTests)
	maps.Copy(tests, parallelTests)
	maps.Copy(tests, giveBackTests)
	maps.Copy(tests, noUndoTests)
	maps.Copy(tests, healthTests)
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newStore(t))
		})
	}
}

func submitWrites(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	task, steps, err := s.Load(ctx, "o-1")
	require.NoError(t, err)
	require.Equal(t, workflow.Pending, task.State)
	require.Equal(t, 2, task.StepCount)
	require.Len(t, steps, 3, "two steps and the first one's undo action")
	require.True(t, steps[2].Undo)
	require.Equal(t, "undo-s0", steps[2].Name)
	require.True(t, steps[2].DueAt.IsZero(), "an undo action waits")
	require.Equal(t, 1, task.Round)
	require.Equal(t, []statestore.Event{{At: t0, What: "ready"}}, steps[0].History(), "told by its times: no incident stored")
	require.Empty(t, steps[0].Incidents)
	for i, st := range steps[:2] {
		require.Equal(t, i, st.Index)
		require.Equal(t, workflow.Pending, st.State)
		require.Zero(t, st.FailureCount)
		require.Zero(t, st.Attempt)
		require.Empty(t, st.LockedBy)
		require.True(t, st.CompleteBy.IsZero())
	}
	require.Equal(t, t0.Add(time.Minute), steps[0].DueAt, "first step ready with its pickup deadline")
	require.Empty(t, steps[0].ReadiedBy, "Submission started it: no agent's reply carries its start")
	require.True(t, steps[1].DueAt.IsZero(), "later steps wait")
	order, err := s.Order(ctx, "o-1")
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"o-1"}`, order)
}

func duplicateSubmit(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1)
	_, err := claim(ctx, s, "o-1", step0, "sched-a", t0)
	require.NoError(t, err)
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-1", Order: `{"other":true}`, Workflow: def(1), Now: t0.Add(time.Hour)})
	require.NoError(t, err)
	require.False(t, created)
	task, steps, err := s.Load(ctx, "o-1")
	require.NoError(t, err)
	require.Equal(t, t0, task.CreatedAt, "task not rewritten")
	require.Equal(t, workflow.Processing, steps[0].State, "step not reset")
	order, err := s.Order(ctx, "o-1")
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"o-1"}`, order, "order not overwritten")
}

func submitAtomic(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	// A task record exists without its order (as if written by hand): the
	// submission's transaction must fail whole, writing no order either.
	submit(t, s, "o-1", 1)
	_, err := s.Submit(ctx, statestore.Submission{OrderID: "o-2", Order: "{}", Workflow: def(1), Now: t0})
	require.NoError(t, err)
	// Same OrderID, more steps: step 1 is new but order and task exist.
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-1", Order: "{}", Workflow: def(3), Now: t0})
	require.NoError(t, err)
	require.False(t, created)
	_, steps, err := s.Load(ctx, "o-1")
	require.NoError(t, err)
	require.Len(t, steps, 1, "no record of the refused transaction was written")
}

func claimExclusive(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1)
	var wins atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			st, err := claim(ctx, s, "o-1", step0, fmt.Sprintf("sched-%d", i), t0)
			if err == nil {
				wins.Add(1)
				require.Equal(t, 1, st.Attempt)
				require.Equal(t, fmt.Sprintf("sched-%d", i), st.LockedBy)
				return
			}
			require.ErrorIs(t, err, statestore.ErrNotClaimable)
		}()
	}
	close(start)
	wg.Wait()
	require.EqualValues(t, 1, wins.Load(), "exactly one claim wins")
	_, steps, err := s.Load(ctx, "o-1")
	require.NoError(t, err)
	st := steps[0]
	require.Equal(t, workflow.Processing, st.State)
	require.NotEmpty(t, st.LockedBy)
	require.Equal(t, t0.Add(10*time.Second), st.CompleteBy)
	require.Equal(t, st.CompleteBy, st.DueAt)
}

func claimNotReady(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	_, err := claim(ctx, s, "o-1", step1, "sched", t0)
	require.ErrorIs(t, err, statestore.ErrNotClaimable, "second step waits for the first")
	_, err = claim(ctx, s, "missing", step0, "sched", t0)
	require.ErrorIs(t, err, statestore.ErrNotClaimable)
}

func completeFenced(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1)
	st, err := claim(ctx, s, "o-1", step0, "sched", t0)
	require.NoError(t, err)
	_, err = complete(ctx, s, "o-1", step0, st.Attempt+1, t0)
	require.ErrorIs(t, err, statestore.ErrStale, "a reply of another attempt")
	task, steps, _ := s.Load(ctx, "o-1")
	require.Equal(t, workflow.Processing, steps[0].State)
	require.Equal(t, workflow.Pending, task.State)
	_, err = complete(ctx, s, "o-1", step0, st.Attempt, t0.Add(time.Second))
	require.NoError(t, err)
	_, err = complete(ctx, s, "o-1", step0, st.Attempt, t0.Add(time.Second))
	require.ErrorIs(t, err, statestore.ErrStale, "a duplicate reply")
	task, steps, _ = s.Load(ctx, "o-1")
	require.Equal(t, workflow.Processed, steps[0].State)
	require.True(t, steps[0].DueAt.IsZero(), "left the deadline index")
	require.Equal(t, "sched", steps[0].LockedBy, "who ran it")
	require.Equal(t, t0.Add(time.Second), steps[0].DoneAt)
	require.Equal(t, workflow.Processed, task.State)
	require.Equal(t, t0.Add(time.Second), task.CompletedAt)
}

func completeNext(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	st, err := claim(ctx, s, "o-1", step0, "sched", t0)
	require.NoError(t, err)
	rec, err := complete(ctx, s, "o-1", step0, st.Attempt, t0)
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{step1}, rec.Ready)
	task, steps, _ := s.Load(ctx, "o-1")
	require.Equal(t, workflow.Pending, task.State, "task goes on")
	require.Equal(t, t0.Add(time.Minute), steps[1].DueAt)
	require.Equal(t, "svc", steps[1].ReadiedBy, "the outcome that made it ready was step 0's agent's: its reply starts it")
	st2, err := claim(ctx, s, "o-1", step1, "sched", t0)
	require.NoError(t, err)
	require.Equal(t, 1, st2.Attempt)
}

func overdue(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	for i := range 6 {
		submit(t, s, fmt.Sprintf("o-%d", i), 1)
	}
	// o-0, o-1 claimed (deadline t0+10s); o-2 claimed and completed.
	for i := range 3 {
		_, err := claim(ctx, s, fmt.Sprintf("o-%d", i), step0, "sched", t0)
		require.NoError(t, err)
	}
	_, err := complete(ctx, s, "o-2", step0, 1, t0)
	require.NoError(t, err)
	got, err := Overdue(ctx, s, t0.Add(5*time.Second), 100)
	require.NoError(t, err)
	require.Empty(t, got, "nothing due yet")
	got, err = Overdue(ctx, s, t0.Add(11*time.Second), 100)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"o-0", "o-1"}, ids(got),
		"an order enters the index by its first step's timeout: a hung attempt is found at its CompleteBy")
	got, err = Overdue(ctx, s, t0.Add(61*time.Second), 100)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"o-0", "o-1", "o-3", "o-4", "o-5"}, ids(got),
		"claims past CompleteBy and Pending past pickup; not the finished one")
	for _, st := range got {
		require.NotZero(t, st.MaxFailures, "the index carries what the supervisor needs")
	}
	_, err = refuse(ctx, s, "o-0", step0, 1, "declined", t0.Add(-time.Minute))
	require.NoError(t, err)
	got, err = Overdue(ctx, s, t0, 100)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "declined", got[0].LastError, "an Error's reason is in the index for the alert")
	got, err = Overdue(ctx, s, t0.Add(61*time.Second), 2)
	require.NoError(t, err)
	require.Len(t, got, 2, "limit")
}

func ids(steps []statestore.Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.OrderID)
	}
	return out
}

func requeue(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1)
	_, err := claim(ctx, s, "o-1", step0, "sched", t0)
	require.NoError(t, err)
	got, err := Overdue(ctx, s, t0.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	read := got[0]
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 4 { // four supervisors recover what they read
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := giveBack(ctx, s, read, read.FailureCount+1, "timed out", t0.Add(time.Hour), t0.Add(2*time.Hour), t0.Add(time.Hour))
			if err == nil {
				wins.Add(1)
				return
			}
			require.True(t, isConflict(err), "lost to another: %v", err)
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, wins.Load())
	_, steps, _ := s.Load(ctx, "o-1")
	st := steps[0]
	require.Equal(t, workflow.Pending, st.State)
	require.Equal(t, 1, st.FailureCount)
	require.Empty(t, st.LockedBy)
	require.True(t, st.CompleteBy.IsZero())
	require.Equal(t, "timed out", st.LastError)
	// The step can be claimed again, and then the old attempt's reply is stale
	// (before, it was still the latest: see LateReplyCompletesARequeuedRecord).
	st2, err := claim(ctx, s, "o-1", step0, "sched-b", t0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, st2.Attempt)
	_, err = complete(ctx, s, "o-1", step0, 1, t0.Add(time.Hour))
	require.ErrorIs(t, err, statestore.ErrStale)
	_, err = complete(ctx, s, "o-1", step0, 2, t0.Add(time.Hour))
	require.NoError(t, err)
}

func giveUpUntilAlerted(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1)
	_, err := claim(ctx, s, "o-1", step0, "sched", t0)
	require.NoError(t, err)
	got, _ := Overdue(ctx, s, t0.Add(time.Hour), 10)
	require.Len(t, got, 1)
	now := t0.Add(time.Hour)
	_, err = giveUp(ctx, s, got[0], 3, workflow.TimedOut, "timed out 3 times", now, now)
	require.NoError(t, err)
	_, err = giveUp(ctx, s, got[0], 3, workflow.TimedOut, "again", now, now)
	require.True(t, isConflict(err), "a second supervisor, on what it read: %v", err)
	task, steps, _ := s.Load(ctx, "o-1")
	require.Equal(t, workflow.CompensationFailed, task.State, "a lone step without an undo timed out: it may have taken effect, the operator decides")
	require.Contains(t, task.LastError, "timed out 3 times")
	require.Equal(t, workflow.Error, steps[0].State)
	require.Equal(t, 3, steps[0].FailureCount)
	require.True(t, steps[0].GaveUp(), "given up on after timing out")
	require.False(t, steps[0].Alerted)
	due, _ := Overdue(ctx, s, now.Add(2*time.Minute), 10)
	require.Len(t, due, 1, "an unalerted Error stays due until alerted")
	pending, err := s.AlertPending(ctx, "o-1", step0)
	require.NoError(t, err)
	require.True(t, pending)
	require.NoError(t, s.MarkAlerted(ctx, "o-1", step0, now))
	require.NoError(t, s.MarkAlerted(ctx, "o-1", step0, now), "idempotent")
	pending, err = s.AlertPending(ctx, "o-1", step0)
	require.NoError(t, err)
	require.False(t, pending, "alerted: a reply delivered again alerts nothing")
	due, _ = Overdue(ctx, s, now.Add(2*time.Minute), 10)
	require.Empty(t, due)
	_, steps, _ = s.Load(ctx, "o-1")
	require.True(t, steps[0].Alerted)
}

func failFenced(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1)
	st, err := claim(ctx, s, "o-1", step0, "sched", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, "o-1", step0, st.Attempt+1, "declined", t0)
	require.ErrorIs(t, err, statestore.ErrStale)
	_, err = refuse(ctx, s, "o-1", step0, st.Attempt, "declined", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, "o-1", step0, st.Attempt, "declined", t0)
	require.ErrorIs(t, err, statestore.ErrStale)
	task, steps, _ := s.Load(ctx, "o-1")
	require.Equal(t, workflow.Failed, task.State)
	require.Equal(t, "declined", steps[0].LastError)
	require.Zero(t, steps[0].FailureCount, "a permanent fault is not a timeout")
	require.False(t, steps[0].GaveUp(), "an error reply is not a give-up")
}

func tasks(t *testing.T, s *statestore.Store) {
	var want []string
	for i := range 130 {
		id := fmt.Sprintf("o-%03d", i)
		submit(t, s, id, 1)
		want = append(want, id)
	}
	got, err := s.Tasks(context.Background(), append(want, "missing"))
	require.NoError(t, err)
	require.Len(t, got, 130)
	require.Equal(t, workflow.Pending, got["o-129"].State)
}

// runTo completes steps 0..n-1 of o-1 (submitted with steps steps).
func runTo(t *testing.T, s *statestore.Store, steps, n int) {
	t.Helper()
	submit(t, s, "o-1", steps)
	for i := range n {
		run(t, s, "o-1", workflow.Ref{Index: i}, t0.Add(time.Duration(i)*time.Millisecond))
	}
}

func state(t *testing.T, s *statestore.Store) (statestore.Task, map[workflow.Ref]statestore.Step) {
	t.Helper()
	task, recs, err := s.Load(context.Background(), "o-1")
	require.NoError(t, err)
	m := map[workflow.Ref]statestore.Step{}
	for _, r := range recs {
		m[r.Ref] = r
	}
	return task, m
}

func listTasks(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	for i := range 7 {
		submit(t, s, fmt.Sprintf("o-%d", i), 1)
	}
	for _, id := range []string{"o-1", "o-4", "o-6"} {
		st, err := claim(ctx, s, id, step0, "sched", t0)
		require.NoError(t, err)
		_, err = refuse(ctx, s, id, step0, st.Attempt, "declined", t0)
		require.NoError(t, err)
	}
	var got []string
	token := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		tasks, next, err := s.SearchTasks(ctx, statestore.TaskFilter{State: workflow.Failed}, 2, token)
		require.NoError(t, err)
		require.LessOrEqual(t, len(tasks), 2)
		for _, task := range tasks {
			require.Equal(t, workflow.Failed, task.State)
			got = append(got, task.OrderID)
		}
		if next == "" {
			break
		}
		token = next
	}
	require.ElementsMatch(t, []string{"o-1", "o-4", "o-6"}, got, "every page, no repeats")
	all, next, err := s.SearchTasks(ctx, statestore.TaskFilter{}, 100, "")
	require.NoError(t, err)
	require.Len(t, all, 7)
	require.Empty(t, next)
	counts, err := s.Census(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, map[workflow.State]int{workflow.Failed: 3, workflow.Pending: 4}, counts.ByState)
	_, _, err = s.SearchTasks(ctx, statestore.TaskFilter{}, 1, "garbage!")
	require.ErrorContains(t, err, "bad page token")
}

// dueEarly: the index is not moved by a claim or a step made ready, so the
// supervisor may find an order due whose records are not: it moves the order
// on to its earliest record deadline, and returns nothing for it.
func dueEarly(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	_, err := claim(ctx, s, "o-1", step0, "sched", t0.Add(55*time.Second)) // CompleteBy t0+65s
	require.NoError(t, err)
	got, err := Overdue(ctx, s, t0.Add(61*time.Second), 10)
	require.NoError(t, err)
	require.Empty(t, got, "due at the pickup deadline, but the step still has time")
	got, err = Overdue(ctx, s, t0.Add(66*time.Second), 10)
	require.NoError(t, err)
	require.Equal(t, []string{"o-1"}, ids(got), "moved on to CompleteBy, found then")
	require.Equal(t, workflow.Processing, got[0].State)

	// Completed in time: the next step is ready, due a minute after; the order
	// comes due early again and moves on to that.
	_, err = complete(ctx, s, "o-1", step0, 1, t0.Add(62*time.Second))
	require.NoError(t, err)
	got, err = Overdue(ctx, s, t0.Add(90*time.Second), 10)
	require.NoError(t, err)
	require.Empty(t, got)
	got, err = Overdue(ctx, s, t0.Add(123*time.Second), 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, step1, got[0].Ref, "the ready step, past its pickup deadline")
}

// endUnalerted: an order whose Error alert is not confirmed stays in the
// index when its last record completes, so the supervisor still alerts.
func endUnalerted(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	runTo(t, s, 2, 1)
	st, err := claim(ctx, s, "o-1", step1, "sched", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, "o-1", step1, st.Attempt, "declined", t0) // the alert is then lost
	require.NoError(t, err)
	u0, err := claim(ctx, s, "o-1", undo0, "sched", t0)
	require.NoError(t, err)
	_, err = complete(ctx, s, "o-1", undo0, u0.Attempt, t0)
	require.NoError(t, err)
	task, _ := state(t, s)
	require.Equal(t, workflow.Failed, task.State)
	got, err := Overdue(ctx, s, t0.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, got, 1, "the unalerted Error is still due")
	require.Equal(t, step1, got[0].Ref)
	require.Equal(t, "declined", got[0].LastError)
	require.NoError(t, s.MarkAlerted(ctx, "o-1", step1, t0.Add(time.Hour)))
	got, err = Overdue(ctx, s, t0.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Empty(t, got, "alerted: nothing due, and the order leaves the index")
	_, err = complete(ctx, s, "o-1", undo0, u0.Attempt, t0)
	require.ErrorIs(t, err, statestore.ErrStale, "a duplicate")
}
