package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	c := done(id, step0, st.Attempt, &step1, "")
	if result != "" {
		require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: id, Ref: step0, Name: "s0", Round: 1, Attempt: st.Attempt,
			JSON: json.RawMessage(result), Now: t0}))
		c.ResultBytes = len(result)
	}
	require.NoError(t, errOf(s.Complete(ctx, c)))
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
	doc, err := s.Document(ctx, st, json.RawMessage(`{"orderId":"o-1"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"held":2}`, string(doc.Results["s0"]))
	require.JSONEq(t, `{"orderId":"o-1"}`, string(doc.Order))

	submit(t, s, "o-2", 2)
	firstDone(t, s, "o-2", "")
	st, err = claim(ctx, s, "o-2", step1, "agent-1", t0)
	require.NoError(t, err)
	doc, err = s.Document(ctx, st, json.RawMessage(`{}`))
	require.NoError(t, err)
	require.Empty(t, doc.Results, "nothing answered: nothing read")
}

func eventCompletesWait(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitDef(t, s, "o-1", waiting())
	firstDone(t, s, "o-1", "")
	armed, events, err := s.Arm(ctx, "o-1", step1, workflow.KindEvent, t0.Add(time.Hour), t0)
	require.NoError(t, err)
	require.Empty(t, events)
	require.Equal(t, t0.Add(time.Hour), armed.DueAt, "parked until its timeout")
	require.Equal(t, t0, armed.Armed)
	_, _, err = s.Arm(ctx, "o-1", step1, workflow.KindEvent, t0.Add(time.Hour), t0)
	require.ErrorIs(t, err, statestore.ErrStale, "armed once")

	es, err := s.EventState(ctx, "o-1", step1, "approved")
	require.NoError(t, err)
	require.True(t, es.Waiting)
	c := statestore.Completion{OrderID: "o-1", Ref: step1, Round: 1, Parked: workflow.KindEvent, Event: "approved",
		EventID: "e-1", ResultBytes: 9, Next: &step2, NextDueAt: t0.Add(time.Minute), Now: t0}
	d, err := s.Finish(ctx, c)
	require.NoError(t, err)
	require.Equal(t, workflow.Pending, d.State)
	_, err = s.Finish(ctx, c)
	require.ErrorIs(t, err, statestore.ErrStale, "taken once")
	task, recs, err := s.Load(ctx, "o-1")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"approved": "e-1"}, task.Events)
	require.Equal(t, workflow.Processed, recs[1].State)
	require.True(t, recs[1].HasResult)
	require.False(t, recs[2].DueAt.IsZero(), "the next step is ready")
	es, err = s.EventState(ctx, "o-1", step1, "approved")
	require.NoError(t, err)
	require.Equal(t, "e-1", es.Received, "a repeat is recognised by its eventId")
}

func earlyEventKept(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitDef(t, s, "o-1", waiting())
	es, err := s.EventState(ctx, "o-1", step1, "approved")
	require.NoError(t, err)
	require.False(t, es.Waiting, "the order has not reached the wait")
	require.NoError(t, s.KeepEvent(ctx, "o-1", es, "approved", "e-7", t0))
	firstDone(t, s, "o-1", "")
	_, events, err := s.Arm(ctx, "o-1", step1, workflow.KindEvent, t0.Add(time.Hour), t0)
	require.NoError(t, err)
	require.Equal(t, "e-7", events["approved"], "arming sees the kept event")
	// Had the one who armed it died before delivering it, the Supervisor
	// finds it now, not at its timeout.
	due, err := s.Overdue(ctx, t0.Add(time.Minute), 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.True(t, due[0].EventKept)
	_, err = s.Finish(ctx, statestore.Completion{OrderID: "o-1", Ref: step1, Round: 1, Parked: workflow.KindEvent,
		Event: "approved", EventID: "e-8", Next: &step2, NextDueAt: t0, Now: t0})
	require.ErrorIs(t, err, statestore.ErrStale, "another eventId than the one kept is refused")
	_, err = s.Finish(ctx, statestore.Completion{OrderID: "o-1", Ref: step1, Round: 1, Parked: workflow.KindEvent,
		Event: "approved", EventID: "e-7", Next: &step2, NextDueAt: t0, Now: t0})
	require.NoError(t, err)
}

func keepEventConditional(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitDef(t, s, "o-1", waiting())
	es, err := s.EventState(ctx, "o-1", step1, "approved")
	require.NoError(t, err)
	firstDone(t, s, "o-1", "") // the wait becomes ready after the event was read
	require.ErrorIs(t, s.KeepEvent(ctx, "o-1", es, "approved", "e-1", t0), statestore.ErrStale,
		"read before the wait was ready: kept no more, delivered instead")
	es, err = s.EventState(ctx, "o-1", step1, "approved")
	require.NoError(t, err)
	require.True(t, es.Waiting)
}

func timerWakes(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submitDef(t, s, "o-1", sleeping())
	firstDone(t, s, "o-1", "")
	wake := t0.Add(2 * time.Hour)
	_, _, err := s.Arm(ctx, "o-1", step1, workflow.KindTimer, wake, t0)
	require.NoError(t, err)
	early := statestore.Completion{OrderID: "o-1", Ref: step1, Round: 1, Parked: workflow.KindTimer, Due: true,
		End: workflow.Processed, Now: t0.Add(time.Hour)}
	_, err = s.Finish(ctx, early)
	require.ErrorIs(t, err, statestore.ErrStale, "not before its time")
	due, err := s.Overdue(ctx, wake, 10)
	require.NoError(t, err)
	require.Len(t, due, 1, "the index says when to look: at its time")
	require.Equal(t, workflow.KindTimer, due[0].Kind)
	require.NoError(t, s.Waited(ctx, statestore.Wait{Read: due[0], Woken: true, Due: wake.Add(time.Minute), Now: wake}))
	late := early
	late.Now = wake.Add(time.Second) // its due moved a minute on: woken is what lets it through
	d, err := s.Finish(ctx, late)
	require.NoError(t, err)
	require.Equal(t, workflow.Processed, d.State)
}

func asyncToken(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	st, err := s.Claim(ctx, statestore.Claim{OrderID: "o-1", Ref: step0, Agent: "svc", Owner: "a-1", Token: "n1", Now: t0})
	require.NoError(t, err)
	require.Equal(t, "n1", st.Token)
	c := done("o-1", step0, st.Attempt, &step1, "")
	c.Token = "forged"
	_, err = s.Finish(ctx, c)
	require.ErrorIs(t, err, statestore.ErrStale, "another token")
	read, err := s.Overdue(ctx, t0.Add(time.Hour), 10)
	require.NoError(t, err)
	require.NoError(t, s.Requeue(ctx, statestore.Retry{Read: read[0], FailureCount: 1, Reason: "no callback",
		ReadyAt: t0.Add(time.Hour), Due: t0.Add(2 * time.Hour), Now: t0.Add(time.Hour)}))
	c.Token = "n1"
	_, err = s.Finish(ctx, c)
	require.ErrorIs(t, err, statestore.ErrStale, "a recovered attempt's token is refused")
	st, err = s.Claim(ctx, statestore.Claim{OrderID: "o-1", Ref: step0, Agent: "svc", Owner: "a-2", Token: "n2", Now: t0.Add(time.Hour)})
	require.NoError(t, err)
	c = done("o-1", step0, st.Attempt, &step1, "")
	c.Token = "n2"
	_, err = s.Finish(ctx, c)
	require.NoError(t, err)
	_, err = s.Finish(ctx, c)
	require.ErrorIs(t, err, statestore.ErrStale, "single-use")
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
	list, _, err := s.ListTasks(ctx, "", 10, "")
	require.NoError(t, err)
	require.Len(t, list, 1)
}
