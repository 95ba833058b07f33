package tracing

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The standard OpenTelemetry variables the exporter reads
// (https://opentelemetry.io/docs/specs/otel/protocol/exporter/): the
// collector's base URL (its traces at /v1/traces) or the traces' own URL,
// the headers each request carries (key=value,… percent-encoded:
// Honeycomb's x-honeycomb-team=KEY), the protocol, a request's timeout in
// milliseconds and its compression (gzip or none). Each traces-specific
// variable wins over its general one.
const (
	EndpointEnv       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	TracesEndpointEnv = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	HeadersEnv        = "OTEL_EXPORTER_OTLP_HEADERS"
	ProtocolEnv       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	TimeoutEnv        = "OTEL_EXPORTER_OTLP_TIMEOUT"
	CompressionEnv    = "OTEL_EXPORTER_OTLP_COMPRESSION"
)

// DefaultEndpoint is where spans go with SAS_TRACING=otlp and no endpoint
// named: the AWS Distro for OpenTelemetry Lambda layer's collector.
const DefaultEndpoint = "http://localhost:4318"

// Exporter is the exporter of the standard variables: OpenTelemetry's own
// (otlptrace, which turns the spans into OTLP's messages) over an OTLP/HTTP
// client that posts them as protobuf (application/x-protobuf, the encoding
// every collector takes) to the traces URL. (otlptracehttp would do the same,
// but its package links gRPC and grpc-gateway, 9 MB a binary: docs/cost.md.)
func Exporter(ctx context.Context) (*otlptrace.Exporter, error) {
	c, err := clientFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return otlptrace.New(ctx, c)
}

// setupOTLP installs a provider exporting over OTLP/HTTP, its spans in
// batches, sampled as OTEL_TRACES_SAMPLER says (the SDK reads it: every
// trace by default) and its service named service unless OTEL_SERVICE_NAME
// (or OTEL_RESOURCE_ATTRIBUTES) names another.
func setupOTLP(ctx context.Context, service string) (*sdktrace.TracerProvider, error) {
	exp, err := Exporter(ctx)
	if err != nil {
		return nil, err
	}
	fromEnv, err := resource.New(ctx, resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName(cmp.Or(service, "sas"))), fromEnv)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	Use(tp)
	return tp, nil
}

// httpClient posts the spans to an OTLP/HTTP receiver (otlptrace.Client).
type httpClient struct {
	url     string
	headers map[string]string
	timeout time.Duration
	gzip    bool
	http    *http.Client
}

// clientFromEnv reads the standard variables through getenv.
func clientFromEnv(getenv func(string) string) (*httpClient, error) {
	either := func(traces, general string) string { return cmp.Or(getenv(traces), getenv(general)) }
	c := &httpClient{url: getenv(TracesEndpointEnv), headers: map[string]string{}, timeout: 10 * time.Second, http: &http.Client{}}
	if c.url == "" {
		c.url = strings.TrimSuffix(cmp.Or(getenv(EndpointEnv), DefaultEndpoint), "/") + "/v1/traces"
	}
	if u, err := url.Parse(c.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the OTLP endpoint %q is not an http(s) URL", c.url)
	}
	switch p := either("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", ProtocolEnv); p {
	case "", "http/protobuf":
	default:
		return nil, fmt.Errorf("%s=%s: this exporter speaks http/protobuf (the OTLP/HTTP default every collector takes)", ProtocolEnv, p)
	}
	for _, kv := range strings.Split(either("OTEL_EXPORTER_OTLP_TRACES_HEADERS", HeadersEnv), ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		if dv, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
			v = dv
		}
		c.headers[k] = strings.TrimSpace(v)
	}
	if t := either("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", TimeoutEnv); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%s=%q: milliseconds", TimeoutEnv, t)
		}
		c.timeout = time.Duration(ms) * time.Millisecond
	}
	switch z := either("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", CompressionEnv); z {
	case "", "none":
	case "gzip":
		c.gzip = true
	default:
		return nil, fmt.Errorf("%s=%s: gzip or none", CompressionEnv, z)
	}
	return c, nil
}

// Start does nothing: each upload is a request of its own.
func (c *httpClient) Start(context.Context) error { return nil }

// Stop closes the idle connections.
func (c *httpClient) Stop(context.Context) error { c.http.CloseIdleConnections(); return nil }

// UploadTraces posts an ExportTraceServiceRequest of spans, retrying an
// answer that asks to (429, 502, 503, 504) or a failed connection a few
// times within the timeout.
func (c *httpClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := exportRequest(spans)
	if err != nil {
		return err
	}
	if c.gzip {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, _ = w.Write(body)
		if err := w.Close(); err != nil {
			return err
		}
		body = z.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := c.post(ctx, body)
		var again retryable
		if err == nil || !errors.As(err, &again) || attempt == 4 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (then %w)", err, ctx.Err())
		case <-time.After(max(wait, again.after)):
		}
		wait *= 2
	}
}

// retryable is a failure worth another attempt, after at least after.
type retryable struct {
	err   error
	after time.Duration
}

func (r retryable) Error() string { return r.err.Error() }

// post sends body once.
func (c *httpClient) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if c.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return retryable{err: err}
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	err = fmt.Errorf("OTLP receiver %s answered %s: %s", c.url, resp.Status, bytes.TrimSpace(msg))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		s, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return retryable{err: err, after: time.Duration(s) * time.Second}
	}
	return err
}

// exportRequest is the protobuf of an ExportTraceServiceRequest: its one
// field, resource_spans = 1, repeated (OTLP's collector/trace/v1; its Go
// package would link gRPC).
func exportRequest(spans []*tracepb.ResourceSpans) ([]byte, error) {
	var b []byte
	for _, rs := range spans {
		m, err := proto.Marshal(rs)
		if err != nil {
			return nil, err
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b, nil
}
