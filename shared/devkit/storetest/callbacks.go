package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// callbackTests are what arrives twice, early, late or forged at a parked or
// async record, taken by outcome.Recorder over the store: each is fenced by
// what the record says, never by what the message claims.
var callbackTests = map[string]func(*testing.T, *statestore.Store){
	"AForgedCallbackWritesNoResult":           forgedCallback,
	"ADuplicateCallbackKeepsTheFirstResult":   duplicateCallback,
	"AnOversizedCallbackFailsItsStepForGood":  oversizedCallback,
	"ARepeatedEventIsANoOpAfterTheOrderEnded": repeatAfterEnd,
	"CancelAfterAWaitRanStopsTheNextStep":     cancelAfterWait,
	"ArmingATimerPullsTheOrdersLookIn":        armPullsIn,
	"AnAbandonedAsyncAttemptIsDueAtOnce":      abandonAsync,
	"EachItemsCallbackNamesItsItem":           asyncItems,
}

// asyncClaimed submits a two-step order and claims its first step as an
// async attempt with nonce "n1"; it returns the attempt's token.
func asyncClaimed(t *testing.T, s *statestore.Store, id string) outcome.Token {
	t.Helper()
	submit(t, s, id, 2)
	st, err := s.Claim(context.Background(), statestore.Claim{OrderID: id, Ref: step0, Agent: "svc", Owner: "a-1", Token: "n1", Now: t0})
	require.NoError(t, err)
	return outcome.Token{OrderID: id, Ref: step0, Round: 1, Attempt: st.Attempt, Nonce: "n1"}
}

func callback(tok outcome.Token, data string) outcome.Event {
	return outcome.Event{OrderID: tok.OrderID, Token: tok.String(), Data: json.RawMessage(data), Now: t0}
}

// A token naming an attempt the record never ran (attempt 999, any nonce)
// is refused before it writes anything: the current attempt's result and
// outcome still go through.
func forgedCallback(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	tok := asyncClaimed(t, s, "o-1")
	rec := outcome.Recorder{Store: s}
	forged := tok
	forged.Attempt, forged.Nonce = 999, "guess"
	_, err := rec.Event(ctx, def(2), callback(forged, `{"forged":true}`))
	require.True(t, outcome.IsRefused(err), "%v", err)
	d, err := rec.Event(ctx, def(2), callback(tok, `{"real":true}`))
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{step1}, d.Recorded.Ready)
	got, err := s.Results(ctx, "o-1", 1)
	require.NoError(t, err)
	require.JSONEq(t, `{"real":true}`, string(got[step0].JSON))
}

// A second callback of a used token (a webhook retried, a redelivery) is a
// no-op: the result the later steps read does not change.
func duplicateCallback(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	tok := asyncClaimed(t, s, "o-1")
	rec := outcome.Recorder{Store: s}
	_, err := rec.Event(ctx, def(2), callback(tok, `{"chargeId":"A"}`))
	require.NoError(t, err)
	again, err := rec.Event(ctx, def(2), callback(tok, `{"chargeId":"B"}`))
	require.NoError(t, err, "a repeat is no error")
	require.True(t, again.Repeat)
	got, err := s.Results(ctx, "o-1", 1)
	require.NoError(t, err)
	require.JSONEq(t, `{"chargeId":"A"}`, string(got[step0].JSON))
	// The same attempt writing its result twice keeps the first.
	require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: "o-1", Ref: step0, Name: "s0", Round: 1, Attempt: tok.Attempt,
		JSON: json.RawMessage(`{"chargeId":"C"}`), Now: t0}))
	got, err = s.Results(ctx, "o-1", 1)
	require.NoError(t, err)
	require.JSONEq(t, `{"chargeId":"A"}`, string(got[step0].JSON))
}

// An async service answering more than the workflow keeps fails the step
// for good, naming the size, and its own undo runs first.
func oversizedCallback(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	tok := asyncClaimed(t, s, "o-1")
	d := def(2)
	d.ResultLimit = 16
	got, err := outcome.Recorder{Store: s}.Event(ctx, d, callback(tok, `{"chargeId":"far too long an answer"}`))
	require.NoError(t, err)
	require.Equal(t, workflow.Compensating, got.Recorded.State)
	require.Equal(t, []workflow.Ref{undo0}, got.Recorded.Ready, "its effect happened: its own undo runs")
	_, recs := state(t, s)
	require.Equal(t, workflow.Error, recs[step0].State)
	require.Equal(t, workflow.Oversized, recs[step0].Cause)
	require.Contains(t, recs[step0].LastError, "answered 37 bytes, over workflow test's 16-byte result limit")
}

// The event that completed a wait, sent again after the order ended, is a
// no-op, not a rejection; another eventId is refused.
func repeatAfterEnd(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	d := def(2)
	d.Name = "waitlast"
	d.Steps[0].Undo = nil
	d.Steps[1] = workflow.Step{Action: workflow.Action{Name: "approve", MaxFailures: 1, Timeout: time.Hour},
		Wait: &workflow.Wait{Event: "approved", Timeout: time.Hour}}
	submitDef(t, s, "o-1", d)
	firstDone(t, s, "o-1", "")
	_, _, err := s.Arm(ctx, "o-1", step1, workflow.KindEvent, t0.Add(time.Hour), t0, "")
	require.NoError(t, err)
	rec := outcome.Recorder{Store: s}
	ev := outcome.Event{OrderID: "o-1", Name: "approved", EventID: "e-1", Data: json.RawMessage(`{"ok":true}`), Now: t0}
	got, err := rec.Event(ctx, d, ev)
	require.NoError(t, err)
	require.Equal(t, workflow.Processed, got.Recorded.State)
	again, err := rec.Event(ctx, d, ev)
	require.NoError(t, err)
	require.True(t, again.Repeat)
	ev.EventID = "e-2"
	_, err = rec.Event(ctx, d, ev)
	require.True(t, outcome.IsRefused(err))
	require.ErrorContains(t, err, "order o-1 is Processed: it waits for nothing")
}

// A wait that has run did nothing outside: the order can still be
// cancelled, its next step stopped and what completed undone.
func cancelAfterWait(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	d := def(3)
	d.Name = "waitmid"
	d.Steps[1] = workflow.Step{Action: workflow.Action{Name: "approve", MaxFailures: 1, Timeout: time.Hour},
		Wait: &workflow.Wait{Event: "approved", Timeout: time.Hour}}
	submitDef(t, s, "o-1", d)
	firstDone(t, s, "o-1", "")
	_, _, err := s.Arm(ctx, "o-1", step1, workflow.KindEvent, t0.Add(time.Hour), t0, "")
	require.NoError(t, err)
	_, err = outcome.Recorder{Store: s}.Event(ctx, d, outcome.Event{OrderID: "o-1", Name: "approved", EventID: "e-1", Now: t0})
	require.NoError(t, err)
	res, err := cancel(ctx, s, cancelReq("o-1", t0))
	require.NoError(t, err)
	require.Equal(t, workflow.CancelStops, res.Verdict)
	require.Equal(t, "s2", res.Stopped)
	require.Equal(t, &undo0, res.Undo, "the reservation is undone")
}

// A timer due before the order's next look pulls the look in: it wakes at
// its time, not at the look the order had.
func armPullsIn(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	d := sleeping()
	d.Steps[1].Sleep.For = 5 * time.Second
	submitDef(t, s, "o-1", d) // first look: at the first step's 10 s timeout
	firstDone(t, s, "o-1", "")
	require.Empty(t, overdueAt(t, s, t0.Add(6*time.Second)), "nothing due before the timer is armed")
	_, _, err := s.Arm(ctx, "o-1", step1, workflow.KindTimer, t0.Add(5*time.Second), t0, "")
	require.NoError(t, err)
	due := overdueAt(t, s, t0.Add(6*time.Second))
	require.Len(t, due, 1, "the timer's time pulled the look in")
	require.Equal(t, workflow.KindTimer, due[0].Kind)
}

// An async attempt its Agent abandons is due at once, for the Supervisor to
// recover; only the attempt's own Agent (its nonce) can abandon it.
func abandonAsync(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 2)
	st, err := s.Claim(ctx, statestore.Claim{OrderID: "o-1", Ref: step0, Agent: "svc", Owner: "a-1", Token: "n1", Now: t0})
	require.NoError(t, err)
	require.Empty(t, overdueAt(t, s, t0.Add(time.Second)), "its CompleteBy is 10 s away")
	forged := st
	forged.Token = "n2"
	require.ErrorIs(t, s.Abandon(ctx, forged, "no", t0), statestore.ErrStale)
	require.NoError(t, s.Abandon(ctx, st, "its service did not accept the call", t0))
	due := overdueAt(t, s, t0.Add(time.Second))
	require.Len(t, due, 1)
	require.Equal(t, t0, due[0].CompleteBy)
	require.Contains(t, due[0].Incidents[0].What, "attempt 1 abandoned by its agent: its service did not accept the call")
	require.NoError(t, giveBack(ctx, s, due[0], 1, "abandoned", t0, t0.Add(time.Minute), t0))
	require.ErrorIs(t, s.Abandon(ctx, st, "again", t0), statestore.ErrStale, "once recovered, its token is refused")
}

// An async step that runs per item: each item's attempt has a token that
// names its item, and each callback records its own item; the last makes
// the next step ready.
func asyncItems(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	d := def(2)
	d.Name = "asyncitems"
	d.Steps[0].ForEach, d.Steps[0].Async = "items", true
	_, err := s.Submit(ctx, statestore.Submission{OrderID: "o-1", Order: `{"orderId":"o-1","items":[1,2]}`, Workflow: d,
		Items: map[int]int{0: 2}, Now: t0})
	require.NoError(t, err)
	var toks []outcome.Token
	for k := 1; k <= 2; k++ {
		r := workflow.Ref{Index: 0, Item: k}
		st, err := s.Claim(ctx, statestore.Claim{OrderID: "o-1", Ref: r, Agent: "svc", Owner: "a-1", Token: fmt.Sprintf("n%d", k), Now: t0})
		require.NoError(t, err)
		tok := outcome.Token{OrderID: "o-1", Ref: r, Round: 1, Attempt: st.Attempt, Nonce: fmt.Sprintf("n%d", k)}
		parsed, err := outcome.ParseToken(tok.String())
		require.NoError(t, err)
		require.Equal(t, tok, parsed, "the token names its item")
		toks = append(toks, tok)
	}
	rec := outcome.Recorder{Store: s}
	got, err := rec.Event(ctx, d, callback(toks[1], `{"n":2}`))
	require.NoError(t, err)
	require.Equal(t, workflow.Ref{Index: 0, Item: 2}, got.Ref)
	require.Empty(t, got.Recorded.Ready, "one item of two")
	got, err = rec.Event(ctx, d, callback(toks[0], `{"n":1}`))
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{step1}, got.Recorded.Ready, "the last item's callback makes the next step ready")
	results, err := s.Results(ctx, "o-1", 1)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":1}`, string(results[workflow.Ref{Index: 0, Item: 1}].JSON))
	require.JSONEq(t, `{"n":2}`, string(results[workflow.Ref{Index: 0, Item: 2}].JSON))
}
