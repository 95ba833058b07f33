package localrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/topology"
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

// With sealData, the key of an agent's calls in flight (perKey) is its
// order's data (here, a customer's id that is a social security number),
// so it is kept by its name, an HMAC under the agent's secret: the key's
// item, the records that waited for it and the handlers' logs hold no
// value in clear, and the limit holds as it does by value (the service
// never has two calls of the customer at once; the customer's orders
// waited for their turn).
func TestASealedDeploymentKeepsNoKeyInClear(t *testing.T) {
	t.Parallel()
	e, svc := keyedEnv(t, func(o *localrun.Options) { o.SealData = true })
	const customer, other = "ssn-987-65-4321", "ssn-123-45-6789"
	var ids, bodies []string
	for i := range 12 {
		o := localrun.DemoOrder(fmt.Sprintf("o-sk%02d", i), i)
		o.CustomerID = customer
		if i%4 == 3 {
			o.CustomerID = other
		}
		ids, bodies = append(ids, o.OrderID), append(bodies, o.JSON())
	}
	ctx := context.Background()
	require.NoError(t, e.stack.SendOrders(ctx, bodies...))
	tasks := e.waitEnded(ids)
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State, id)
	}
	e.stop()
	svc.mu.Lock()
	require.Equal(t, map[string]int{customer: 1, other: 1}, svc.most, "never two calls of one customer at once")
	svc.mu.Unlock()
	require.Positive(t, e.stack.Tally.Sum(metrics.FlowWaits), "the customer's calls waited for their turn")

	out, err := e.stack.Deployment.Clients.DynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(e.stack.Topology().StateTable())})
	require.NoError(t, err)
	var keys []string
	for _, item := range out.Items {
		b, _ := json.Marshal(item)
		require.NotContains(t, string(b), "987-65", "an item of the state table")
		require.NotContains(t, string(b), "123-45", "an item of the state table")
		if pk, _ := item[topology.KeyOrderID].(*types.AttributeValueMemberS); pk != nil && pk.Value == keyname.SecretOwner("payment") {
			if sk := item[topology.KeySort].(*types.AttributeValueMemberS).Value; strings.HasPrefix(sk, "key") {
				keys = append(keys, sk)
			}
		}
	}
	require.Len(t, keys, 2, "a key's item a customer: %v", keys)
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k, "key/"+keyname.NamePrefix), k)
	}
	require.NotContains(t, e.logs.String(), "987-65", "the handlers' logs")
}

// A jq expression that fails on an order's data fails its step, and jq's
// message quotes what it met: an Agent's key of its calls in flight over
// the order, a timer's until over an earlier step's result (its service
// echoes what it was sent). Of a sealed
// order, the reason (the record, the status, the logs) says the expression
// failed on the order's data and quotes none of it.
func TestASealedOrdersExpressionFailureQuotesNoneOfItsData(t *testing.T) {
	t.Parallel()
	_, srv := newKeyed(t)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) }))
	t.Cleanup(echo.Close)
	later := fmt.Sprintf(`name: later
agents:
  billing: {endpoint: %q}
defaults: {timeout: 20s, maxFailures: 3}
steps:
  - name: charge-payment
    agent: billing
    undo:
      name: refund
  - name: ship-after
    until: '.results["charge-payment"].order.customerId'
`, echo.URL)
	for _, sealed := range []bool{true, false} {
		e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
			running(t, charging(srv.URL, ", perKey: {key: .order.customerId | tonumber}"), later)(o)
			o.SealData = sealed
		})
		keyed, timed := localrun.DemoOrder(fmt.Sprintf("o-jq-%t", sealed), 1), localrun.DemoOrder(fmt.Sprintf("o-until-%t", sealed), 2)
		keyed.CustomerID, keyed.Workflow = "ssn-987-65-4321", "charging"
		timed.CustomerID, timed.Workflow = "ssn-987-65-4321", "later"
		require.NoError(t, e.stack.SendOrders(context.Background(), keyed.JSON(), timed.JSON()))
		tasks := e.waitEnded([]string{keyed.OrderID, timed.OrderID})
		reasons := map[string]string{}
		for id, step := range map[string]int{keyed.OrderID: 0, timed.OrderID: 1} {
			require.Equal(t, workflow.Failed, tasks[id].State, "%s: failed, its charge (if any) refunded", id)
			reasons[id] = e.step(id, step).LastError
		}
		require.Contains(t, reasons[keyed.OrderID], "payment's key of its calls in flight: perKey.key: ")
		require.Contains(t, reasons[timed.OrderID], "until: ")
		for id, reason := range reasons {
			if !sealed {
				require.Contains(t, reason, "987-65", "%s: jq's message quotes the value", id)
				continue
			}
			require.Contains(t, reason, workflow.SealedExpressionReason, id)
			require.NotContains(t, reason, "987-65", id)
		}
		if sealed {
			e.stop()
			require.NotContains(t, e.logs.String(), "987-65", "the handlers' logs")
		}
	}
}
