package health_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/health"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/workflow"
)

// A percentile is the bound of the bucket its rank falls in: exact at a
// bound, at most one bucket high between them; past the last bound, -1.
func TestPercentilesAreReadFromTheBuckets(t *testing.T) {
	t.Parallel()
	h := health.Histogram{}
	require.Zero(t, h.Percentile(0.5), "empty")
	for range 90 {
		h.Add(100 * time.Millisecond)
	}
	for range 9 {
		h.Add(900 * time.Millisecond)
	}
	h.Add(48 * time.Hour)
	require.Equal(t, 100*time.Millisecond, h.Percentile(0.5))
	require.Equal(t, time.Second, h.Percentile(0.95))
	require.Equal(t, time.Second, h.Percentile(0.99))
	require.Equal(t, time.Duration(-1), h.Percentile(1), "longer than a day")
	require.Equal(t, 0, health.Bucket(0))
	require.Equal(t, len(health.Bounds)-1, health.Bucket(24*time.Hour), "the last bound is in its bucket")
	require.Equal(t, len(health.Bounds), health.Bucket(24*time.Hour+time.Millisecond))
}

// A window sums the hours it covers, and counts as started in it only the
// ended orders stored within it.
func TestAWindowCountsTheOrdersStartedInIt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 18, 30, 0, 0, time.UTC)
	c := health.NewCounts("shop", "v1")
	c.Add(health.End{Workflow: "shop", State: workflow.Processed, Started: now.Add(-3 * time.Hour), Ended: now})
	c.Add(health.End{Workflow: "shop", State: workflow.Failed, Started: now.Add(-time.Minute), Ended: now})
	old := health.NewCounts("shop", "v1")
	old.Add(health.End{Workflow: "shop", State: workflow.Processed, Started: now.Add(-26 * time.Hour), Ended: now.Add(-25 * time.Hour)})
	hours := []health.HourCounts{{Hour: health.Hour(now), Counts: c}, {Hour: health.Hour(now.Add(-25 * time.Hour)), Counts: old}}

	w := health.Sum(hours, now.Add(-time.Hour))
	require.Len(t, w, 1)
	require.EqualValues(t, 2, w[0].Total())
	require.EqualValues(t, 1, w[0].Failures())
	require.EqualValues(t, 1, w[0].StartedEnded, "stored 3 h ago: not started in the hour")
	day := health.Sum(hours, now.Add(-24*time.Hour))
	require.EqualValues(t, 2, day[0].Total(), "25 h ago is not in the day")
	require.EqualValues(t, 2, day[0].StartedEnded)
	require.InDelta(t, 0.5, health.Rate(w[0].Failures(), w[0].Total()), 1e-9)
}

// An order's end is kept for Flush under its workflow, version and state
// (no Function: any function may end an order), its steps under workflow,
// version and step; the failure count is 0 or 1 so its Average is a rate.
func TestAnEndsMetricsCarryItsWorkflow(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	m := metrics.New(&buf, "agent-pay")
	t0 := time.UnixMilli(1_800_000_000_000)
	for i, st := range []workflow.State{workflow.Processed, workflow.CompensationFailed, workflow.Processed} {
		health.Emit(m, health.End{OrderID: "o", Workflow: "shop", Version: "v1", State: st, Started: t0,
			Ended: t0.Add(time.Duration(i+1) * time.Second), Undone: st != workflow.Processed,
			Steps: []health.StepTime{{Name: "pay", Took: 300 * time.Millisecond}}})
	}
	require.Zero(t, buf.Len(), "kept for the invocation's end")
	m.Flush()
	docs := lines(t, buf.String())
	require.Len(t, docs, 3, "Processed, CompensationFailed, the step: one document each")
	p := docs[0]
	require.NotContains(t, p, "Function")
	require.Equal(t, "shop", p[metrics.DimensionWorkflow])
	require.Equal(t, "v1", p[metrics.DimensionVersion])
	require.Equal(t, "Processed", p[metrics.DimensionState])
	require.Equal(t, []any{1000.0, 3000.0}, p[metrics.OrderDuration])
	require.Equal(t, []any{0.0, 0.0}, p[metrics.OrdersFailed])
	dir := p["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	require.Equal(t, []any{[]any{"Workflow"}, []any{"Workflow", "Version"}, []any{"Workflow", "State"}}, dir["Dimensions"])
	require.Equal(t, "pay", docs[1][metrics.DimensionStep], "in the order first kept")
	require.Equal(t, []any{300.0, 300.0, 300.0}, docs[1][metrics.StepDuration])
	require.Equal(t, "CompensationFailed", docs[2][metrics.DimensionState])
	require.EqualValues(t, 1, docs[2][metrics.OrdersFailed])
	require.EqualValues(t, 1, docs[2][metrics.OrdersUndone])

	tally := metrics.NewTally()
	_, _ = tally.Write(buf.Bytes())
	require.EqualValues(t, 3, tally.Sum(metrics.OrdersEnded))
	require.EqualValues(t, 1, tally.Sum(metrics.OrdersFailed))
}

// An order with no version (stored before versions were kept) is counted
// under version "none": EMF drops a dimension with an empty value.
func TestAnEndWithNoVersionIsCountedUnderNone(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	m := metrics.New(&buf, "scheduler")
	health.Emit(m, health.End{OrderID: "o", Workflow: "shop", State: workflow.Processed})
	m.Flush()
	require.Equal(t, "none", lines(t, buf.String())[0][metrics.DimensionVersion])
}

// An end that names no workflow emits nothing of a workflow's health.
func TestAnEndWithNoWorkflowEmitsNoHealth(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	m := metrics.New(&buf, "scheduler")
	health.Emit(m, health.End{OrderID: "o", State: workflow.Cancelled})
	m.Flush()
	require.Zero(t, buf.Len())
}

func lines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &doc))
		out = append(out, doc)
	}
	return out
}
