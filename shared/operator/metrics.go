package operator

import (
	"context"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"

	"github.com/sas-go/sas/shared/cwmetrics"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
)

// Publisher hands on the metrics written to it (cwmetrics.Publisher).
type Publisher interface {
	Publish(ctx context.Context) error
}

// WithMetrics has each end o's own writes make (a cancel with nothing to
// undo, an undo or a skip of a held order with nothing left, each of a
// bulk action's) counted as a function counts the ends it writes
// (notify.EndCounter, through statestore.Store.WithEnds): EMF documents
// written to w at the end of each action, then handed on by w's Publish if
// it has one (cwmetrics.Publisher). Without it, o's ends are counted in
// the hourly counts (Health) and in no metric. It returns o.
func (o *Operator) WithMetrics(w io.Writer) *Operator {
	o.metrics, o.metricsTo = metrics.New(w, metrics.OperatorFunction), w
	o.Store.WithEnds(notify.EndCounter(o.metrics))
	return o
}

// ToCloudWatch is WithMetrics to CloudWatch's API (cwmetrics): for a
// deployment on AWS, whose functions' EMF its dashboard and alarms read.
func (o *Operator) ToCloudWatch(cfg aws.Config) *Operator {
	return o.WithMetrics(cwmetrics.New(cloudwatch.NewFromConfig(cfg)))
}

// flushMetrics writes the metrics o's action emitted and hands them on. A
// metric is best effort: one not sent is logged, and the action stands.
func (o *Operator) flushMetrics(ctx context.Context) {
	if o.metrics == nil {
		return
	}
	o.metrics.Flush()
	if p, ok := o.metricsTo.(Publisher); ok {
		if err := p.Publish(context.WithoutCancel(ctx)); err != nil {
			slog.WarnContext(ctx, "an order's end not sent to CloudWatch's metrics (the operator needs cloudwatch:PutMetricData)",
				"err", err)
		}
	}
}
