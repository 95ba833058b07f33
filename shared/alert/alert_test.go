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
