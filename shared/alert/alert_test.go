package alert_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/workflow"
)

type topic struct{ published []string }

func (t *topic) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	t.published = append(t.published, *in.Message)
	return &sns.PublishOutput{}, nil
}

// An alert says why its step failed within a bound, whatever the reason it
// is given: SNS takes a message of 256 KB, and an email is read by a person.
func TestAnAlertsLastErrorIsBounded(t *testing.T) {
	tp := &topic{}
	a := alert.New(tp, "arn:aws:sns:us-east-1:000000000000:alerts", metrics.New(metrics.NewTally(), "scheduler"))
	why := "card declined: " + strings.Repeat("x", 300<<10)
	require.NoError(t, a.StepFailed(context.Background(), alert.Failure{OrderID: "o-1", StepName: "charge",
		OrderState: workflow.Compensating, LastError: why}))
	require.Len(t, tp.published, 1)
	var f alert.Failure
	require.NoError(t, json.Unmarshal([]byte(tp.published[0]), &f))
	require.True(t, strings.HasPrefix(f.LastError, "card declined: xxx"), "its start")
	require.LessOrEqual(t, len(f.LastError), alert.MaxLastErrorBytes)
	require.Less(t, len(tp.published[0]), 8<<10)
}

type subjects struct{ topic }

func (t *subjects) Publish(ctx context.Context, in *sns.PublishInput, o ...func(*sns.Options)) (*sns.PublishOutput, error) {
	t.published = append(t.published, *in.Subject)
	return t.topic.Publish(ctx, in, o...)
}

// An alert at its largest (an order's id and a step's name at their
// longest, a last error of control bytes and invalid UTF-8, six bytes each
// once encoded) is within SNS's bounds as it travels: its message under
// 256 KiB and decoded back, its subject under 100 characters (SNS takes
// fewer than 100: it was cut at 100).
func TestAnAlertAtItsLargestIsWithinSNSsBounds(t *testing.T) {
	tp := &subjects{}
	a := alert.New(tp, "arn:aws:sns:us-east-1:000000000000:alerts", metrics.New(metrics.NewTally(), "scheduler"))
	f := alert.Failure{OrderID: strings.Repeat("o", 64), StepName: strings.Repeat("s", 64), Undo: true,
		OrderState: workflow.CompensationFailed, LastError: strings.Repeat("\x01<&\xff", 100<<10)}
	require.NoError(t, a.StepFailed(context.Background(), f))
	require.Len(t, tp.published, 2)
	subject, body := tp.published[0], tp.published[1]
	require.LessOrEqual(t, len(subject), alert.MaxSubjectBytes)
	require.LessOrEqual(t, len(body), alert.MaxMessageBytes)
	t.Logf("the largest alert: %d bytes, its subject %d", len(body), len(subject))
	var got alert.Failure
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.True(t, strings.HasPrefix(got.LastError, "\x01<&\ufffd"), "its control bytes kept, its invalid UTF-8 replaced, <& as they are")
	require.Contains(t, body, `"lastError":"\u0001<&\ufffd`, "nothing escaped for HTML")
}

// An alert on orders of a version no longer deployed, at its largest (a
// workflow's name at its longest, a derived version, three order ids at
// their longest, a count in the billions) and its smallest, is within SNS's
// bounds, and says what it is about and what to do.
func TestAnUndeployedVersionsAlertIsWithinSNSsBounds(t *testing.T) {
	for _, u := range []alert.Undeployed{
		{Workflow: "a" + strings.Repeat("-", 39), Version: "0123abcd", Base: "89abcdef", Orders: 4_000_000_000,
			Examples: []string{strings.Repeat("o", 64), strings.Repeat("p", 64), strings.Repeat("q", 64)}},
		{Workflow: "a", Version: "0123abcd", Orders: 1, Examples: []string{"o"}},
	} {
		tp := &subjects{}
		a := alert.New(tp, "arn:aws:sns:us-east-1:000000000000:alerts", metrics.New(metrics.NewTally(), "supervisor"))
		u.Action = alert.UndeployedAction(u.Workflow, u.Version)
		require.NoError(t, a.VersionUndeployed(context.Background(), u))
		require.Len(t, tp.published, 2)
		subject, body := tp.published[0], tp.published[1]
		require.LessOrEqual(t, len(subject), alert.MaxSubjectBytes)
		require.Contains(t, subject, "no longer deployed")
		var got alert.Undeployed
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		require.Equal(t, "OrdersOfUndeployedVersion", got.Event)
		u.Event = got.Event
		require.Equal(t, u, got)
		require.Contains(t, got.Action, "sasctl migrate --to FILE")
	}
}
