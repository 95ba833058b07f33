package costbench_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/costbench"
	"github.com/sas-go/sas/shared/devkit/handlerbench"
)

// The model prices an invocation from what it did: a message's requests one
// after another, the batch's sends once, the CPU work stretched by the
// function's share of a vCPU, rounded up to the millisecond. The same counts
// always give the same time: the machine's load does not enter it.
func TestTheLambdaModelPricesWhatAnInvocationDid(t *testing.T) {
	t.Parallel()
	m := costbench.LambdaModel{
		Latency:        map[string]time.Duration{"DynamoDB UpdateItem": 10 * time.Millisecond, "SQS SendMessageBatch": 20 * time.Millisecond},
		DefaultLatency: 30 * time.Millisecond,
		PerBatch:       map[string]bool{"SQS SendMessageBatch": true},
		CPUPerMessage:  map[string]time.Duration{"agent": 100 * time.Microsecond},
		// 21 requests at 100 µs and 10 messages at 100 µs on a core: 3.1 ms,
		// at a share of 128/1769 of a vCPU 42.84 ms
		ClientCPUPerRequest: 100 * time.Microsecond,
		ServiceLatency:      50 * time.Millisecond,
	}
	agent := costbench.Invocation{Invocations: 1, Messages: 10, ServiceCalls: 10,
		Requests: map[string]int64{"DynamoDB UpdateItem": 20, "SQS SendMessageBatch": 1}}
	// waits: 2 updates a message (20 ms), the service (50 ms), one send for
	// the batch (20 ms); CPU 42.84 ms: 132.84, billed 133 ms
	require.Equal(t, 133*time.Millisecond, m.Billed("agent-payment", 128, agent))
	two := agent
	two.Invocations, two.Messages, two.ServiceCalls = 2, 20, 20
	two.Requests = map[string]int64{"DynamoDB UpdateItem": 40, "SQS SendMessageBatch": 2}
	require.Equal(t, 133*time.Millisecond, m.Billed("agent-payment", 128, two), "per invocation")

	other := costbench.Invocation{Invocations: 1, Messages: 1, Requests: map[string]int64{"DynamoDB Query": 1}}
	m.ClientCPUPerRequest = 0
	require.Equal(t, 30*time.Millisecond, m.Billed("scheduler", 256, other), "an unnamed request: the default latency")
	require.Zero(t, m.Billed("scheduler", 256, costbench.Invocation{}))

	for op := range costbench.NominalLambda.PerBatch {
		require.Contains(t, costbench.NominalLambda.Latency, op)
	}
	for _, kind := range []string{"submission", "scheduler", "agent"} {
		require.Positive(t, costbench.NominalLambda.CPUPerMessage[kind], kind)
	}
}

// An Agent flushes its replies every 250 ms while its calls run: the model
// prices one send an invocation that lasts less, one more for each 250 ms
// it lasts, never more than were counted (against the emulators an
// invocation lasts several times what it would in AWS, and sends more).
func TestTheModelPricesTheSendsAnInvocationOfItsTimeMakes(t *testing.T) {
	t.Parallel()
	m := costbench.NominalLambda
	agent := costbench.Invocation{Invocations: 10, Messages: 100, ServiceCalls: 100,
		Requests: map[string]int64{"DynamoDB UpdateItem": 200, "SQS SendMessageBatch": 17}}
	require.Less(t, m.Billed("agent-payment", 128, agent), 250*time.Millisecond)
	require.Equal(t, int64(10), m.BatchSends("agent-payment", "SQS SendMessageBatch", 128, agent), "one an invocation")
	m.ServiceLatency = 300 * time.Millisecond
	require.Equal(t, int64(17), m.BatchSends("agent-payment", "SQS SendMessageBatch", 128, agent),
		"a slow service: two an invocation, but no more than counted")
	agent.Requests["SQS SendMessageBatch"] = 30
	require.Equal(t, int64(20), m.BatchSends("agent-payment", "SQS SendMessageBatch", 128, agent))
	require.Equal(t, int64(30), m.BatchSends("scheduler", "SQS SendMessageBatch", 256, agent), "a handler that sends at its end only")
	require.Equal(t, int64(200), m.BatchSends("agent-payment", "DynamoDB UpdateItem", 128, agent), "a message's request")
}

// BenchmarkClientCPUPerRequest measures the AWS SDK's work for one request
// (encode, sign, send, read the answer) against a server in the same process
// that answers at once: what LambdaModel.ClientCPUPerRequest is (the
// server's own work included, so it errs high), as the process's CPU time
// (cpu-ns/op), which moves little with the machine's load:
//
//	go test -run '^$' -bench ClientCPUPerRequest ./shared/devkit/costbench
func BenchmarkClientCPUPerRequest(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte("{}"))
	}))
	defer srv.Close()
	ctx := context.Background()
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: srv.URL, Emulated: true})
	if err != nil {
		b.Fatal(err)
	}
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	n := func(v int64) ddbtypes.AttributeValue {
		return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	// An Agent's claim, as the state store writes it.
	claim := &dynamodb.UpdateItemInput{TableName: aws.String("sas-state"),
		Key:                      map[string]ddbtypes.AttributeValue{"OrderID": s("order-0001"), "SK": s("T")},
		UpdateExpression:         aws.String("SET R.#a.s = :v0, R.#a.o = :v1, R.#a.c = :v2, R.#a.n = :v3, U = :v4, V = V + :one"),
		ConditionExpression:      aws.String("V = :ver AND R.#a.s = :ready"),
		ExpressionAttributeNames: map[string]string{"#a": "0"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":v0": s("Claimed"), ":v1": s("0123456789ab"),
			":v2": n(time.Now().UnixMilli()), ":v3": n(1), ":v4": n(time.Now().UnixMilli()), ":one": n(1), ":ver": n(3), ":ready": s("Ready")},
		ReturnValues: ddbtypes.ReturnValueAllNew}
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i := range 10 {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)),
			MessageBody: aws.String(`{"orderId":"order-0001","step":0,"agent":"payment","round":1,"attempt":1,"order":{"id":"order-0001","amount":42}}`),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"traceparent": {DataType: aws.String("String"),
				StringValue: aws.String("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}}})
	}
	send := &sqs.SendMessageBatchInput{QueueUrl: aws.String(srv.URL + "/000000000000/sas-agent-payment"), Entries: entries}
	run := func(request func() error) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			cpu := handlerbench.CPUTime()
			for b.Loop() {
				if err := request(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((handlerbench.CPUTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
	b.Run("DynamoDB-UpdateItem", run(func() error {
		_, err := c.DynamoDB.UpdateItem(ctx, claim)
		return err
	}))
	b.Run("SQS-SendMessageBatch", run(func() error {
		_, err := c.SQS.SendMessageBatch(ctx, send)
		return err
	}))
}
