package operator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
