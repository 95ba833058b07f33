package localrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

var motoEndpoint, dynamodbEndpoint string

// moto for SQS and SNS, DynamoDB Local (AWS's engine, many requests at once)
// for the state store: moto serves one request at a time, and these tests run
// in parallel.
func TestMain(m *testing.M) {
	os.Exit(emulatortest.MainWithMotoAndDynamoDBLocal(m, &motoEndpoint, &dynamodbEndpoint))
}

var prefixSeq atomic.Int64

// env is one test's pipeline: its own resources on the shared moto server,
// its own remote simulator, and a running local runner.
type env struct {
	t     *testing.T
	stack *localrun.Stack
	sim   *remotesim.Simulator
	logs  *emulatortest.Logs
	stop  func() // kills the runner (as a crash would) and waits for it
	// rejected are the DLQ messages seen so far, body → reason: a peek
	// hides what it read for a minute, so what was seen is kept here.
	rejected map[string]string
}

// fast settings keep the tests quick but leave room on a loaded 2-core machine.
func fastSettings() workflow.Settings {
	return workflow.Settings{StepTimeout: 3 * time.Second, MaxFailures: 3, RetryBackoff: 0, PickupTimeout: 2 * time.Second}
}

// patient gives steps a long timeout, for tests that assert no step needed a
// recovery: on a loaded machine a 3 s step can legitimately time out.
func patient(o *localrun.Options) { o.Settings.StepTimeout = 20 * time.Second }

func newEnv(t *testing.T, faults remotesim.Faults, tweak func(*localrun.Options)) *env {
	t.Helper()
	sim := remotesim.New(uint64(prefixSeq.Load() + 1))
	sim.SetFaults("", faults)
	srv, err := sim.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	logs := &emulatortest.Logs{}
	o := localrun.Options{
		Endpoint: motoEndpoint, DynamoDBEndpoint: dynamodbEndpoint, Prefix: fmt.Sprintf("it%d-%d", time.Now().UnixNano()%1e6, prefixSeq.Add(1)),
		Settings: fastSettings(), RemoteURL: srv.URL, VisibilityTimeout: 5 * time.Second,
		SupervisorEvery: 200 * time.Millisecond,
		Log:             slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if tweak != nil {
		tweak(&o)
	}
	stack, err := localrun.New(context.Background(), o)
	require.NoError(t, err)
	sim.OnCallback(stack.Callbacks(func(err error) { fmt.Fprintln(logs, err) })) // async services answer with events
	e := &env{t: t, stack: stack, sim: sim, logs: logs}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("handler logs:\n%s", logs.Tail(60_000))
		}
	})
	e.start()
	t.Cleanup(func() { e.stop() })
	return e
}

// start runs a fresh runner (new handler instances).
func (e *env) start() {
	e.stop = e.stack.Start(context.Background())
}

// orders sends n well-formed orders and returns their ids.
func (e *env) orders(n int) []string {
	e.t.Helper()
	var ids, bodies []string
	for i := range n {
		id := fmt.Sprintf("order-%03d", i)
		ids = append(ids, id)
		bodies = append(bodies, localrun.DemoOrder(id, i).JSON())
	}
	require.NoError(e.t, e.stack.SendOrders(context.Background(), bodies...))
	return ids
}

// waitEnded waits (bounded) until every order's task ended.
func (e *env) waitEnded(ids []string) map[string]statestore.Task {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tasks, err := e.stack.WaitEnded(ctx, ids, 100*time.Millisecond, nil)
	require.NoError(e.t, err)
	return tasks
}

// rejectionWait is how long a test waits for a rejection in a DLQ: it may
// come after a redelivery (a handler's call to moto failing for a moment on a
// loaded machine is an error SQS retries after the visibility timeout, as it
// would in AWS), so one visibility timeout and a margin over it.
func (e *env) rejectionWait() time.Duration {
	return 2*e.stack.Opts.VisibilityTimeout + 15*time.Second
}

// eventually waits until cond holds, polling; it fails the test after limit.
func (e *env) eventually(what string, limit time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// records returns an order's step and undo records by reference.
func (e *env) records(id string) map[workflow.Ref]statestore.Step {
	e.t.Helper()
	_, recs, err := e.stack.Store.Load(context.Background(), id)
	require.NoError(e.t, err)
	m := map[workflow.Ref]statestore.Step{}
	for _, r := range recs {
		m[r.Ref] = r
	}
	return m
}

// step returns the record of an order's step i.
func (e *env) step(id string, i int) statestore.Step {
	e.t.Helper()
	return e.records(id)[workflow.Ref{Index: i}]
}

// forward are the default workflow's actions, in order.
var forward = []string{"reserve-inventory", "charge-payment", "create-shipment"}

// requireLedger asserts (invariant 5) that the remote services applied
// exactly these actions for the order, each once, in this order.
func (e *env) requireLedger(id string, actions ...string) {
	e.t.Helper()
	var got []string
	for _, eff := range e.sim.Ledger() {
		if eff.OrderID == id {
			got = append(got, eff.Action)
		}
	}
	if len(actions) == 0 {
		actions = nil
	}
	require.Equal(e.t, actions, got, "effects applied for %s", id)
}

// requireEffectsOnce asserts every listed order's steps took effect once
// and nothing was undone.
func (e *env) requireEffectsOnce(ids []string) {
	e.t.Helper()
	for _, id := range ids {
		e.requireLedger(id, forward...)
	}
}

// send sends bodies to a queue of the stack, ten per request.
func (e *env) send(queue string, bodies ...string) {
	e.t.Helper()
	url := e.stack.QueueURL(queue)
	for start := 0; start < len(bodies); start += 10 {
		var entries []types.SendMessageBatchRequestEntry
		for i, b := range bodies[start:min(start+10, len(bodies))] {
			entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(b)})
		}
		_, err := e.stack.Deployment.Clients.SQS.SendMessageBatch(context.Background(),
			&sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		require.NoError(e.t, err)
	}
}

// pointer keeps body in the stack's payload bucket and returns the SQS
// Extended Client pointer message to send in its place (a body over SQS's
// 256 KB comes so).
func (e *env) pointer(body string) string {
	e.t.Helper()
	ptr, err := e.stack.Deployment.Offload().Offload(context.Background(), []byte(body))
	require.NoError(e.t, err)
	return ptr
}

// tooLarge is an order one byte over the largest an order may be.
func tooLarge(id string) string {
	head := `{"orderId":"` + id + `","customerId":"c","items":[],"pad":"`
	return head + strings.Repeat("x", message.MaxOrderBytes+1-len(head)-2) + `"}`
}

// clientQueue creates a reply queue the stack allows and returns its URL.
func (e *env) clientQueue(name string) string {
	e.t.Helper()
	out, err := e.stack.Deployment.Clients.SQS.CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName: aws.String(localrun.ClientQueuePrefix(e.stack.Opts.Prefix) + name)})
	require.NoError(e.t, err)
	return aws.ToString(out.QueueUrl)
}

// statuses waits until the queue holds a status message with the final event,
// and returns the events by sequence number, duplicates dropped.
func (e *env) statuses(queueURL, final string) []message.Status {
	e.t.Helper()
	bySeq := map[int]message.Status{}
	e.eventually("status "+final, 30*time.Second, func() bool {
		msgs, err := e.stack.Peek(context.Background(), queueURL)
		require.NoError(e.t, err)
		for _, m := range msgs {
			var st message.Status
			require.NoError(e.t, json.Unmarshal([]byte(aws.ToString(m.Body)), &st))
			bySeq[st.Seq] = st
		}
		for _, st := range bySeq {
			if st.Event == final {
				return true
			}
		}
		return false
	})
	var out []message.Status
	for _, seq := range slices.Sorted(maps.Keys(bySeq)) {
		out = append(out, bySeq[seq])
	}
	return out
}

// eventsOf lists "event step" of statuses, in order.
func eventsOf(sts []message.Status) []string {
	var out []string
	for _, st := range sts {
		out = append(out, strings.TrimSpace(st.Event+" "+st.Step))
	}
	return out
}
