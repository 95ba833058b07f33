package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// The exporter reads the standard variables: a base endpoint gets
// /v1/traces, a traces endpoint is used as it is, the headers are
// percent-decoded, and what it cannot do (gRPC, JSON, an unknown
// compression) or a bad value is an error that says so.
func TestTheExporterReadsTheStandardVariables(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := clientFromEnv(env())
	require.NoError(t, err)
	require.Equal(t, "http://localhost:4318/v1/traces", c.url, "the ADOT layer's collector")
	c, err = clientFromEnv(env(EndpointEnv, "https://api.honeycomb.io/", HeadersEnv, "x-honeycomb-team=a%2Cb,x-honeycomb-dataset = sas", TimeoutEnv, "2500"))
	require.NoError(t, err)
	require.Equal(t, "https://api.honeycomb.io/v1/traces", c.url)
	require.Equal(t, map[string]string{"x-honeycomb-team": "a,b", "x-honeycomb-dataset": "sas"}, c.headers)
	require.Equal(t, 2500*time.Millisecond, c.timeout)
	c, err = clientFromEnv(env(EndpointEnv, "http://a:4318", TracesEndpointEnv, "http://tempo:4318/otlp/v1/traces", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "k=v"))
	require.NoError(t, err)
	require.Equal(t, "http://tempo:4318/otlp/v1/traces", c.url)
	require.Equal(t, map[string]string{"k": "v"}, c.headers)
	for want, e := range map[string]func(string) string{
		"speaks http/protobuf":    env(ProtocolEnv, "grpc"),
		"is not an http(s) URL":   env(EndpointEnv, "localhost:4318"),
		"milliseconds":            env(TimeoutEnv, "10s"),
		"gzip or none":            env(CompressionEnv, "zstd"),
		"http/json: this exporte": env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
	} {
		_, err := clientFromEnv(e)
		require.ErrorContains(t, err, want)
	}
}

// A receiver that asks to be retried (503) is tried again; one that refuses
// (400) is not.
func TestAnUploadIsRetriedOnlyWhenTheReceiverAsks(t *testing.T) {
	var calls atomic.Int32
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(status)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := clientFromEnv(func(k string) string { return map[string]string{EndpointEnv: srv.URL}[k] })
	require.NoError(t, err)
	spans := []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{Name: "s"}}}}}}
	require.NoError(t, c.UploadTraces(context.Background(), spans))
	require.EqualValues(t, 2, calls.Load())
	calls.Store(0)
	status = http.StatusBadRequest
	require.ErrorContains(t, c.UploadTraces(context.Background(), spans), "400 Bad Request")
	require.EqualValues(t, 1, calls.Load())
}
