package metrics_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/metrics"
)

// A count by a dimension is written at once, in the function's series (the
// one an alarm watches, every workflow's) and in the function's and the
// dimension's, a 0 included (it clears the alarm).
func TestCountByWritesTheFunctionsSeriesAndTheDimensions(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	m := metrics.New(&buf, "supervisor")
	m.CountBy(metrics.OrdersOfUndeployedVersions, 0, metrics.DimensionWorkflow, "shop", map[string]any{"CensusStarted": "t"})
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), "written at once, not kept for Flush")
	require.Equal(t, "supervisor", line["Function"])
	require.Equal(t, "shop", line[metrics.DimensionWorkflow])
	require.Equal(t, "t", line["CensusStarted"])
	require.Contains(t, line, metrics.OrdersOfUndeployedVersions)
	require.EqualValues(t, 0, line[metrics.OrdersOfUndeployedVersions])
	dir := line["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	require.Equal(t, []any{[]any{"Function"}, []any{"Function", "Workflow"}}, dir["Dimensions"])
	require.Equal(t, map[string]any{"Name": metrics.OrdersOfUndeployedVersions, "Unit": "Count"}, dir["Metrics"].([]any)[0])
}
