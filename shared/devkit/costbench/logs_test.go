package costbench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/metrics"
)

// The meter counts each line under the function that wrote it: a log line
// by its "function", an EMF document by its "Function"; a line of neither
// is counted too, as "other".
func TestLogMeterCountsEachLineUnderItsFunction(t *testing.T) {
	t.Parallel()
	m := newLogMeter()
	m.logger().With("function", "scheduler").Info("stale reply ignored", "order_id", "o-1")
	m.logger().With("function", "scheduler").Debug("not at the default level")
	e := metrics.New(m, "agent-payment")
	e.Count(metrics.StepsClaimed, 1, nil)
	e.Count(metrics.StepsClaimed, 1, nil)
	e.Flush()
	_, _ = m.Write([]byte("panic: no JSON\n"))
	got := m.snapshot()
	require.EqualValues(t, 1, got["scheduler"].Lines)
	require.Greater(t, got["scheduler"].Bytes, 50.0)
	require.Zero(t, got["scheduler"].MetricLines)
	require.EqualValues(t, 1, got["agent-payment"].MetricLines, "two claims, one document")
	require.Zero(t, got["agent-payment"].Lines)
	require.EqualValues(t, len("panic: no JSON\n"), got["other"].Bytes)
}

// Locally, invocations that run at once share a handler and so a metrics
// document; in Lambda each writes its own. Every invocation adds Lambda's
// START, END and REPORT lines.
func TestLogsAsLambdaWritesThem(t *testing.T) {
	t.Parallel()
	local := LogUse{Lines: 1, Bytes: 100, MetricLines: 2, MetricBytes: 600}
	l := asLambdaWrites(local, 3, 128)
	require.EqualValues(t, 3, l.MetricLines, "a document an invocation")
	require.EqualValues(t, 900, l.MetricBytes, "each of the mean size")
	require.EqualValues(t, 100, l.Bytes)
	require.Equal(t, float64(3*platformLineBytes(128)), l.PlatformBytes)
	require.InDelta(t, 260, platformLineBytes(128), 20, "three lines with a request id each")
	require.EqualValues(t, 2, asLambdaWrites(LogUse{MetricLines: 2, MetricBytes: 600}, 1, 128).MetricLines,
		"never fewer documents than were written")
}
