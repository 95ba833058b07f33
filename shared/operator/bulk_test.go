package operator

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// A bulk action's name in each order's history says who, which action,
// when it started (to the minute, UTC) and how many orders it listed.
func TestABulkActionIsNamedByWhoWhatWhenAndHowMany(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 7, 19, 0, 59, 0, time.FixedZone("CET", 3600))
	require.Equal(t, "sasctl (ana) retry (bulk 2026-12-07T18:00Z, 3,000 orders)", BulkBy("sasctl (ana)", "retry", at, 3000))
	require.Equal(t, "ops undo (bulk 2026-12-07T18:00Z, 1 order)", BulkBy("ops", "undo", at, 1))
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		require.Equal(t, want, thousands(n))
	}
}

// An action is built from its name (sasctl's command, the console's form,
// the client's method) with what it takes; an unknown name, or a skip's
// result that is not JSON, is refused before any order is listed; a query
// of the action lists its own state unless it names one; a dry run's
// report says which orders its confirmation acts on.
func TestAnActionIsBuiltFromItsName(t *testing.T) {
	t.Parallel()
	o := &Operator{}
	for _, name := range ActionNames {
		a, err := o.ActionOf(ActionSpec{Name: name, Result: json.RawMessage(`{"charged":"by phone"}`)})
		require.NoError(t, err, name)
		require.Equal(t, name, a.Name)
		require.NotNil(t, a.Fits, name)
		require.True(t, KnownAction(name))
	}
	_, err := o.ActionOf(ActionSpec{Name: "explode"})
	require.EqualError(t, err, `no action "explode": the actions are retry, skip, undo, cancel, resubmit`)
	require.False(t, KnownAction("explode"))
	_, err = o.ActionOf(ActionSpec{Name: "skip", Result: json.RawMessage(`{nope`)})
	var held *workflow.HeldError
	require.ErrorAs(t, err, &held)
	require.Contains(t, err.Error(), ResultNotJSON)
	for name, st := range map[string]workflow.State{"retry": workflow.Held, "skip": workflow.Held, "undo": workflow.Held,
		"resubmit": workflow.Failed, "cancel": ""} {
		require.Equal(t, st, ActionSpec{Name: name}.DefaultState(), name)
	}
	rep := BulkReport{Orders: []BulkResult{{OrderID: "o-2", Outcome: BulkWould}, {OrderID: "o-1", Outcome: BulkRefused},
		{OrderID: "o-3", Outcome: BulkWould}}}
	require.Equal(t, []string{"o-2", "o-3"}, rep.Would())
}

// A report adds up (done, done already, refused, changed and left make the
// orders listed; each order once; a reason per refusal and change), and
// each way one may not is named.
func TestABulkReportThatDoesNotAddUpSaysHow(t *testing.T) {
	t.Parallel()
	good := func() BulkReport {
		return BulkReport{Action: "cancel", Listed: 5, Done: 1, Already: 1, Refused: 1, Changed: 1, Left: 1,
			Why: map[string]int{"it ended Processed": 1, "it ended Failed": 1},
			Orders: []BulkResult{{OrderID: "o-1", Outcome: BulkDone}, {OrderID: "o-2", Outcome: BulkAlready},
				{OrderID: "o-3", Outcome: BulkRefused, Why: "it ended Processed"}, {OrderID: "o-4", Outcome: BulkChanged, Why: "it ended Failed"}}}
	}
	require.Empty(t, good().Check())

	miscounted := good()
	miscounted.Done = 2
	require.Equal(t, []string{"2 done, 1 done already, 1 refused, 1 changed and 1 left make 6, not the 5 listed"}, miscounted.Check())

	twice := good()
	twice.Orders[1].OrderID = "o-1"
	require.Equal(t, []string{"order o-1 acted on twice"}, twice.Check())

	unreported := good()
	unreported.Orders, unreported.Why = unreported.Orders[:2], map[string]int{}
	require.Equal(t, []string{"2 orders reported, 5 listed and 1 left", "0 reasons counted for 1 refused and 1 changed"}, unreported.Check())
}
