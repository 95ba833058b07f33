// Package tracing makes one OpenTelemetry trace of an order across its
// hops: the trace context travels in each SQS message's attributes (W3C
// traceparent and tracestate), each handler makes a span of each message it
// takes (sqsbatch.Processor), each remote call a client span (otelhttp, whose
// traceparent header reaches the service), and each AWS call a span
// (otelaws). It is off unless the environment asks for it: the standard
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) sends
// the spans over OTLP/HTTP to any OpenTelemetry collector (Jaeger, Grafana
// Tempo, Honeycomb); SAS_TRACING=otlp alone sends them to the AWS Distro for
// OpenTelemetry Lambda layer's collector on localhost:4318, which sends them
// to X-Ray.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Env is the variable that turns tracing on: "otlp" exports over OTLP/HTTP
// (to OTEL_EXPORTER_OTLP_ENDPOINT, by default the ADOT layer's collector on
// localhost:4318); "off": no spans are made, whatever else is set; unset:
// on if an OTLP endpoint is named (EndpointEnv, TracesEndpointEnv).
const Env = "SAS_TRACING"

// Enabled reports whether tracing is on: Env says so, or an OTLP endpoint
// is named (and neither Env=off, OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none says otherwise), or a program (a test)
// installed a provider with Use.
func Enabled() bool {
	if used.Load() {
		return true
	}
	switch v := strings.ToLower(os.Getenv(Env)); v {
	case "off":
		return false
	case "":
		return (os.Getenv(EndpointEnv) != "" || os.Getenv(TracesEndpointEnv) != "") &&
			!strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") && !strings.EqualFold(os.Getenv("OTEL_TRACES_EXPORTER"), "none")
	default:
		return true
	}
}

// used: Use installed a provider.
var used atomic.Bool

// Use installs tp as the global tracer provider and turns tracing on (a
// test's in-memory exporter; a program's own provider). The clients and
// handlers built after it are instrumented.
func Use(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	used.Store(true)
}

// Flushed is h, flushing the spans at the end of each invocation (a Lambda
// environment is frozen between invocations: spans left in a batch would
// wait until the next one, or be lost).
func Flushed[In, Out any](flush func(context.Context) error, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		out, err := h(ctx, in)
		if ferr := flush(ctx); ferr != nil {
			slog.Warn("spans not flushed", "err", ferr)
		}
		return out, err
	}
}

// HTTPTransport is base with a client span per request and the trace
// context in its traceparent header, when tracing is on (else base).
func HTTPTransport(base http.RoundTripper) http.RoundTripper {
	if !Enabled() {
		return base
	}
	return otelhttp.NewTransport(base)
}

// AWSMiddlewares adds a span per AWS call to an SDK configuration's
// middlewares, when tracing is on.
func AWSMiddlewares(opts *[]func(*middleware.Stack) error) {
	if Enabled() {
		*opts = append(*opts, awsSpans)
	}
}

// propagator carries the trace context in message attributes and headers.
var propagator = propagation.TraceContext{}

// Tracer is the product's tracer (from the global provider: a no-op one
// until Setup or a test sets another).
func Tracer() trace.Tracer { return otel.Tracer("github.com/sas-go/sas") }

// Setup installs the global tracer provider when tracing is on (Enabled),
// for the service named (a Lambda function: submission, agent-payment…;
// OTEL_SERVICE_NAME wins), exporting over OTLP/HTTP as the standard
// variables say (Exporter), and returns what flushes its spans (a Lambda
// invocation's are flushed at its end: Flushed). With tracing off it
// installs nothing. The exporter is in every build: OpenTelemetry's SDK and
// OTLP's protobuf messages add 1.9 MB to a bootstrap, within its 16 MB (docs/cost.md).
func Setup(ctx context.Context, service string) (flush func(context.Context) error, err error) {
	if !Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	if v := strings.ToLower(os.Getenv(Env)); v != "" && v != "otlp" {
		return nil, fmt.Errorf("%s=%q: the exporter is otlp (or off)", Env, v)
	}
	tp, err := setupOTLP(ctx, service)
	if err != nil {
		return nil, err
	}
	return tp.ForceFlush, nil
}

// Attributes are the SQS message attributes that carry ctx's trace context
// (none if ctx has no span: tracing is off).
func Attributes(ctx context.Context) map[string]types.MessageAttributeValue {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	out := make(map[string]types.MessageAttributeValue, len(c))
	for k, v := range c {
		out[k] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	return out
}

// FromMessage is ctx with the trace context a message carries: its
// traceparent attribute, or else the X-Ray trace header Lambda sets on it
// (system attribute AWSTraceHeader, when its sender was traced by X-Ray);
// ctx itself if it carries neither.
func FromMessage(ctx context.Context, rec events.SQSMessage) context.Context {
	c := propagation.MapCarrier{}
	for _, k := range propagator.Fields() {
		if a, ok := rec.MessageAttributes[k]; ok && a.StringValue != nil {
			c[k] = *a.StringValue
		}
	}
	if len(c) > 0 {
		return propagator.Extract(ctx, c)
	}
	if sc, ok := fromXRay(rec.Attributes["AWSTraceHeader"]); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// fromXRay reads an X-Ray trace header (Root=1-5759e988-bd862e3fe1be46a994272793;
// Parent=53995c3f42cd8ad8;Sampled=1): the same trace in W3C's ids (the
// Root's time and random parts are the trace id's 32 hex digits).
func fromXRay(h string) (trace.SpanContext, bool) {
	var root, parent string
	sampled := false
	for _, part := range strings.Split(h, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Root":
			root = v
		case "Parent":
			parent = v
		case "Sampled":
			sampled = v == "1"
		}
	}
	fields := strings.Split(root, "-")
	if len(fields) != 3 || fields[0] != "1" {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(fields[1] + fields[2])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(parent)
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags trace.TraceFlags
	if sampled {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}), true
}
