package stack

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/workflow"
)

// healthPeriod is the period of a workflow's failure rate alarm.
const healthPeriod = 5

// workflowMetric is one of a workflow's health metrics (health.Emit), by
// dimensions dims (Workflow first), with the statistic stat.
func workflowMetric(name, stat string, minutes float64, dims map[string]string) awscloudwatch.Metric {
	m := map[string]*string{}
	for k, v := range dims {
		m[k] = jsii.String(v)
	}
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String(name), DimensionsMap: &m,
		Statistic: jsii.String(stat), Period: awscdk.Duration_Minutes(jsii.Number(minutes)),
	})
}

// failureRate is a workflow's ended orders that ended Failed or
// CompensationFailed, as a fraction: OrdersFailed is 0 or 1 an end, so its
// Average over the period is the rate.
func failureRate(wf string, minutes float64) awscloudwatch.Metric {
	return workflowMetric(metrics.OrdersFailed, "Average", minutes, map[string]string{metrics.DimensionWorkflow: wf})
}

// failureRateAlarms adds, per workflow, an alarm on its failure rate over
// healthPeriod minutes at or above p.FailureRateAlarm percent; no order
// ended is no data, not a breach, and the alarm says when it clears.
func failureRateAlarms(st awscdk.Stack, p Props, action awscloudwatch.IAlarmAction) {
	for _, wf := range p.Workflows.Names() {
		a := awscloudwatch.NewAlarm(st, jsii.String("FailureRateAlarm-"+wf), &awscloudwatch.AlarmProps{
			Metric: failureRate(wf, healthPeriod), Threshold: jsii.Number(float64(p.FailureRateAlarm) / 100),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
			AlarmDescription: jsii.String(fmt.Sprintf("Of workflow %s's orders that ended in %d minutes, %d%% or more ended Failed or "+
				"CompensationFailed: see the alert topic's events, sasctl top and the dashboard's %s row (docs/operations.md).",
				wf, healthPeriod, p.FailureRateAlarm, wf)),
		})
		a.AddAlarmAction(action)
		a.AddOkAction(action)
	}
}

// healthRows adds to d one row of widgets per workflow: its orders ended by
// state, its failure and compensation rates, its order's p50/p95/p99 and
// each step's p95.
func healthRows(d awscloudwatch.Dashboard, p Props) {
	for _, def := range p.Workflows.Definitions() {
		wf := def.Name
		by := map[string]string{metrics.DimensionWorkflow: wf}
		var ended []awscloudwatch.IMetric
		for _, s := range []workflow.State{workflow.Processed, workflow.Failed, workflow.CompensationFailed, workflow.Cancelled} {
			ended = append(ended, workflowMetric(metrics.OrdersEnded, "Sum", 1,
				map[string]string{metrics.DimensionWorkflow: wf, metrics.DimensionState: string(s)}).
				With(&awscloudwatch.MetricOptions{Label: jsii.String(string(s))}))
		}
		rates := []awscloudwatch.IMetric{
			failureRate(wf, 1).With(&awscloudwatch.MetricOptions{Label: jsii.String("failure rate")}),
			workflowMetric(metrics.OrdersUndone, "Average", 1, by).With(&awscloudwatch.MetricOptions{Label: jsii.String("compensation rate")}),
		}
		var order []awscloudwatch.IMetric
		for _, q := range []string{"p50", "p95", "p99"} {
			order = append(order, workflowMetric(metrics.OrderDuration, q, 1, by).With(&awscloudwatch.MetricOptions{Label: jsii.String(q)}))
		}
		var steps []awscloudwatch.IMetric
		for _, s := range def.Steps {
			steps = append(steps, workflowMetric(metrics.StepDuration, "p95", 1,
				map[string]string{metrics.DimensionWorkflow: wf, metrics.DimensionStep: s.Name}).
				With(&awscloudwatch.MetricOptions{Label: jsii.String(s.Name)}))
		}
		d.AddWidgets(
			healthGraph(wf+": orders ended, by state", ended),
			healthGraph(wf+": failure and compensation rates", rates),
			healthGraph(wf+": order duration (ms)", order),
			healthGraph(wf+": step duration, p95 (ms)", steps),
		)
	}
}

// healthGraph is a quarter-row graph.
func healthGraph(title string, ms []awscloudwatch.IMetric) awscloudwatch.IWidget {
	return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(strings.TrimSpace(title)), Left: &ms,
		Width: jsii.Number(6)})
}
