package metrics_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/metrics"
)

// documents splits what an emitter wrote into its EMF documents.
func documents(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &doc))
		out = append(out, doc)
	}
	return out
}

// The normal path's metrics of a batch are one document, written at Flush:
// every value is in it, so the Sum an alarm reads per period, the Maximum
// of a wait and the sample count are those of a document per message.
func TestABatchsRoutineMetricsAreOneDocument(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tally := metrics.NewTally()
	e := metrics.New(&buf, "agent-payment")
	for i := range 10 {
		e.Count(metrics.StepsClaimed, 1, map[string]any{"OrderID": "o"})
		e.Duration(metrics.QueueWait, time.Duration(i+1)*100*time.Millisecond, nil)
	}
	e.Count(metrics.OrdersProcessed, 1, nil)
	require.Zero(t, buf.Len(), "nothing written before the invocation ends")
	e.Flush()
	e.Flush() // nothing more to write
	docs := documents(t, &buf)
	require.Len(t, docs, 1)
	doc := docs[0]
	require.Equal(t, "agent-payment", doc["Function"])
	require.NotContains(t, doc, "OrderID", "an aggregate belongs to no one order")
	dir := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	require.Equal(t, metrics.Namespace, dir["Namespace"])
	require.Equal(t, []any{[]any{"Function"}}, dir["Dimensions"], "the dimension the alarms name")
	require.Len(t, dir["Metrics"], 3)
	require.Len(t, doc[metrics.StepsClaimed], 10)
	require.EqualValues(t, 1, doc[metrics.OrdersProcessed], "one value is a number")

	_, _ = tally.Write(buf.Bytes())
	require.EqualValues(t, 10, tally.Sum(metrics.StepsClaimed))
	require.EqualValues(t, 1000, tally.Max(metrics.QueueWait))
	require.EqualValues(t, 5500, tally.Sum(metrics.QueueWait))
}

// EMF takes at most 100 values of a metric in one document: more are
// written in further documents, none lost.
func TestMoreThanAHundredValuesSpanDocuments(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := metrics.New(&buf, "scheduler")
	for range 250 {
		e.Duration(metrics.ReplyWait, time.Second, nil)
	}
	e.Count(metrics.StepsClaimed, 1, nil)
	e.Flush()
	docs := documents(t, &buf)
	require.Len(t, docs, 3)
	total := 0
	for _, d := range docs {
		vals, ok := d[metrics.ReplyWait].([]any)
		if !ok {
			vals = []any{d[metrics.ReplyWait]}
		}
		require.LessOrEqual(t, len(vals), metrics.MaxValues)
		total += len(vals)
	}
	require.Equal(t, 250, total)
	require.Contains(t, docs[0], metrics.StepsClaimed, "written with the first document")
	require.NotContains(t, docs[1], metrics.StepsClaimed)
}

// An incident is written at once, with the order it concerns: a crash
// before the invocation's end cannot lose a count an alarm fires on.
func TestIncidentsAreWrittenAtOnceWithTheirOrder(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := metrics.New(&buf, "scheduler")
	for _, name := range []string{metrics.StepErrors, metrics.CompensationFailures, metrics.SupervisorRecoveries,
		metrics.DeadlinesPassed, metrics.MalformedMessages, metrics.SweepsOutOfTime} {
		require.False(t, metrics.Aggregated(name), name)
		buf.Reset()
		e.Count(name, 1, map[string]any{"OrderID": "o-7"})
		docs := documents(t, &buf)
		require.Len(t, docs, 1, name)
		require.Equal(t, "o-7", docs[0]["OrderID"])
		require.EqualValues(t, 1, docs[0][name])
	}
}
