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

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// parkedTests are the cases of results, waits, timers and async steps.
var parkedTests = map[string]func(*testing.T, *statestore.Store){
	"ResultsAreKeptBesideTheItemFencedByAttempt": resultsFenced,
	"DocumentHoldsTheResultsOfRecordsDone":       documentOfDone,
	"AnEventCompletesAnArmedWaitOnce":            eventCompletesWait,
	"AnEarlyEventIsKeptForTheWait":               earlyEventKept,
	"KeepEventIsConditionalOnTheOrderAsRead":     keepEventConditional,
	"ATimerWakesOnlyOnceItsTimeCame":             timerWakes,
	"AnAsyncCallbackNeedsItsAttemptsToken":       asyncToken,
	"TheDefinitionIsStoredWithWaitsAndInputs":    definitionStored,
	"ScansSeeOnlyOrdersNotResultsOrDefinitions":  scansSeeOrders,
	"AnEventLosesNoRaceToTheOrdersOwnWrites":     eventAmidWrites,
	"AnEventAfterItsWaitTimedOutIsRefusedAtOnce": lateEvent,
}

// waiting is a workflow of an agent step, a wait for "approved" (1h), and
// an agent step with an input expression.
func waiting() workflow.Definition {
	d := def(3)
	d.Name = "waiting"
	d.Steps[1] = workflow.Step{Action: workflow.Action{Name: "approve", MaxFailures: 1, Timeout: time.Hour},
		Wait: &workflow.Wait{Event: "approved", Timeout: time.Hour}}
	d.Steps[2].Input = `{amount: .results.approve.cents}`
	d.Steps[0].Undo = nil
	return d
}

// sleeping is a workflow of an agent step then a 2h timer.
func sleeping() workflow.Definition {
	d := def(2)
	d.Name = "sleeping"
	d.Steps[0].Undo = nil
	d.Steps[1] = workflow.Step{Action: workflow.Action{Name: "nap", MaxFailures: 1}, Sleep: &workflow.Sleep{For: 2 * time.Hour}}
	return d
}

func submitDef(t *testing.T, s *statestore.Store, id string, d workflow.Definition) {
	t.Helper()
	created, err := s.Submit(context.Background(), statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`, Workflow: d, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
}

// firstDone claims and completes an order's first step, making step 1 ready,
// its result stored if result is not empty.
func firstDone(t *testing.T, s *statestore.Store, id, result string) {
	t.Helper()
	ctx := context.Background()
	st, err := claim(ctx, s, id, step0, "agent-1", t0)
	require.NoError(t, err)
	a := outcome.Attempt{OrderID: id, Ref: step0, Attempt: st.Attempt, Round: 1, Read: st.Read, Now: t0}
	if result != "" {
		require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: id, Ref: step0, Name: "s0", Round: 1, Attempt: st.Attempt,
			JSON: json.RawMessage(result), Now: t0}))
		a.ResultBytes = len(result)
	}
	_, err = recordAttempt(ctx, s, a)
	require.NoError(t, err)
}

func resultsFenced(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	put := func(attempt int, v string) error {
		return s.PutResult(ctx, statestore.Result{OrderID: "o-1", Ref: step0, Name: "s0", Round: 1, Attempt: attempt,
			JSON: json.RawMessage(v), Now: t0})
	}
	require.NoError(t, put(1, `{"a":1}`))
	require.NoError(t, put(2, `{"a":2}`), "a later attempt's result replaces an earlier one's")
	require.ErrorIs(t, put(1, `{"a":"late"}`), statestore.ErrStale, "an earlier attempt's never replaces a later one's")
	big := `{"lines":[` + strings.Repeat(`{"sku":"SKU-00001","quantity":1,"unitPriceCents":1999},`, 60) + `{}]}`
	require.NoError(t, put(3, big))
	got, err := s.Results(ctx, "o-1", 1)
	require.NoError(t, err)
	require.JSONEq(t, big, string(got[step0].JSON), "a large result is deflated and read back whole")
	require.Equal(t, 3, got[step0].Attempt)
	other, err := s.Results(ctx, "o-1", 2)
	require.NoError(t, err)
	require.Empty(t, other, "another round's results are not this one's")
	_, recs, err := s.Load(ctx, "o-1")
	require.NoError(t, err)
	require.Len(t, recs, 3, "the results are items of their own: the order's state item holds none")
}

func documentOfDone(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	firstDone(t, s, "o-1", `{"held":2}`)
	st, err := claim(ctx, s, "o-1", step1, "agent-1", t0)
	require.NoError(t, err)
	doc, err := document(ctx, s, nil, st, json.RawMessage(`{"orderId":"o-1"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"held":2}`, string(doc.Results["s0"]))
	require.JSONEq(t, `{"orderId":"o-1"}`, string(doc.Order))

	submit(t, s, "o-2", 2)
	firstDone(t, s, "o-2", "")
	st, err = claim(ctx, s, "o-2", step1, "agent-1", t0)
	require.NoError(t, err)
	doc, err = document(ctx, s, nil, st, json.RawMessage(`{}`))
	require.NoError(t, err)
	require.Empty(t, doc.Results, "nothing answered: nothing read")
}

func eventCompletesWait(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitDef(t, s, "o-1", waiting())
	firstDone(t, s, "o-1", "")
	armed, events, err := s.Arm(ctx, "o-1", step1, workflow.KindEvent, t0.Add(time.Hour), t0, "")
	require.NoError(t, err)
	require.Empty(t, events)
	require.Equal(t, t0.Add(time.Hour), armed.DueAt, "parked until its timeout")
	require.Equal(t, t0, armed.Armed)
	_, _, err = s.Arm(ctx, "o-1", step1, workflow.KindEvent, t0.Add(time.Hour), t0, "")
	require.ErrorIs(t, err, statestore.ErrStale, "armed once")

	es, err := eventState(ctx, s, "o-1", step1, "approved")
	require.NoError(t, err)
	require.True(t, es.Waiting)
	f := statestore.Fence{Ref: step1, Round: 1, Parked: workflow.KindEvent, Event: "approved", EventID: "e-1"}
	state, err := completeParked(ctx, s, "o-1", f, 9, t0)
	require.NoError(t, err)
	require.Equal(t, workflow.Pending, state)
	_, err = completeParked(ctx, s, "o-1", f, 9, t0)
	require.ErrorIs(t, err, statestore.ErrStale, "taken once")
	task, recs, err := s.Load(ctx, "o-1")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"approved": "e-1"}, task.Events)
	require.Equal(t, workflow.Processed, recs[1].State)
	require.True(t, recs[1].HasResult)
	require.False(t, recs[2].DueAt.IsZero(), "the next step is ready")
	es, err = eventState(ctx, s, "o-1", step1, "approved")
	require.NoError(t, err)
	require.Equal(t, "e-1", es.Received, "a repeat is recognised by its eventId")
}

func earlyEventKept(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitDef(t, s, "o-1", waiting())
	es, err := eventState(ctx, s, "o-1", step1, "approved")
	require.NoError(t, err)
	require.False(t, es.Waiting, "the order has not reached the wait")
	require.NoError(t, s.KeepEvent(ctx, "o-1", step1, "approved", "e-7", "", t0))
	require.ErrorIs(t, s.KeepEvent(ctx, "o-1", step1, "approved", "e-8", "", t0), statestore.ErrStale, "one event kept per name")
	firstDone(t, s, "o-1", "")
	_, events, err := s.Arm(ctx, "o-1", step1, workflow.KindEvent, t0.Add(time.Hour), t0, "")
	require.NoError(t, err)
	require.Equal(t, "e-7", events["approved"], "arming sees the kept event")
	// Had the one who armed it died before delivering it, the Supervisor
	// finds it now, not at its timeout.
	due, err := Overdue(ctx, s, t0.Add(time.Minute), 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.True(t, due[0].EventKept)
	_, err = completeParked(ctx, s, "o-1", statestore.Fence{Ref: step1, Round: 1, Parked: workflow.KindEvent,
		Event: "approved", EventID: "e-8"}, 0, t0)
	require.ErrorIs(t, err, statestore.ErrStale, "another eventId than the one kept is refused")
	_, err = completeParked(ctx, s, "o-1", statestore.Fence{Ref: step1, Round: 1, Parked: workflow.KindEvent,
		Event: "approved", EventID: "e-7"}, 0, t0)
	require.NoError(t, err)
}

func keepEventConditional(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitDef(t, s, "o-1", waiting())
	es, err := eventState(ctx, s, "o-1", step1, "approved")
	require.NoError(t, err)
	require.False(t, es.Waiting)
	firstDone(t, s, "o-1", "") // the wait becomes ready after the event was read
	require.ErrorIs(t, s.KeepEvent(ctx, "o-1", step1, "approved", "e-1", "", t0), statestore.ErrStale,
		"read before the wait was ready: kept no more, delivered instead")
	es, err = eventState(ctx, s, "o-1", step1, "approved")
	require.NoError(t, err)
	require.True(t, es.Waiting)
}

func timerWakes(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitDef(t, s, "o-1", sleeping())
	firstDone(t, s, "o-1", "")
	wake := t0.Add(2 * time.Hour)
	_, _, err := s.Arm(ctx, "o-1", step1, workflow.KindTimer, wake, t0, "")
	require.NoError(t, err)
	timer := statestore.Fence{Ref: step1, Round: 1, Parked: workflow.KindTimer, Due: true}
	_, err = completeParked(ctx, s, "o-1", timer, 0, t0.Add(time.Hour))
	require.ErrorIs(t, err, statestore.ErrStale, "not before its time")
	due, err := Overdue(ctx, s, wake, 10)
	require.NoError(t, err)
	require.Len(t, due, 1, "the index says when to look: at its time")
	require.Equal(t, workflow.KindTimer, due[0].Kind)
	require.NoError(t, waited(ctx, s, due[0], false, true, wake.Add(time.Minute), wake))
	// its due moved a minute on: woken is what lets it through
	state, err := completeParked(ctx, s, "o-1", timer, 0, wake.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, workflow.Processed, state)
}

func asyncToken(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	st, err := s.Claim(ctx, statestore.Claim{OrderID: "o-1", Ref: step0, Agent: "svc", Owner: "a-1", Token: "n1", Now: t0})
	require.NoError(t, err)
	require.Equal(t, "n1", st.Token)
	withToken := func(attempt int, tok string) error {
		_, err := recordAttempt(ctx, s, outcome.Attempt{OrderID: "o-1", Ref: step0, Attempt: attempt, Round: 1, Token: tok, Now: t0.Add(time.Hour)})
		return err
	}
	require.ErrorIs(t, withToken(st.Attempt, "forged"), statestore.ErrStale, "another token")
	read, err := Overdue(ctx, s, t0.Add(time.Hour), 10)
	require.NoError(t, err)
	require.NoError(t, giveBack(ctx, s, read[0], 1, "no callback", t0.Add(time.Hour), t0.Add(2*time.Hour), t0.Add(time.Hour)))
	require.ErrorIs(t, withToken(st.Attempt, "n1"), statestore.ErrStale, "a recovered attempt's token is refused")
	st, err = s.Claim(ctx, statestore.Claim{OrderID: "o-1", Ref: step0, Agent: "svc", Owner: "a-2", Token: "n2", Now: t0.Add(time.Hour)})
	require.NoError(t, err)
	require.NoError(t, withToken(st.Attempt, "n2"))
	require.ErrorIs(t, withToken(st.Attempt, "n2"), statestore.ErrStale, "single-use")
}

func definitionStored(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	want := waiting()
	want.Version = "v-wait"
	submitDef(t, s, "o-1", want)
	got, err := s.Definition(ctx, "o-1")
	require.NoError(t, err)
	require.Equal(t, want.Steps[1].Wait, got.Steps[1].Wait)
	require.Equal(t, want.Steps[2].Input, got.Steps[2].Input)
	in, err := got.Steps[2].InputFor(workflow.Document{Results: map[string]json.RawMessage{"approve": json.RawMessage(`{"cents":5}`)}})
	require.NoError(t, err)
	require.JSONEq(t, `{"amount":5}`, string(in), "read back, its expressions compile again")
}

func scansSeeOrders(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitDef(t, s, "o-1", waiting())
	firstDone(t, s, "o-1", `{"x":1}`)
	tasks, _, err := s.ScanAll(ctx)
	require.NoError(t, err)
	require.Len(t, tasks, 1, "one order: its result and its workflow's definition are not orders")
	c, err := s.Census(ctx, t0)
	require.NoError(t, err)
	require.Equal(t, 1, c.ByState[workflow.Pending])
	list, _, err := s.SearchTasks(ctx, statestore.TaskFilter{}, 10, "")
	require.NoError(t, err)
	require.Len(t, list, 1)
}

// An event sent right after its order, while the order's own steps are
// claimed and completed around it: whatever lands between its read and its
// write, it is kept (or, the wait ready, delivered) at once, never refused
// for a race (a keep is conditioned on the wait not being ready, not on the
// order's version), and the order goes on to its end with its data.
func eventAmidWrites(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	d := waiting()
	d.Steps[2].Input = ""
	d.Steps = append(d.Steps, def(5).Steps[3:]...) // s3, s4 need nothing but the step before
	d.Steps[3].NoNeeds = true                      // s3 runs beside the wait, its writes racing the event
	for round := range 5 {
		id := fmt.Sprintf("o-ev-%d", round)
		submitDef(t, s, id, d)
		var wg sync.WaitGroup
		wg.Go(func() {
			for _, r := range []workflow.Ref{{Index: 3}, {Index: 0}} {
				run(t, s, id, r, t0)
			}
		})
		var got outcome.Delivered
		wg.Go(func() {
			var err error
			got, err = outcome.Recorder{Store: s}.Event(ctx, d, outcome.Event{OrderID: id, Name: "approved", EventID: "e-1",
				Data: json.RawMessage(`{"cents":5}`), Now: t0})
			require.NoError(t, err, "never refused for a race")
		})
		wg.Wait()
		if got.Kept { // the order reaches its wait after the event: arming it takes the kept event
			_, events, err := s.Arm(ctx, id, step1, workflow.KindEvent, t0.Add(time.Hour), t0, "")
			require.NoError(t, err)
			require.Equal(t, "e-1", events["approved"])
			_, err = outcome.Recorder{Store: s}.Wake(ctx, d, id, step1, t0)
			require.NoError(t, err)
		}
		_, recs := stateOf(t, s, id)
		require.Equal(t, workflow.Processed, recs[step1].State, "the wait took the event")
		require.False(t, recs[step2].DueAt.IsZero(), "and the step after it is ready")
	}
}

// stateOf is order id's task and records, by ref.
func stateOf(t *testing.T, s *statestore.Store, id string) (statestore.Task, map[workflow.Ref]statestore.Step) {
	t.Helper()
	task, recs, err := s.Load(context.Background(), id)
	require.NoError(t, err)
	m := map[workflow.Ref]statestore.Step{}
	for _, r := range recs {
		m[r.Ref] = r
	}
	return task, m
}

// lateEvent: an event after its wait's timeout is refused at once with the
// reason (not retried until the Supervisor's sweep fails the wait), even
// before the Supervisor has looked; just before the timeout, it is taken.
func lateEvent(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	for _, id := range []string{"o-late", "o-just"} {
		submitDef(t, s, id, waiting())
		firstDone(t, s, id, "")
		_, _, err := s.Arm(ctx, id, step1, workflow.KindEvent, t0.Add(time.Hour), t0, "")
		require.NoError(t, err)
	}
	ev := func(id string, at time.Time) outcome.Event {
		return outcome.Event{OrderID: id, Name: "approved", EventID: "e-1", Data: json.RawMessage(`{"cents":5}`), Now: at}
	}
	_, err := outcome.Recorder{Store: s}.Event(ctx, waiting(), ev("o-late", t0.Add(time.Hour)))
	require.True(t, outcome.IsRefused(err), "%v", err)
	require.EqualError(t, err, `event "approved" for order o-late is too late: step approve's wait ended at `+
		t0.Add(time.Hour).UTC().Format(time.RFC3339))
	_, recs := stateOf(t, s, "o-late")
	require.Equal(t, workflow.Pending, recs[step1].State, "the Supervisor fails it at its sweep")
	d, err := outcome.Recorder{Store: s}.Event(ctx, waiting(), ev("o-just", t0.Add(time.Hour-time.Millisecond)))
	require.NoError(t, err)
	require.Equal(t, workflow.Pending, d.Recorded.State)
	_, recs = stateOf(t, s, "o-just")
	require.Equal(t, workflow.Processed, recs[step1].State)
}

// eventState reads where the order stands for an event of the wait at r,
// as the Scheduler does: one read, then the snapshot's answer.
func eventState(ctx context.Context, s *statestore.Store, orderID string, r workflow.Ref, event string) (statestore.EventState, error) {
	snap, err := s.Read(ctx, orderID)
	if err != nil {
		return statestore.EventState{}, err
	}
	return snap.EventState(r, event)
}
