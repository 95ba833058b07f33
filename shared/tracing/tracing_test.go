package tracing_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/sqsbatch"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/tracing"
	"github.com/sas-go/sas/shared/workflow"
)

var motoEndpoint string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMoto(m, &motoEndpoint)) }

// The trace context of a span travels in a message's attributes and comes
// back out of them; a message without them leaves the context as it was.
func TestTheTraceContextTravelsInMessageAttributes(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "send")
	defer span.End()
	require.Nil(t, tracing.Attributes(context.Background()), "no span, nothing to carry")
	attrs := tracing.Attributes(ctx)
	require.Contains(t, attrs, "traceparent")
	in := map[string]events.SQSMessageAttribute{}
	for k, v := range attrs {
		in[k] = events.SQSMessageAttribute{DataType: "String", StringValue: v.StringValue}
	}
	got := trace.SpanContextFromContext(tracing.FromMessage(context.Background(), events.SQSMessage{MessageAttributes: in}))
	require.Equal(t, span.SpanContext().TraceID(), got.TraceID())
	require.Equal(t, span.SpanContext().SpanID(), got.SpanID())
	require.True(t, got.IsRemote())
	bare := context.Background()
	require.Equal(t, bare, tracing.FromMessage(bare, events.SQSMessage{}))

	// A message whose sender X-Ray traced: Lambda's AWSTraceHeader.
	xray := tracing.FromMessage(bare, events.SQSMessage{Attributes: map[string]string{
		"AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"}})
	sc := trace.SpanContextFromContext(xray)
	require.Equal(t, "5759e988bd862e3fe1be46a994272793", sc.TraceID().String())
	require.Equal(t, "53995c3f42cd8ad8", sc.SpanID().String())
	require.True(t, sc.IsSampled())
	for _, bad := range []string{"Root=2-5759e988-bd86;Parent=53995c3f42cd8ad8", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=xyz", "nonsense"} {
		require.Equal(t, bare, tracing.FromMessage(bare, events.SQSMessage{Attributes: map[string]string{"AWSTraceHeader": bad}}), bad)
	}
}

// An order through the local pipeline is one trace: Submission's span, the
// Scheduler's and each Agent's, their HTTP calls to the services and their
// DynamoDB calls, across every queue between them. (A batch of messages a
// handler sends at once is sent outside any one record's span: its
// SendMessageBatch is a trace of its own; each message carries its own
// record's trace context.) The spans reach an OpenTelemetry collector over
// OTLP/HTTP by the standard variables alone: OTEL_EXPORTER_OTLP_ENDPOINT
// names a receiver of the test's own, which gets them as protobuf (gzipped,
// as OTEL_EXPORTER_OTLP_COMPRESSION asks), with the headers
// OTEL_EXPORTER_OTLP_HEADERS names (Honeycomb's key) and the service
// OTEL_SERVICE_NAME names.
func TestAnOrderIsOneTrace(t *testing.T) {
	rcv := newCollector(t)
	require.True(t, tracing.Enabled(), "the endpoint alone turns tracing on")
	flush, err := tracing.Setup(context.Background(), "sas-test")
	require.NoError(t, err)

	sim := remotesim.New(1)
	srv, err := sim.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	stack, err := localrun.New(context.Background(), localrun.Options{Endpoint: motoEndpoint,
		Prefix: fmt.Sprintf("tr%d", time.Now().UnixNano()%1e6), RemoteURL: srv.URL, VisibilityTimeout: 5 * time.Second,
		SupervisorEvery: 200 * time.Millisecond, Settings: workflow.Settings{StepTimeout: 8 * time.Second, PickupTimeout: 2 * time.Second}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = stack.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.NoError(t, stack.SendOrders(context.Background(), localrun.DemoOrder("o-tr1", 1).JSON()))
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	tasks, err := stack.WaitEnded(wctx, []string{"o-tr1"}, 100*time.Millisecond, nil)
	require.NoError(t, err)
	require.Equal(t, workflow.Processed, tasks["o-tr1"].State)
	// The order ends in the Scheduler while the last agent's invocation may
	// still be ending (its span with it, after its reply): every
	// invocation ended, then the spans flushed.
	cancel()
	<-done
	require.NoError(t, flush(context.Background()))

	// What the collector received: the trace Submission's span of the order began.
	spans, requests := rcv.received(t)
	require.NotZero(t, requests)
	byTrace, consumers := map[string][]string{}, 0
	for _, s := range spans {
		id := fmt.Sprintf("%x", s.TraceId)
		byTrace[id] = append(byTrace[id], s.Name)
		if s.Kind == tracepb.Span_SPAN_KIND_CONSUMER { // a handler's span of a message: it names the order
			var order string
			for _, a := range s.Attributes {
				if a.Key == sqsbatch.OrderIDAttribute {
					order = a.Value.GetStringValue()
				}
			}
			require.Equal(t, "o-tr1", order, "span %s names its order", s.Name)
			consumers++
		}
	}
	require.GreaterOrEqual(t, consumers, 5, "a span a message: Submission, the Scheduler, three agents")
	var names []string
	for _, ns := range byTrace {
		if slices.Contains(ns, "agent-shipping") {
			names = ns
		}
	}
	require.NotEmpty(t, names, "a trace reached the last agent")
	for _, want := range []string{"submission", "scheduler", "agent-inventory", "agent-payment", "agent-shipping"} {
		require.Contains(t, names, want, "one trace from Submission to the last agent")
	}
	count := func(prefix string) int {
		n := 0
		for _, s := range names {
			if strings.HasPrefix(s, prefix) {
				n++
			}
		}
		return n
	}
	require.GreaterOrEqual(t, count("HTTP POST"), 3, "each remote call a client span: %v", names)
	require.Positive(t, count("DynamoDB."), "the AWS calls too: %v", names)
	for id, ns := range byTrace { // the runner's polls and idle receives make no trace of their own
		aws := 0
		for _, n := range ns {
			if strings.HasPrefix(n, "SQS.") || strings.HasPrefix(n, "DynamoDB.") || strings.HasPrefix(n, "SNS.") {
				aws++
			}
		}
		require.Less(t, aws, len(ns), "trace %s is AWS calls alone, for no order: %v", id, ns)
	}
	seen := sim.Ledger()
	require.Len(t, seen, 3)
	t.Logf("the order's trace: %d spans (%d HTTP calls, %d DynamoDB calls) of %d traces' %d spans, in %d OTLP requests", len(names),
		count("HTTP POST"), count("DynamoDB."), len(byTrace), len(spans), requests)
}

// newCollector is an OTLP/HTTP receiver of the test's own, which the
// standard variables name (its endpoint, headers, compression and service).
func newCollector(t *testing.T) *otlpReceiver {
	rcv := &otlpReceiver{}
	collector := httptest.NewServer(rcv)
	t.Cleanup(collector.Close)
	t.Setenv(tracing.EndpointEnv, collector.URL)
	t.Setenv(tracing.HeadersEnv, "x-honeycomb-team=k%3D1, other = 2")
	t.Setenv(tracing.CompressionEnv, "gzip")
	t.Setenv("OTEL_SERVICE_NAME", "shop")
	return rcv
}

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each request's
// ExportTraceServiceRequest (TracesData has its wire form) and checks what
// every request carries.
type otlpReceiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	requests int
	errs     []string
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fail := func(format string, args ...any) {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
		http.Error(w, "bad request", http.StatusBadRequest)
	}
	switch {
	case req.Method != http.MethodPost || req.URL.Path != "/v1/traces":
		fail("%s %s", req.Method, req.URL.Path)
		return
	case req.Header.Get("Content-Type") != "application/x-protobuf":
		fail("content type %q", req.Header.Get("Content-Type"))
		return
	case req.Header.Get("X-Honeycomb-Team") != "k=1" || req.Header.Get("Other") != "2":
		fail("headers %v", req.Header)
		return
	case req.Header.Get("Content-Encoding") != "gzip":
		fail("not gzipped")
		return
	}
	z, err := gzip.NewReader(req.Body)
	if err != nil {
		fail("gzip: %v", err)
		return
	}
	body, err := io.ReadAll(z)
	if err != nil {
		fail("body: %v", err)
		return
	}
	var data tracepb.TracesData
	if err := proto.Unmarshal(body, &data); err != nil {
		fail("protobuf: %v", err)
		return
	}
	for _, rs := range data.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		if service != "shop" {
			fail("service.name %q, not OTEL_SERVICE_NAME's", service)
			return
		}
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.requests++
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// received are the spans of every request, and how many requests; it fails
// t if any request was wrong.
func (r *otlpReceiver) received(t *testing.T) ([]*tracepb.Span, int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.errs, "every request an OTLP/HTTP export")
	return r.spans, r.requests
}

// An order that waits for a timer and for an event, each brought by what
// is not one of its messages (the Supervisor's sweep, an event sent with
// no trace of its own), is still one trace: both join the trace the order
// kept, and the step after them (the charge) is in it.
func TestAnOrderThatWaitsIsOneTrace(t *testing.T) {
	rcv := newCollector(t)
	flush, err := tracing.Setup(context.Background(), "sas-test")
	require.NoError(t, err)
	def, err := workflow.ParseFile("paced.yaml", []byte(`name: paced
defaults: {timeout: 8s}
agents:
  inventory: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/inventory"}
  payment: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/payment"}
steps:
  - {name: reserve-inventory, agent: inventory, undo: none}
  - {name: cool-off, sleep: 1s}
  - name: await-approval
    wait: {event: approved, timeout: 1h}
  - {name: charge-payment, agent: payment, undo: none}
`), workflow.Options{})
	require.NoError(t, err)

	sim := remotesim.New(1)
	srv, err := sim.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	stack, err := localrun.New(context.Background(), localrun.Options{Endpoint: motoEndpoint,
		Prefix: fmt.Sprintf("tw%d", time.Now().UnixNano()%1e6), RemoteURL: srv.URL, VisibilityTimeout: 5 * time.Second,
		SupervisorEvery: 200 * time.Millisecond, Workflows: workflow.MustSet(def),
		Settings: workflow.Settings{StepTimeout: 8 * time.Second, PickupTimeout: 2 * time.Second}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = stack.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.NoError(t, stack.SendOrders(context.Background(), localrun.DemoOrder("o-tw1", 1).JSON()))
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer wcancel()
	for {
		_, recs, err := stack.Store.Load(wctx, "o-tw1")
		if err != nil && !errors.Is(err, statestore.ErrNotFound) {
			require.NoError(t, err)
		}
		if len(recs) > 2 && !recs[2].Armed.IsZero() { // the timer woken: the wait armed
			break
		}
		select {
		case <-wctx.Done():
			t.Fatal("the order never reached its wait")
		case <-time.After(50 * time.Millisecond):
		}
	}
	require.NoError(t, stack.Signal(context.Background(), message.Event{OrderID: "o-tw1", Event: "approved", EventID: "e-1",
		Data: json.RawMessage(`{"amountCents":5}`)}))
	tasks, err := stack.WaitEnded(wctx, []string{"o-tw1"}, 100*time.Millisecond, nil)
	require.NoError(t, err)
	require.Equal(t, workflow.Processed, tasks["o-tw1"].State)
	require.NotEmpty(t, tasks["o-tw1"].Trace, "the order keeps its trace context")
	cancel()
	<-done
	require.NoError(t, flush(context.Background()))

	spans, _ := rcv.received(t)
	byTrace := map[string][]string{}
	for _, s := range spans {
		id := fmt.Sprintf("%x", s.TraceId)
		byTrace[id] = append(byTrace[id], s.Name)
	}
	var names []string
	for _, ns := range byTrace {
		if slices.Contains(ns, "submission") && slices.Contains(ns, "agent-inventory") {
			names = ns
		}
	}
	for _, want := range []string{"supervisor order", "event approved", "agent-payment"} {
		require.Contains(t, names, want, "the timer's wake, the event and the charge after them are in the order's trace")
	}
}
