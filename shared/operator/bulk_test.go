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
