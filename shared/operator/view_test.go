package operator

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

func TestDurationsAreTextAndTimesAbsentWhenUnset(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Record{Name: "charge", Kind: "agent", State: workflow.Pending, Step: statestore.Step{Rec: workflow.Rec{Action: workflow.Action{Timeout: 90 * time.Second}}}})
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"charge","index":0,"undo":false,"kind":"agent","state":"Pending","attempt":0,"failures":0,
		"maxFailures":0,"timeout":"1m30s"}`, string(b))
	var back Record
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, 90*time.Second, back.Timeout)
	require.Error(t, json.Unmarshal([]byte(`{"timeout": 20000000000}`), &back), "a duration is text")

	at := time.Date(2026, 11, 25, 8, 0, 0, 0, time.FixedZone("CET", 3600))
	b, err = json.Marshal(OrderOf(statestore.Task{OrderID: "o-1", State: workflow.Pending, Round: 1, CreatedAt: at}))
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"o-1","workflow":"","state":"Pending","round":1,"steps":0,"createdAt":"2026-11-25T07:00:00Z"}`,
		string(b), "UTC, and no cancelledAt or completedAt that never happened")
}

// In an ended order, a Pending record never runs: an undo action with
// nothing to undo is NotNeeded, a step never reached Skipped; what a
// resubmission of a CompensationFailed order runs stays Pending.
func TestRecordsThatNeverRunSaySo(t *testing.T) {
	t.Parallel()
	done := map[workflow.Ref]workflow.State{{Index: 0}: workflow.Processed, {Index: 1}: workflow.Error, {Index: 2}: workflow.Pending}
	pending := func(i int, undo bool) statestore.Step {
		return statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: i, Undo: undo}, State: workflow.Pending}}
	}
	for _, c := range []struct {
		task workflow.State
		rec  statestore.Step
		want workflow.State
	}{
		{workflow.Processed, pending(0, true), NotNeeded},
		{workflow.Pending, pending(0, true), workflow.Pending},
		{workflow.Compensating, pending(0, true), workflow.Pending},
		{workflow.Failed, pending(1, true), NotNeeded},
		{workflow.Failed, pending(2, false), Skipped},
		{workflow.Cancelled, pending(2, false), Skipped},
		{workflow.Cancelled, pending(2, true), NotNeeded},
		{workflow.CompensationFailed, pending(0, true), workflow.Pending},
		{workflow.CompensationFailed, pending(1, true), NotNeeded},
		{workflow.CompensationFailed, pending(2, false), workflow.Pending},
		{workflow.Failed, statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: 0, Undo: true}, State: workflow.Processed}}, workflow.Processed},
	} {
		require.Equal(t, c.want, shownState(c.rec, c.task, done), "%s order, record %+v", c.task, c.rec)
	}
}

func TestWhatAWaitingRecordWaitsFor(t *testing.T) {
	t.Parallel()
	armed, due := time.UnixMilli(1_000_000), time.UnixMilli(2_000_000)
	wait := statestore.Step{Rec: workflow.Rec{Kind: workflow.KindEvent, State: workflow.Pending},
		Wait:   statestore.Wait{DueAt: due},
		Parked: statestore.Parked{Event: "approved", Armed: armed}}
	require.Equal(t, &Waiting{For: "event", Event: "approved", Since: armed.UTC(), Until: due.UTC()}, waitingOf(wait))
	woken := wait
	woken.Kind, woken.Event, woken.Woken = workflow.KindTimer, "", due
	require.Nil(t, waitingOf(woken), "a timer woken waits no more")
	ready := wait
	ready.Armed = time.Time{}
	require.Nil(t, waitingOf(ready), "not armed yet: made ready, not waiting")
	async := statestore.Step{Rec: workflow.Rec{Action: workflow.Action{Async: true}, State: workflow.Processing},
		AtWork: statestore.AtWork{ClaimedAt: armed, CompleteBy: due}}
	require.Equal(t, &Waiting{For: "callback", Since: armed.UTC(), Until: due.UTC()}, waitingOf(async))
	require.Equal(t, `event "approved"`, waitingOf(wait).What())
	require.Equal(t, "its service's callback", waitingOf(async).What())
	require.Equal(t, Event{At: armed.UTC(), Record: "await", What: `waits for event "approved" until 1970-01-01T00:33:20Z`},
		waitEvent("await", *waitingOf(wait)))
}

func TestClockSaysTheDayOfAnotherDay(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	require.Equal(t, "-", Clock(time.Time{}, now))
	require.Equal(t, "09:30:00.250", Clock(now.Add(90*time.Minute+250*time.Millisecond), now))
	require.Equal(t, "11-28 08:00:00", Clock(now.Add(72*time.Hour), now))
	require.Equal(t, "11-24 23:00:00", Clock(time.Date(2026, 11, 25, 0, 0, 0, 0, time.FixedZone("CET", 3600)), now))
}

// A record its agent's flow control holds is shown waiting, for what and
// how often, never as an error.
func TestARecordHeldByItsFlowControlIsShownWaiting(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	st := statestore.Step{Rec: workflow.Rec{Action: workflow.Action{Name: "ocr"}, State: workflow.Pending, Attempt: 19},
		Wait: statestore.Wait{DueAt: at.Add(time.Minute), ReadyAt: at, FlowWaits: 18, FlowWhy: `waiting for a slot of key "c-1"`}}
	r := recordOf(st, workflow.Pending, nil)
	require.Empty(t, r.LastError)
	require.Equal(t, 18, r.FlowWaits, "of its 19 attempts, 18 called nothing")
	require.Equal(t, &Waiting{For: "flow", Why: `waiting for a slot of key "c-1"`, Times: 18, Since: at}, r.Waiting)
	require.Contains(t, r.Waiting.What(), `its agent's flow control (waiting for a slot of key "c-1"; given back 18 time(s))`)
	st.State, st.DueAt = workflow.Processing, time.Time{}
	require.Nil(t, recordOf(st, workflow.Pending, nil).Waiting, "claimed: it waits no more")
}

// A record's JSON (the view output.schema.json describes) reads back as
// the record it was written from: its action's name without its item, its
// kind and state as shown.
func TestARecordsJSONReadsBackAsTheRecord(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	st := statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: 4, Item: 2}, State: workflow.Error, Attempt: 2,
		FailureCount: 1, Cause: workflow.TimedOut, LastError: "no answer",
		Action: workflow.Action{Name: "pack-item", Agent: "inventory", Timeout: 20 * time.Second, MaxFailures: 3}},
		AtWork: statestore.AtWork{ClaimedAt: at, CompleteBy: at.Add(20 * time.Second)},
		Wait:   statestore.Wait{ReadyAt: at, DueAt: at.Add(time.Minute), FlowWaits: 1}}
	st.DoneAt = at.Add(21 * time.Second)
	r := recordOf(st, workflow.Compensating, nil)
	require.Equal(t, "pack-item#2", r.Name)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	requireSchema(t, "record", b)
	var back Record
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, r, back)
}
