package storetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/cwmetrics"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// OperatorEnds checks, on the engine c names (DynamoDB) beside moto's
// queues, that the ends an operator's own writes make are in the metrics
// the stack's dashboard and FailureRateAlarm-<workflow> read, as a
// function's are: a cancel of an order nothing ran of (Cancelled), an undo
// of an order held at its first step (Failed), a skip of a held last step
// (Processed), each once, put to CloudWatch (cwmetrics, here a fake of its
// API) as OrdersFailed by Workflow alone (0, 1, 0: a rate of 1/3, the
// cancel in it), OrdersEnded by Workflow and State, and their durations; a
// cancel asked again puts nothing.
func OperatorEnds(t *testing.T, c *awsclient.Clients) {
	t.Helper()
	ctx := context.Background()
	topo := NewTables(t, c.DynamoDB)
	_, err := provision.Ensure(ctx, c, topo) // the queues an operator's actions send to
	require.NoError(t, err)
	s := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	cw := &putMetrics{}
	op := operator.New(c, topo).WithMetrics(cwmetrics.New(cw))
	op.Now = func() time.Time { return t0.Add(3 * time.Second) }

	submit(t, s, "o-cancel", 2)
	firstHolds := def(2)
	firstHolds.Steps[0].HoldFor = time.Hour
	held(t, s, "o-undo", firstHolds, step0)
	lastHolds := def(2)
	lastHolds.Steps[1].HoldFor = time.Hour
	held(t, s, "o-skip", lastHolds, step1)

	res, err := op.Cancel(ctx, "o-cancel", "ops", "asked")
	require.NoError(t, err)
	require.Equal(t, workflow.Cancelled, res.State, "nothing ran: ended at once")
	undone, err := op.DecideHeld(ctx, outcome.HoldDecision{OrderID: "o-undo", Action: outcome.HoldUndo, By: "ops"})
	require.NoError(t, err)
	require.Equal(t, workflow.Failed, undone.State, "nothing ran: nothing to undo")
	skipped, err := op.DecideHeld(ctx, outcome.HoldDecision{OrderID: "o-skip", Action: outcome.HoldSkip, By: "ops"})
	require.NoError(t, err)
	require.Equal(t, workflow.Processed, skipped.State, "its last step skipped")
	_, err = op.Cancel(ctx, "o-cancel", "ops", "asked again")
	require.NoError(t, err)

	// What FailureRateAlarm-test reads: OrdersFailed, dimension Workflow
	// alone, its Average.
	rate := cw.values(metrics.Namespace, metrics.OrdersFailed, "Workflow=test")
	require.ElementsMatch(t, []float64{0, 1, 0}, rate, "each end once, the cancel's a 0")
	for _, st := range []workflow.State{workflow.Cancelled, workflow.Failed, workflow.Processed} {
		require.Equal(t, []float64{1}, cw.values(metrics.Namespace, metrics.OrdersEnded, "Workflow=test", "State="+string(st)), st)
	}
	require.Len(t, cw.values(metrics.Namespace, metrics.OrderDuration, "Workflow=test"), 3)
	require.Equal(t, []float64{1}, cw.values(metrics.Namespace, metrics.OrdersCancelled, "Function="+metrics.OperatorFunction))
}

// held stores order id of d and has its record r refused: the order is
// held (r's step holds on failure).
func held(t *testing.T, s *statestore.Store, id string, d workflow.Definition, r workflow.Ref) {
	t.Helper()
	ctx := context.Background()
	created, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`, Workflow: d, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	for i := range r.Index {
		run(t, s, id, workflow.Ref{Index: i}, t0)
	}
	st := claimed(t, s, id, r, t0)
	rec, err := refuse(ctx, s, id, r, st.Attempt, "card expired", t0.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, workflow.Held, rec.State)
}

// putMetrics is CloudWatch's PutMetricData, keeping what it is sent.
type putMetrics struct {
	mu   sync.Mutex
	puts []*cloudwatch.PutMetricDataInput
}

func (p *putMetrics) PutMetricData(_ context.Context, in *cloudwatch.PutMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.PutMetricDataOutput, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.puts = append(p.puts, in)
	return &cloudwatch.PutMetricDataOutput{}, nil
}

// values are every value put of metric name in namespace ns with exactly
// the dimensions dims (name=value, in the order declared).
func (p *putMetrics) values(ns, name string, dims ...string) []float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []float64
	for _, in := range p.puts {
		for _, d := range in.MetricData {
			var got []string
			for _, dim := range d.Dimensions {
				got = append(got, aws.ToString(dim.Name)+"="+aws.ToString(dim.Value))
			}
			if aws.ToString(in.Namespace) == ns && aws.ToString(d.MetricName) == name && strings.Join(got, ",") == strings.Join(dims, ",") {
				out = append(out, d.Values...)
			}
		}
	}
	return out
}
