package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/devkit/handlerbench"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The agent's own work per message: decode the request, claim and record (a
// stand-in that answers at once), check the breaker, encode the reply. The remote
// answers at once; the queue only encodes.
type instantRemote struct{}

func (instantRemote) Apply(_ context.Context, action, key string, _ []byte) ([]byte, error) {
	return []byte(`{"action":"` + action + `","key":"` + key + `"}`), nil
}

func BenchmarkAgentPerMessage(b *testing.B) {
	store := &claims{timeout: time.Hour}
	h := agent.New(agent.Config{Workflows: workflow.MustSet(workflow.Orders(workflow.Settings{})), Name: "payment", InstanceID: "agent-payment/bench", ResponseQueueURL: "q", DLQURL: "dlq"},
		agent.Deps{Remote: instantRemote{}, Breaker: &resilience.Breaker{Threshold: 100, Cooldown: time.Second},
			Store: store, Outcomes: recorder{store}, Send: handlerbench.EncodeOnly{}, Metrics: metrics.New(io.Discard, "agent"),
			Log: slog.New(slog.DiscardHandler)})
	var bodies []string
	for i := range 10 {
		bodies = append(bodies, fmt.Sprintf(`{"orderId":"o-%d","step":1,"stepName":"charge-payment"}`, i))
	}
	handlerbench.Run(b, h.Handle, handlerbench.Batch(bodies...))
}

// largeDoc is a store whose step's document is a 16 MB order and a 16 MB
// result before it, made afresh for each attempt as the payload bucket's
// reads are (and, once the input is made, garbage).
type largeDoc struct{ *claims }

func (largeDoc) Document(context.Context, statestore.Step, json.RawMessage) (workflow.Document, error) {
	return workflow.Document{Order: pad(`{"orderId":"o-1","doc":"`, 'd'), Results: map[string]json.RawMessage{"scan": pad(`{"pages":"`, 'p')}}, nil
}

// pad is a JSON object of head, a string of c, and its end, 64 bytes short
// of the largest result.
func pad(head string, c byte) json.RawMessage {
	b := make([]byte, workflow.MaxResultLimit-64)
	copy(b, head)
	for i := len(head); i < len(b)-2; i++ {
		b[i] = c
	}
	copy(b[len(b)-2:], `"}`)
	return b
}

// discardObjects is a payload bucket that reads what it is given, as S3's
// upload does, and keeps nothing.
type discardObjects struct{ payload.API }

func (discardObjects) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	_, err := io.Copy(io.Discard, in.Body)
	return &s3.PutObjectOutput{}, err
}

// BenchmarkAgentAtTheLimits is an Agent's whole attempt at the limits: a
// 16 MB order and a 16 MB result before it in its document, its input sent
// to an HTTP service that answers 16 MB, the answer checked and kept in the
// payload bucket. peak-rss-MB is the process's high-water mark (the test
// binary's own few MB in it): run it under the GOMEMLIMIT a function of 128
// MB or 256 MB runs with (infra: four fifths),
// GOMEMLIMIT=102MiB go test -run '^$' -bench AgentAtTheLimits -benchtime 5x ./shared/agent.
func BenchmarkAgentAtTheLimits(b *testing.B) {
	def := workflow.Orders(workflow.Settings{})
	def.ResultLimit = workflow.MaxResultLimit
	// The service streams its 16 MB answer from 64 KB: the process's
	// memory is the Agent's.
	chunk := bytes.Repeat([]byte("p"), 64<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := workflow.MaxResultLimit - 64
		w.Header().Set("Content-Length", fmt.Sprint(n))
		_, _ = w.Write([]byte(`{"pages":"`))
		for left := n - 12; left > 0; left -= len(chunk) {
			_, _ = w.Write(chunk[:min(left, len(chunk))])
		}
		_, _ = w.Write([]byte(`"}`))
	}))
	b.Cleanup(srv.Close)
	store := largeDoc{claims: &claims{timeout: time.Hour}}
	h := agent.New(agent.Config{Workflows: workflow.MustSet(def), Name: "inventory", InstanceID: "agent-inventory/bench",
		ResponseQueueURL: "q", DLQURL: "dlq", CallTimeout: time.Minute},
		agent.Deps{Remote: &agent.HTTPRemote{Endpoint: srv.URL, Service: "inventory", Client: srv.Client()},
			Breaker: &resilience.Breaker{Threshold: 100, Cooldown: time.Second}, Store: store, Outcomes: recorder{store.claims},
			Send: handlerbench.EncodeOnly{}, Metrics: metrics.New(io.Discard, "agent"), Log: slog.New(slog.DiscardHandler),
			Payloads: payload.New(discardObjects{}, "bench", 0)})
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: `{"orderId":"o-1","step":0,"stepName":"reserve-inventory"}`}}}
	for b.Loop() {
		resp, err := h.Handle(context.Background(), ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			b.Fatal(err, resp)
		}
	}
	b.ReportMetric(peakRSS(), "peak-rss-MB")
}

// peakRSS is the process's resident high-water mark, in MB (VmHWM).
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var n float64
			_, _ = fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), &n)
			return n / 1024
		}
	}
	return 0
}
