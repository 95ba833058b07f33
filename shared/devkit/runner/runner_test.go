package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/devkit/runner"
	"github.com/sas-go/sas/shared/topology"
)

var (
	queueSeq    atomic.Int64
	endpoint    string
	clientsOnce sync.Once
	shared      *awsclient.Clients
)

// TestMain runs the runner's tests on kind queues (in send order, each
// message once) unless told otherwise: they count its deliveries exactly, as
// an event source mapping makes them; what the product does with SQS's
// second deliveries is tested where the product runs (localrun, chaos).
func TestMain(m *testing.M) {
	if os.Getenv(emulatortest.QueuesEnv) == "" && os.Getenv("AWS_ENDPOINT_URL") == "" {
		_ = os.Setenv(emulatortest.QueuesEnv, "kind")
	}
	os.Exit(emulatortest.MainWithMoto(m, &endpoint))
}

// clients are the SDK clients of the test binary's moto, built once.
func clients() *awsclient.Clients {
	clientsOnce.Do(func() {
		var err error
		if shared, err = awsclient.Load(context.Background(), awsclient.Options{Endpoint: endpoint, Emulated: true}); err != nil {
			panic(err)
		}
	})
	return shared
}

// queue provisions a one-agent topology with a short visibility timeout and
// returns the orders queue and its DLQ URLs.
func queue(t *testing.T, prefix string, maxReceives int) (q topology.Queue, url, arn, dlq string) {
	return queueHiding(t, prefix, maxReceives, time.Second)
}

// queueHiding is queue with the given visibility timeout. Each call makes new
// queues: a receive cut short when an earlier run stopped may still take the
// messages of a queue it polled (moto answers it after the client left).
func queueHiding(t *testing.T, prefix string, maxReceives int, visibility time.Duration) (q topology.Queue, url, arn, dlq string) {
	topo := topology.Default(fmt.Sprintf("%s-%d", prefix, queueSeq.Add(1)), "svc")
	topo.VisibilityTimeout, topo.MaxReceiveCount = visibility, maxReceives
	res, err := provision.Ensure(context.Background(), clients(), topo)
	require.NoError(t, err)
	q = topo.OrdersQueue()
	return q, res.URL(q.Name), res.QueueARNs[q.Name], res.URL(q.DLQName)
}

func send(t *testing.T, url string, bodies ...string) {
	for _, b := range bodies {
		_, err := clients().SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(b)})
		require.NoError(t, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		require.False(t, time.Now().After(deadline), "timed out waiting for %s", what)
		time.Sleep(50 * time.Millisecond)
	}
}

func visible(t *testing.T, url string) int {
	out, err := clients().SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	require.NoError(t, err)
	var n int
	fmt.Sscan(out.Attributes["ApproximateNumberOfMessages"], &n)
	var m int
	fmt.Sscan(out.Attributes["ApproximateNumberOfMessagesNotVisible"], &m)
	return n + m
}

func start(t *testing.T, r *runner.Runner) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestPartialBatchFailuresAndRedriveToTheDLQ(t *testing.T) {
	t.Parallel()
	_, url, arn, dlq := queue(t, "rt-partial", 2)
	var mu sync.Mutex
	seen := map[string]int{}
	handler := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		mu.Lock()
		defer mu.Unlock()
		for _, r := range ev.Records {
			seen[r.Body]++
			require.Equal(t, arn, r.EventSourceARN)
			require.NotEmpty(t, r.Attributes["ApproximateReceiveCount"])
			if r.Body == "poison" {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		return resp, nil
	}
	r := &runner.Runner{SQS: clients().SQS, Log: slog.New(slog.DiscardHandler), Sources: []runner.Source{{
		Function: "fn", QueueURL: url, QueueARN: arn, Handler: handler, Pollers: 1}}}
	send(t, url, "a", "poison", "b")
	start(t, r)
	waitFor(t, "the poison message in the DLQ", func() bool { return visible(t, dlq) == 1 })
	waitFor(t, "the source queue empty", func() bool { return visible(t, url) == 0 })
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, seen["a"], "a success is deleted, never redelivered")
	require.Equal(t, 1, seen["b"])
	require.Equal(t, 2, seen["poison"], "delivered maxReceiveCount times, then redriven")
	stats := r.Stats.Snapshot()["fn"]
	require.Equal(t, 2, stats.FailedItems)
}

func TestAFailedInvocationRetriesTheWholeBatch(t *testing.T) {
	t.Parallel()
	_, url, arn, _ := queue(t, "rt-panic", 5)
	var mu sync.Mutex
	calls := 0
	seen := map[string]int{}
	handler := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		for _, r := range ev.Records {
			seen[r.Body]++
		}
		if calls == 1 {
			panic("first invocation dies")
		}
		if calls == 2 {
			return events.SQSEventResponse{}, errors.New("second invocation fails")
		}
		return events.SQSEventResponse{}, nil
	}
	r := &runner.Runner{SQS: clients().SQS, Log: slog.New(slog.DiscardHandler), Sources: []runner.Source{{
		Function: "fn", QueueURL: url, QueueARN: arn, Handler: handler, Pollers: 1}}}
	send(t, url, "x")
	start(t, r)
	// Wait for the third delivery and the delete (the queue's counts alone can
	// read zero while a message is between deliveries).
	waitFor(t, "three deliveries and the queue empty", func() bool {
		mu.Lock()
		n := seen["x"]
		mu.Unlock()
		return n >= 3 && visible(t, url) == 0
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 3, seen["x"], "redelivered after the panic and after the error, then deleted")
	require.Equal(t, 2, r.Stats.Snapshot()["fn"].Errors)
}

func TestTickerRunsOnItsSchedule(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	n := 0
	r := &runner.Runner{SQS: clients().SQS, Log: slog.New(slog.DiscardHandler), Tickers: []runner.Ticker{{
		Function: "sweep", Every: 20 * time.Millisecond, Run: func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			n++
			return nil
		}}}}
	start(t, r)
	waitFor(t, "three ticks", func() bool { mu.Lock(); defer mu.Unlock(); return n >= 3 })
}

func TestProvisionIsIdempotent(t *testing.T) {
	t.Parallel()
	topo := topology.Default("rt-idem", "svc")
	ctx := context.Background()
	first, err := provision.Ensure(ctx, clients(), topo)
	require.NoError(t, err)
	again, err := provision.Ensure(ctx, clients(), topo)
	require.NoError(t, err)
	require.Equal(t, first, again)
	require.Len(t, first.QueueURLs, 2*len(topo.Queues()))
	q := topo.SchedulerQueue()
	attrs, err := clients().SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(first.URL(q.Name)),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	require.NoError(t, err)
	require.Equal(t, "180", attrs.Attributes["VisibilityTimeout"], "six times the function timeout")
	var redrive struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     int    `json:"maxReceiveCount"`
	}
	require.NoError(t, json.Unmarshal([]byte(attrs.Attributes["RedrivePolicy"]), &redrive))
	require.Equal(t, first.QueueARNs[q.DLQName], redrive.DeadLetterTargetArn)
	require.Equal(t, 5, redrive.MaxReceiveCount)
	table, err := clients().DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(topo.StateTable())})
	require.NoError(t, err)
	var names []string
	for _, d := range table.Table.GlobalSecondaryIndexes {
		names = append(names, aws.ToString(d.IndexName))
	}
	require.ElementsMatch(t, []string{topology.DeadlineIndex, topology.EndIndex}, names)
}

func TestDelayedMessagesComeBack(t *testing.T) {
	t.Parallel()
	// Hidden for 10 s once received: a delayed message comes back after
	// DelayFor whatever the queue's timeout. Not longer: moto may mark a
	// message received and then fail the receive's answer under concurrent
	// receives, and such a message comes back only after the queue's timeout.
	// A delivery repeated meanwhile is harmless (each body is counted once),
	// and a delay that failed is caught by its warning, not by the clock.
	_, url, arn, _ := queueHiding(t, "rt-delay", 5, 10*time.Second)
	var logs emulatortest.Logs
	var mu sync.Mutex // guards delayed
	delayed := map[string]bool{}
	seen := &bodyCounts{}
	r := &runner.Runner{SQS: clients().SQS, Log: slog.New(slog.NewTextHandler(&logs, nil)), DelayFor: time.Second,
		Faults: func(_ string, m types.Message) runner.Action {
			mu.Lock()
			defer mu.Unlock()
			if !delayed[aws.ToString(m.Body)] {
				delayed[aws.ToString(m.Body)] = true
				return runner.Delay
			}
			return runner.Deliver
		},
		Sources: []runner.Source{{Function: "fn", QueueURL: url, QueueARN: arn, Handler: seen.handle, Pollers: 2}}}
	var bodies []string
	for i := range 25 {
		bodies = append(bodies, fmt.Sprintf("m-%d", i))
	}
	send(t, url, bodies...)
	start(t, r)
	sent := time.Now()
	// Each at least once: a standard queue (and moto, under concurrent
	// receives) may deliver a message twice; the handlers are idempotent.
	waitFor(t, "every delayed message delivered", func() bool { return len(seen.snapshot()) == len(bodies) })
	require.Equal(t, 25, r.Stats.Snapshot()["fn"].FaultsInjected["delayed"], "each message's first receive was delayed")
	require.GreaterOrEqual(t, time.Since(sent), r.DelayFor, "hidden for DelayFor before it came back")
	require.NotContains(t, logs.String(), "delay failed", "every delay hid its message for DelayFor")
}

// bodyCounts is a handler that counts the deliveries of each message body.
type bodyCounts struct {
	mu   sync.Mutex
	seen map[string]int
}

func (b *bodyCounts) handle(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string]int{}
	}
	for _, r := range ev.Records {
		b.seen[r.Body]++
	}
	return events.SQSEventResponse{}, nil
}

func (b *bodyCounts) snapshot() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.seen)
}

// receiveHook tells when a receive returned messages.
type receiveHook struct {
	runner.API
	got chan int
}

func (h receiveHook) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := h.API.ReceiveMessage(ctx, in, opts...)
	if err == nil && len(out.Messages) > 0 {
		h.got <- len(out.Messages)
	}
	return out, err
}

// With a batching window, messages that arrive after the first receive join
// its batch, up to the batch size, and a full batch is invoked at once (the
// minute's window is not waited out); without one, the first receive's
// messages are invoked by themselves.
func TestBatchingWindowFillsTheBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		window time.Duration
	}{{"window", time.Minute}, {"none", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, url, arn, _ := queue(t, "rt-window-"+tc.name, 5)
			batches := make(chan int, 10)
			handler := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				batches <- len(ev.Records)
				return events.SQSEventResponse{}, nil
			}
			hook := receiveHook{API: clients().SQS, got: make(chan int, 10)}
			r := &runner.Runner{SQS: hook, Log: slog.New(slog.DiscardHandler), Sources: []runner.Source{{
				Function: "fn", QueueURL: url, QueueARN: arn, Handler: handler, Pollers: 1, BatchSize: 7, Window: tc.window}}}
			send(t, url, "a", "b", "c")
			start(t, r)
			next := func(c chan int, what string) int {
				select {
				case n := <-c:
					return n
				case <-time.After(30 * time.Second):
					require.FailNow(t, "timed out waiting for "+what)
					return 0
				}
			}
			first := next(hook.got, "the first receive") // one to three of a, b, c
			send(t, url, "d", "e", "f", "g")
			if tc.window > 0 {
				require.Equal(t, 7, next(batches, "the batch"), "all seven in one invocation")
				return
			}
			require.Equal(t, first, next(batches, "the first batch"), "invoked with what the first receive returned")
			for n := first; n < 7; n += next(batches, "the rest") {
			}
		})
	}
}

// failingGather fails the receive that follows each receive that returned
// messages: the batching window's second receive.
type failingGather struct {
	runner.API
	mu     sync.Mutex
	armed  bool
	failed int
}

func (f *failingGather) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	if f.armed {
		f.armed = false
		f.failed++
		f.mu.Unlock()
		return nil, errors.New("injected: receive failed")
	}
	f.mu.Unlock()
	out, err := f.API.ReceiveMessage(ctx, in, opts...)
	if err == nil && len(out.Messages) > 0 {
		f.mu.Lock()
		f.armed = true
		f.mu.Unlock()
	}
	return out, err
}

// A receive that fails while a batch fills does not lose the messages already
// received, nor wait out the window: the function is invoked with them.
func TestBatchingWindowReceiveFailureInvokesWithWhatThereIs(t *testing.T) {
	t.Parallel()
	_, url, arn, _ := queueHiding(t, "rt-window-fail", 5, time.Minute) // no redelivery on a loaded machine
	seen := &bodyCounts{}
	hook := &failingGather{API: clients().SQS}
	r := &runner.Runner{SQS: hook, Log: slog.New(slog.DiscardHandler), Sources: []runner.Source{{
		Function: "fn", QueueURL: url, QueueARN: arn, Handler: seen.handle, Pollers: 1, BatchSize: 7, Window: time.Minute}}}
	send(t, url, "a", "b", "c")
	start(t, r)
	deadline := time.Now().Add(30 * time.Second) // half the window: it must not be waited out
	for len(seen.snapshot()) < 3 {
		require.True(t, time.Now().Before(deadline), "the received messages were not invoked before the window ended")
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1}, seen.snapshot(), "each invoked once")
	hook.mu.Lock()
	defer hook.mu.Unlock()
	require.Positive(t, hook.failed, "a receive while filling a batch failed")
}
