package metrics_test

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/metrics"
)

func TestEmitterWritesEmbeddedMetricFormat(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	metrics.New(&buf, "scheduler").Count(metrics.StepErrors, 1, map[string]any{"OrderID": "o-1"})
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line))
	require.Equal(t, "scheduler", line["Function"])
	require.Equal(t, "o-1", line["OrderID"])
	require.EqualValues(t, 1, line[metrics.StepErrors])
	aws := line["_aws"].(map[string]any)
	require.InDelta(t, float64(time.Now().UnixMilli()), aws["Timestamp"].(float64), 60_000)
	dir := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	require.Equal(t, metrics.Namespace, dir["Namespace"])
	require.Equal(t, []any{[]any{"Function"}}, dir["Dimensions"])
	require.Equal(t, metrics.StepErrors, dir["Metrics"].([]any)[0].(map[string]any)["Name"])
}

func TestTallySumsWhatWasEmitted(t *testing.T) {
	t.Parallel()
	tally := metrics.NewTally()
	e := metrics.New(tally, "agent")
	e.Count(metrics.AgentRetries, 1, nil)
	e.Count(metrics.AgentRetries, 2, nil)
	e.Count(metrics.StepErrors, 1, map[string]any{"OrderID": "o-9"})
	e.Flush()
	_, _ = tally.Write([]byte("not json\n{\"plain\":1}\n"))
	require.EqualValues(t, 3, tally.Sum(metrics.AgentRetries))
	require.EqualValues(t, 1, tally.Sum(metrics.StepErrors))
	require.Zero(t, tally.Sum(metrics.OrdersProcessed))
	lines := tally.Lines(metrics.StepErrors)
	require.Len(t, lines, 1)
	require.Equal(t, "o-9", lines[0]["OrderID"])
}

func TestNilEmitterIsANoOp(t *testing.T) {
	t.Parallel()
	var e *metrics.Emitter
	e.Count(metrics.StepErrors, 1, nil)
}

func TestDurationIsEmittedInMillisecondsAndItsMaxKept(t *testing.T) {
	t.Parallel()
	tally := metrics.NewTally()
	var buf bytes.Buffer
	e := metrics.New(io.MultiWriter(tally, &buf), "agent-payment")
	e.Duration(metrics.QueueWait, 1500*time.Millisecond, map[string]any{"OrderID": "o-1"})
	e.Duration(metrics.QueueWait, 250*time.Millisecond, nil)
	e.Flush()
	var line map[string]any
	require.NoError(t, json.Unmarshal(bytes.SplitN(buf.Bytes(), []byte("\n"), 2)[0], &line))
	dir := line["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	require.Equal(t, "Milliseconds", dir["Metrics"].([]any)[0].(map[string]any)["Unit"])
	require.Equal(t, []any{1500.0, 250.0}, line[metrics.QueueWait], "every value, so Maximum and percentiles hold")
	require.EqualValues(t, 1500, tally.Max(metrics.QueueWait))
	require.EqualValues(t, 1750, tally.Sum(metrics.QueueWait))
}
