package localrun_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/workflow"
)

// With sealData, an order Submission refuses is on the orders DLQ as it was
// sent (to be mended and sent again), but the reason it is refused for
// (the DLQ message's attribute, the handlers' log line, the metric line)
// names the field at fault and the schema's keyword, never the value: of a
// deployment that does not seal, the schema's message quotes it.
func TestASealedOrdersRefusalQuotesNoneOfItsData(t *testing.T) {
	t.Parallel()
	flow := strings.Replace(largeFlow, "name: large\n", `name: large
schema:
  type: object
  properties:
    doc: {type: string, pattern: "^d*$"}
    answer: {type: integer, maximum: 100}
`, 1)
	const secret = "ssn-987-65-4321"
	body := `{"orderId":"refused-1","workflow":"large","answer":7777777,"doc":"` + secret + `"}`
	for _, sealed := range []bool{true, false} {
		var metricLines bytes.Buffer
		e, _ := largeEnv(t, flow, func(o *localrun.Options) {
			o.SealData = sealed
			o.Metrics = &metricLines
		})
		e.send(e.stack.Topology().OrdersQueue().Name, body)
		reason := e.rejection(e.stack.Topology().OrdersQueue().DLQName, secret)
		if !sealed {
			require.Contains(t, reason, secret, "the schema's message quotes the value")
			require.Contains(t, reason, "answer: maximum: got ")
			continue
		}
		require.Contains(t, reason, "order refused-1: answer: maximum; doc: pattern (workflow large's schema)", "the field and the keyword")
		e.eventually("the refusal's metric line", e.rejectionWait(), func() bool {
			return strings.Contains(metricLines.String(), "doc: pattern")
		})
		for what, text := range map[string]string{"the DLQ reason": reason, "the logs": e.logs.String(), "the metric lines": metricLines.String()} {
			require.NotContains(t, text, secret, what)
			require.NotContains(t, text, "7777777", what)
		}
	}
}

// A sealed order delivered twice (SQS delivers at least once) starts its
// first step once per delivery, and each request carries the order as it
// is stored: not as the second delivery sealed it again (another data key,
// whose object no one keeps), which the step would read and answer for.
// Nothing runs the requests: Submission alone handles both deliveries.
func TestADuplicateOrderStartsAsStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	def, err := workflow.ParseFile("large.yaml", []byte(largeFlow), workflow.Options{})
	require.NoError(t, err)
	stack, err := localrun.New(ctx, localrun.Options{Endpoint: motoEndpoint, DynamoDBEndpoint: dynamodbEndpoint,
		Prefix: fmt.Sprintf("dup%d-%d", time.Now().UnixNano()%1e6, prefixSeq.Add(1)), Workflows: workflow.MustSet(def),
		Remotes: map[string]agent.Remote{"scans": &scans{}}, Settings: fastSettings(), SealData: true})
	require.NoError(t, err)
	submission, err := stack.Deployment.Submission()
	require.NoError(t, err)
	body := `{"orderId":"dup-1","workflow":"large","answer":10,"doc":"ssn-123"}`
	for i := range 2 {
		res, err := submission.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: fmt.Sprintf("m-%d", i), Body: body}}})
		require.NoError(t, err)
		require.Empty(t, res.BatchItemFailures)
	}
	stored, err := stack.Store.Order(ctx, "dup-1")
	require.NoError(t, err)
	require.True(t, seal.IsSealed([]byte(stored)), "stored sealed")
	requests, err := stack.Peek(ctx, stack.QueueURL(stack.Topology().AgentRequests("scans").Name))
	require.NoError(t, err)
	require.Len(t, requests, 2, "a request per delivery (a claim runs one)")
	for _, m := range requests {
		req, err := message.DecodeAgentRequest(aws.ToString(m.Body))
		require.NoError(t, err)
		require.Equal(t, stored, string(req.Payload), "the order as stored")
	}
}
