package stack

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/shared/metrics"
)

// emf is a metric the functions write as Embedded Metric Format lines.
func emf(name, function string) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String(name),
		DimensionsMap: &map[string]*string{"Function": jsii.String(function)},
		Statistic:     jsii.String("Sum"), Period: awscdk.Duration_Minutes(jsii.Number(1)),
	})
}

// emfSum adds a metric over the functions that emit it.
func emfSum(label, name string, functions ...string) awscloudwatch.MathExpression {
	using := map[string]awscloudwatch.IMetric{}
	var terms []string
	for i, fn := range functions {
		id := fmt.Sprintf("%s_%d", strings.ToLower(name), i) // unique within a graph
		using[id] = emf(name, fn)
		terms = append(terms, "FILL("+id+", 0)")
	}
	return mathExpr(label, strings.Join(terms, " + "), using)
}

// emfMax is the largest value of a metric over the functions that emit it.
func emfMax(label, name string, functions ...string) awscloudwatch.MathExpression {
	using := map[string]awscloudwatch.IMetric{}
	var ids []string
	for i, fn := range functions {
		id := fmt.Sprintf("%s_max_%d", strings.ToLower(name), i)
		using[id] = emf(name, fn).With(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum")})
		ids = append(ids, "FILL("+id+", 0)")
	}
	return mathExpr(label, "MAX(["+strings.Join(ids, ", ")+"])", using)
}

func mathExpr(label, expr string, using map[string]awscloudwatch.IMetric) awscloudwatch.MathExpression {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(expr), UsingMetrics: &using, Label: jsii.String(label),
		Period: awscdk.Duration_Minutes(jsii.Number(1)),
	})
}

func alarms(st awscdk.Stack, p Props, r *Resources, f *Functions) {
	action := awscloudwatchactions.NewSnsAction(r.Alarms)
	alarmIf := func(id, description string, m awscloudwatch.IMetric, threshold float64, missing awscloudwatch.TreatMissingData) awscloudwatch.Alarm {
		a := awscloudwatch.NewAlarm(st, jsii.String(id), &awscloudwatch.AlarmProps{
			Metric: m, Threshold: jsii.Number(threshold), EvaluationPeriods: jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   missing,
			AlarmDescription:   jsii.String(description),
		})
		a.AddAlarmAction(action)
		return a
	}
	alarm := func(id, description string, m awscloudwatch.IMetric, threshold float64) {
		alarmIf(id, description, m, threshold, awscloudwatch.TreatMissingData_NOT_BREACHING)
	}
	// The census reports once a pass (censusEvery): between two, no data
	// keeps the alarm as the last pass left it, and a pass that finds none
	// (it reports 0 for every workflow) clears it.
	undeployed := alarmIf("OrdersOfUndeployedVersionsAlarm", "Orders in flight run a workflow version this deployment no longer runs "+
		"(they go on from its stored definition): see the alert topic's event for the workflow, version, count and orders, "+
		"then sasctl workflow versions and sasctl migrate (docs/operations.md).",
		emf(metrics.OrdersOfUndeployedVersions, "supervisor").With(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum")}),
		1, awscloudwatch.TreatMissingData_IGNORE)
	undeployed.AddOkAction(action) // told when the orders moved or ended
	failureRateAlarms(st, p, action)
	alarm("StepErrorsAlarm", "A step failed for good: see the alert topic's event for the order, step and error.",
		emfSum("StepErrors", metrics.StepErrors, "scheduler", "supervisor"), 1)
	alarm("CompensationFailedAlarm", "An undo action failed for good: an order's work is not fully undone.",
		emfSum("CompensationFailures", metrics.CompensationFailures, "scheduler", "supervisor"), 1)
	alarm("QueueWaitAlarm", fmt.Sprintf("A step waited over %s from ready to claimed: a queue is backlogged (no order fails for it; "+
		"its deadline bounds it). Give the Scheduler or the Agent more concurrency, or slow the producers.", p.QueueWaitAlarm),
		emfMax("QueueWait", metrics.QueueWait, agentFunctions(p)...), float64(p.QueueWaitAlarm.Milliseconds()))
	alarm("SupervisorErrorsAlarm", "The Supervisor failed: overdue work is not being recovered.",
		f.Supervisor.MetricErrors(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5))}), 1)
	for _, q := range p.Topology.Queues() {
		alarm(q.DLQName+"-not-empty", "Messages reached the dead-letter queue "+q.DLQName+"; read their RejectReason, then sasctl redrive.",
			r.Queues[q.DLQName].MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
				Statistic: jsii.String("Maximum"), Period: awscdk.Duration_Minutes(jsii.Number(1))}), 1)
		alarm(q.Name+"-oldest-message", "Work is waiting on "+q.Name+": its consumer is failing or too slow.",
			r.Queues[q.Name].MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{
				Statistic: jsii.String("Maximum"), Period: awscdk.Duration_Minutes(jsii.Number(1))}),
			p.OldestMessageAlarm.Seconds())
	}
}

func dashboard(st awscdk.Stack, p Props, f *Functions) {
	graph := func(title string, ms ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &ms, Width: jsii.Number(12)})
	}
	agents := agentFunctions(p)
	// An order's end is counted by whoever wrote it: an Agent (its last
	// step or undo done), the Supervisor (a give-up, a hold's end), the
	// Scheduler (a wait or timer done, a reply from an Agent of an earlier
	// version), Submission (an event, a cancel with nothing to undo), or
	// the operator's tools (a cancel, an undo or a skip of a held order).
	enders := append([]string{"scheduler", "supervisor", "submission", metrics.OperatorFunction}, agents...)
	d := awscloudwatch.NewDashboard(st, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(p.Topology.Prefix + "-orders"),
	})
	d.AddWidgets(
		graph("Orders by outcome",
			emfSum("accepted", metrics.OrdersAccepted, "submission"),
			emfSum("processed", metrics.OrdersProcessed, enders...),
			emfSum("failed, work undone", metrics.OrdersCompensated, enders...),
			emfSum("compensation failed", metrics.CompensationFailures, "scheduler", "supervisor")),
		graph("Retries and recoveries",
			emfSum("agent retries", metrics.AgentRetries, agents...),
			emfSum("attempts recovered (timed out)", metrics.SupervisorRecoveries, "supervisor"),
			emfSum("attempts abandoned at CompleteBy", metrics.AgentDeadlineExpired, agents...)),
	)
	d.AddWidgets(
		graph("Queue wait, ready to claimed (ms, max)", emfMax("queue wait", metrics.QueueWait, agents...)),
		graph("Waiting, not failing",
			emfSum("messages re-sent (lost?)", metrics.MessagesResent, "supervisor"),
			emfSum("waits held back (backlog)", metrics.WaitsHeld, "supervisor"),
			emfSum("orders past their deadline", metrics.DeadlinesPassed, "supervisor")),
	)
	d.AddWidgets(
		graph("Errors",
			emfSum("steps failed for good", metrics.StepErrors, "scheduler", "supervisor"),
			emfSum("malformed messages", metrics.MalformedMessages, append([]string{"submission", "scheduler"}, agents...)...),
			emfSum("stale outcomes", metrics.StaleReplies, append([]string{"scheduler"}, agents...)...),
			f.Supervisor.MetricErrors(nil)),
	)
	healthRows(d, p)
}

// agentFunctions are the agents' function names, as their metrics carry them.
func agentFunctions(p Props) []string {
	var out []string
	for _, a := range p.Topology.Agents {
		out = append(out, "agent-"+a)
	}
	return out
}
