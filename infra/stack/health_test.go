package stack_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each workflow has an alarm on its failure rate: the Average of
// OrdersFailed (0 or 1 an end) by Workflow over 5 minutes at or above the
// deployment's failureRateAlarm (5%), no data not a breach, told when it
// clears.
func TestEachWorkflowHasAFailureRateAlarm(t *testing.T) {
	names := props.Workflows.Names()
	require.NotEmpty(t, names)
	alarms := resources("AWS::CloudWatch::Alarm")
	for _, wf := range names {
		var a map[string]any
		for id, r := range alarms {
			if d, _ := r["AlarmDescription"].(string); strings.HasPrefix(id, "FailureRateAlarm") && strings.Contains(d, "workflow "+wf+"'s") {
				a = r
			}
		}
		require.NotNil(t, a, "workflow %s's failure rate alarm", wf)
		require.Equal(t, "OrdersFailed", a["MetricName"])
		require.Equal(t, "Average", a["Statistic"])
		require.EqualValues(t, 300, a["Period"])
		require.EqualValues(t, 0.05, a["Threshold"])
		require.Equal(t, "GreaterThanOrEqualToThreshold", a["ComparisonOperator"])
		require.Equal(t, "notBreaching", a["TreatMissingData"])
		require.Equal(t, []any{map[string]any{"Name": "Workflow", "Value": wf}}, a["Dimensions"])
		require.Contains(t, fmt.Sprint(a["OKActions"]), "AlarmTopic")
	}
}

// The dashboard has a row per workflow: its ends by state, its rates, its
// order's p50/p95/p99 and each step's p95.
func TestTheDashboardHasARowPerWorkflow(t *testing.T) {
	var body string
	for _, d := range resources("AWS::CloudWatch::Dashboard") {
		b, _ := json.Marshal(d["DashboardBody"])
		body = string(b)
	}
	for _, def := range props.Workflows.Definitions() {
		for _, title := range []string{": orders ended, by state", ": failure and compensation rates", ": order duration (ms)",
			": step duration, p95 (ms)"} {
			require.Contains(t, body, def.Name+title)
		}
		for _, s := range def.Steps {
			require.Contains(t, body, `\"Step\",\"`+s.Name)
		}
	}
	for _, want := range []string{`OrderDuration`, `\"stat\":\"p99\"`, `StepDuration`, `OrdersUndone`} {
		require.Contains(t, body, want)
	}
}

// The dashboard's orders by outcome count the ends of every writer that
// ends orders: the Scheduler, the Supervisor, Submission (an event, a
// cancel), the operator's tools and each Agent.
func TestTheOrdersByOutcomeCountEveryWriterOfAnEnd(t *testing.T) {
	var body string
	for _, d := range resources("AWS::CloudWatch::Dashboard") {
		b, _ := json.Marshal(d["DashboardBody"])
		body = string(b)
	}
	for _, name := range []string{"OrdersProcessed", "OrdersCompensated"} {
		for _, fn := range []string{"scheduler", "supervisor", "submission", "operator", "agent-payment"} {
			require.Contains(t, body, fmt.Sprintf(`\"%s\",\"Function\",\"%s\"`, name, fn))
		}
	}
}
