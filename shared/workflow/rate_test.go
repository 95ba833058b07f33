package workflow_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// rateOf is the rate limit a file declares as limit (and burst, if not 0).
func rateOf(t *testing.T, limit string, burst int) workflow.Rate {
	t.Helper()
	text := fmt.Sprintf("name: r\nagents: {a: {endpoint: 'http://a', rateLimit: %s", limit)
	if burst != 0 {
		text += fmt.Sprintf(", rateBurst: %d", burst)
	}
	text += "}}\nsteps: [{name: s, agent: a, timeout: 1s}]\n"
	d, err := workflow.ParseFile("r.yaml", []byte(text), workflow.Options{})
	require.NoError(t, err, limit)
	require.NoError(t, schema(t).Validate(instance(t, []byte(text))), limit)
	return d.AgentSpecs["a"].RateLimit
}

// A rate's schedule is exact at both ends of the range a file may declare
// (1/m to 99,999/s, bursts to 10,000): N turns take Per to the
// nanosecond, from any turn on, so the schedule never drifts and no window
// of Per holds an extra turn; each turn's own time is rounded up, and a
// burst's tolerance down. (Kept in whole milliseconds, 99,999/s was an
// interval of 0 and 3/s one of 333 ms: four turns in a second.)
func TestARatesScheduleIsExactAtBothEndsOfItsRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		limit     string
		burst     int
		per       time.Duration
		calls     int
		first     time.Duration // Span(1): one interval, rounded up
		tolerance time.Duration
		meaning   string
	}{
		{"1/m", 0, time.Minute, 1, time.Minute, 0, "at most 1 call in any minute"},
		{"1/m", workflow.MaxBurst, time.Minute, 1, time.Minute, 9999 * time.Minute, "at most 10000 calls in any minute"},
		{"3/s", 1, time.Second, 3, 333_333_334, 0, "at most 3 calls in any second"},
		{"99999/s", 0, time.Second, 99_999, 10_001, 0, "at most 99999 calls in any second"},
		{"99999/s", workflow.MaxBurst, time.Second, 99_999, 10_001, 99_990_999, "at most 109998 calls in any second"},
		{"99999/m", 0, time.Minute, 99_999, 600_007, 0, "at most 99999 calls in any minute"},
	} {
		r := rateOf(t, c.limit, c.burst)
		name := fmt.Sprintf("%s burst %d", c.limit, c.burst)
		require.Equal(t, c.per, r.Per, name)
		require.Equal(t, c.calls, r.Calls, name)
		require.Equal(t, c.first, r.Span(1), name)
		require.Equal(t, c.tolerance, r.Tolerance(), name)
		require.Equal(t, c.meaning, r.Meaning(), name)
		require.Equal(t, time.Duration(0), r.Span(0), name)
		n := int64(r.Calls)
		for _, i := range []int64{0, 1, 2, n - 1, n, n + 1, 7 * n, 7*n + 3, 1_000_003 * n} {
			require.Equal(t, r.Per, r.Span(i+n)-r.Span(i), "%s: turns %d and %d exactly a period apart", name, i, i+n)
			require.GreaterOrEqual(t, r.Span(i+1)-r.Span(i), r.Interval(), "%s: turn %d", name, i)
		}
		require.Equal(t, 1000*r.Per, r.Span(1000*n), name)
		require.Equal(t, 7*n, r.Turns(7*r.Per), name)
		require.Equal(t, 7*n-1, r.Turns(7*r.Per-1), name)
		require.Equal(t, int64(1), r.Turns(r.Span(1)), name)
		// Any Most+1 turns span at least Per plus the tolerance: one more
		// would not fit a window of Per admitted within the tolerance.
		most := int64(r.Most())
		require.GreaterOrEqual(t, r.Span(most), r.Per+r.Tolerance(), name)
	}
	for _, bad := range []string{"0/s", "100000/s", "1/h", "1.5/s"} {
		_, err := workflow.ParseFile("r.yaml", []byte("name: r\nagents: {a: {endpoint: 'http://a', rateLimit: '"+bad+
			"'}}\nsteps: [{name: s, agent: a, timeout: 1s}]\n"), workflow.Options{})
		require.ErrorContains(t, err, "is not a rate like 50/s or 600/m", bad)
	}
}
