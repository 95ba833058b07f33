package cwmetrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/cwmetrics"
	"github.com/sas-go/sas/shared/health"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/workflow"
)

// fakeCloudWatch keeps the PutMetricData requests it takes.
type fakeCloudWatch struct {
	mu   sync.Mutex
	puts []*cloudwatch.PutMetricDataInput
	err  error
}

func (f *fakeCloudWatch) PutMetricData(_ context.Context, in *cloudwatch.PutMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts = append(f.puts, in)
	return &cloudwatch.PutMetricDataOutput{}, f.err
}

// find is the datum named name with exactly dims (name=value pairs).
func find(t *testing.T, in *cloudwatch.PutMetricDataInput, name string, dims ...string) types.MetricDatum {
	t.Helper()
	want := strings.Join(dims, ",")
	for _, d := range in.MetricData {
		var got []string
		for _, dim := range d.Dimensions {
			got = append(got, aws.ToString(dim.Name)+"="+aws.ToString(dim.Value))
		}
		if aws.ToString(d.MetricName) == name && strings.Join(got, ",") == want {
			return d
		}
	}
	require.Failf(t, "no such metric", "%s %v in %d metrics", name, dims, len(in.MetricData))
	return types.MetricDatum{}
}

// An order's end, emitted as a function emits it (notify.CountEnd), is put
// under every dimension set its EMF declares, with its values and units:
// OrdersFailed by Workflow alone is what a workflow's failure rate alarm
// reads, and a cancel counts in it as 0.
func TestAnEndIsPutAsItsEMFDeclaresIt(t *testing.T) {
	t.Parallel()
	cw := &fakeCloudWatch{}
	p := cwmetrics.New(cw)
	m := metrics.New(p, "operator")
	t0 := time.UnixMilli(1_800_000_000_000)
	notify.CountEnd(m, health.End{OrderID: "o-1", Workflow: "shop", Version: "v2", State: workflow.Cancelled, Started: t0,
		Ended: t0.Add(1500 * time.Millisecond), Undone: true, Steps: []health.StepTime{{Name: "pay", Took: 300 * time.Millisecond}}})
	m.Flush()
	require.NoError(t, p.Publish(context.Background()))
	require.Len(t, cw.puts, 1, "one namespace, under MaxData metrics: one request")
	in := cw.puts[0]
	require.Equal(t, metrics.Namespace, aws.ToString(in.Namespace))

	rate := find(t, in, metrics.OrdersFailed, "Workflow=shop")
	require.Equal(t, []float64{0}, rate.Values, "a cancel is no failure: it lowers the rate")
	require.Equal(t, types.StandardUnitCount, rate.Unit)
	find(t, in, metrics.OrdersFailed, "Workflow=shop", "Version=v2")
	ended := find(t, in, metrics.OrdersEnded, "Workflow=shop", "State=Cancelled")
	require.Equal(t, []float64{1}, ended.Values)
	took := find(t, in, metrics.OrderDuration, "Workflow=shop")
	require.Equal(t, []float64{1500}, took.Values)
	require.Equal(t, types.StandardUnitMilliseconds, took.Unit)
	require.True(t, took.Timestamp.After(time.Now().Add(-time.Minute)), "when it was emitted")
	require.Equal(t, []float64{1}, find(t, in, metrics.OrdersUndone, "Workflow=shop").Values)
	require.Equal(t, []float64{300}, find(t, in, metrics.StepDuration, "Workflow=shop", "Step=pay").Values)
	require.Equal(t, []float64{1}, find(t, in, metrics.OrdersCancelled, "Function=operator").Values)

	require.NoError(t, p.Publish(context.Background()))
	require.Len(t, cw.puts, 1, "published once: nothing left")
}

// A line split across writes is published once whole; a partial line
// waits for its end; what is not EMF is skipped; a failed request is an
// error, and its metrics are not sent again.
func TestOnlyWholeEMFLinesArePublished(t *testing.T) {
	t.Parallel()
	cw := &fakeCloudWatch{}
	p := cwmetrics.New(cw)
	line := emf("Workflow", "shop", "OrdersEnded", 1)
	_, _ = p.Write([]byte("not json\n" + line[:10]))
	require.NoError(t, p.Publish(context.Background()))
	require.Empty(t, cw.puts, "nothing whole to send")
	_, _ = p.Write([]byte(line[10:] + "\n" + line[:5]))
	require.NoError(t, p.Publish(context.Background()))
	require.Len(t, cw.puts, 1)
	require.Len(t, cw.puts[0].MetricData, 1)

	cw.err = errors.New("AccessDenied: cloudwatch:PutMetricData")
	_, _ = p.Write([]byte(line[5:] + "\n"))
	require.ErrorContains(t, p.Publish(context.Background()), "AccessDenied")
	cw.err = nil
	require.NoError(t, p.Publish(context.Background()))
	require.Len(t, cw.puts, 2, "a metric is best effort: not sent again")
}

// A request carries at most MaxData metrics, and a metric at most
// MaxValues values: at each limit one, past it two.
func TestRequestsStayWithinCloudWatchsLimits(t *testing.T) {
	t.Parallel()
	for _, n := range []int{cwmetrics.MaxData, cwmetrics.MaxData + 1} {
		cw := &fakeCloudWatch{}
		p := cwmetrics.New(cw)
		for i := range n {
			_, _ = p.Write([]byte(emf("Workflow", fmt.Sprint("wf-", i), "OrdersEnded", 1) + "\n"))
		}
		require.NoError(t, p.Publish(context.Background()))
		require.Len(t, cw.puts, 1+n/(cwmetrics.MaxData+1), "%d metrics", n)
		require.Len(t, cw.puts[0].MetricData, min(n, cwmetrics.MaxData))
	}
	for _, n := range []int{cwmetrics.MaxValues, cwmetrics.MaxValues + 1} {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = fmt.Sprint(i)
		}
		data := cwmetrics.Data([]byte(strings.Replace(emf("Workflow", "shop", "OrderDuration", 0),
			`"OrderDuration":0`, `"OrderDuration":[`+strings.Join(vs, ",")+`]`, 1)))
		require.Len(t, data, 1+n/(cwmetrics.MaxValues+1), "%d values", n)
		require.Len(t, data[0].Datum.Values, min(n, cwmetrics.MaxValues))
	}
}

// A dimension set one of whose dimensions has no value is dropped, as
// CloudWatch drops it from a log.
func TestADimensionSetWithNoValueIsDropped(t *testing.T) {
	t.Parallel()
	line := `{"_aws":{"Timestamp":1800000000000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["Workflow"],["Workflow","Version"]],` +
		`"Metrics":[{"Name":"OrdersEnded","Unit":"Count"}]}]},"Workflow":"shop","OrdersEnded":1}`
	data := cwmetrics.Data([]byte(line))
	require.Len(t, data, 1)
	require.Len(t, data[0].Datum.Dimensions, 1)
	require.Nil(t, cwmetrics.Data([]byte(`{"orderId":"o-1"}`)), "a log line that is no EMF")
}

// emf is a one-metric EMF line under one dimension.
func emf(dim, value, metric string, v float64) string {
	return fmt.Sprintf(`{"_aws":{"Timestamp":1800000000000,"CloudWatchMetrics":[{"Namespace":%q,"Dimensions":[[%q]],`+
		`"Metrics":[{"Name":%q,"Unit":"Count"}]}]},%q:%q,%q:%v}`, metrics.Namespace, dim, metric, dim, value, metric, v)
}
