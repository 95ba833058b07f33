package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/devkit/handlerbench"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/seal"
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

func (largeDoc) Inputs(_ context.Context, st statestore.Step, _ kept.Value) (kept.Inputs, error) {
	return kept.Inputs{OrderID: st.OrderID, Order: kept.Stored(pad(`{"orderId":"o-1","doc":"`, 'd')),
		Results: []kept.Part{{Name: "scan", Value: kept.Stored(pad(`{"pages":"`, 'p'))}}}, nil
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
	srv := answering16MB(b)
	store := largeDoc{claims: &claims{timeout: time.Hour}}
	attemptAtTheLimits(b, def, srv, agent.Deps{Store: store, Outcomes: recorder{store.claims}, Kept: kept.New(payload.New(discardObjects{}, "bench", 0), nil)})
}

// BenchmarkAgentInputAtTheLimits is BenchmarkAgentAtTheLimits with a step
// whose input expression selects 16 MB of its document (its order's doc,
// 64 bytes short of the largest payload): the document decoded for jq, the
// value it gives encoded, sent, and a 16 MB answer kept:
// GOMEMLIMIT=102MiB go test -run '^$' -bench AgentInputAtTheLimits -benchtime 5x ./shared/agent.
func BenchmarkAgentInputAtTheLimits(b *testing.B) {
	def := workflow.Orders(workflow.Settings{})
	def.ResultLimit = workflow.MaxResultLimit
	def.Steps[0].Input = ".order.doc"
	srv := answering16MB(b)
	store := largeDoc{claims: &claims{timeout: time.Hour}}
	attemptAtTheLimits(b, def, srv, agent.Deps{Store: store, Outcomes: recorder{store.claims}, Kept: kept.New(payload.New(discardObjects{}, "bench", 0), nil),
		Budget: kept.BudgetFor(128)})
	if len(store.claims.recorded) == 0 || store.claims.recorded[0] != "complete o-1 attempt 3" {
		b.Fatalf("not done: %q", store.claims.recorded)
	}
}

// attemptAtTheLimits runs an Agent of def with d (its store, outcomes and
// bucket) on srv, one attempt an iteration, and reports the process's
// peak memory.
func attemptAtTheLimits(b *testing.B, def workflow.Definition, srv *httptest.Server, d agent.Deps) {
	d.Remote = &agent.HTTPRemote{Endpoint: srv.URL, Service: "inventory", Client: srv.Client()}
	d.Breaker = &resilience.Breaker{Threshold: 100, Cooldown: time.Second}
	d.Send, d.Metrics, d.Log = handlerbench.EncodeOnly{}, metrics.New(io.Discard, "agent"), slog.New(slog.DiscardHandler)
	h := agent.New(agent.Config{Workflows: workflow.MustSet(def), Name: "inventory", InstanceID: "agent-inventory/bench",
		ResponseQueueURL: "q", DLQURL: "dlq", CallTimeout: time.Minute}, d)
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: `{"orderId":"o-1","step":0,"stepName":"reserve-inventory"}`}}}
	for b.Loop() {
		resp, err := h.Handle(context.Background(), ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			b.Fatal(err, resp)
		}
	}
	b.ReportMetric(peakRSS(), "peak-rss-MB")
}

// answering16MB is a service that reads its request and answers 16 MB
// (64 bytes short), streamed from 64 KB: the process's memory is the
// Agent's.
func answering16MB(b *testing.B) *httptest.Server {
	return answering(b, `{"pages":"`, workflow.MaxResultLimit-64-12, `"}`)
}

// answering is a service that reads its request and answers head, n bytes
// of "p" and tail, streamed from 64 KB.
func answering(b *testing.B, head string, n int, tail string) *httptest.Server {
	chunk := bytes.Repeat([]byte("p"), 64<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, err := io.Copy(io.Discard, r.Body); err != nil || n != r.ContentLength {
			return // the request broke off
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(head)+n+len(tail)))
		_, _ = w.Write([]byte(head))
		for left := n; left > 0; left -= len(chunk) {
			_, _ = w.Write(chunk[:min(left, len(chunk))])
		}
		_, _ = w.Write([]byte(tail))
	}))
	b.Cleanup(srv.Close)
	return srv
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

// BenchmarkAgentStreamingAtTheLimits is BenchmarkAgentAtTheLimits with its
// document's payloads streamed from the bucket as they are sent (a step
// whose input is its whole document: kept.Boundary.DocumentToStream). The
// bucket makes its two 16 MB objects as they are read, so that the
// process's memory is the Agent's:
// GOMEMLIMIT=102MiB go test -run '^$' -bench AgentStreamingAtTheLimits -benchtime 5x ./shared/agent.
func BenchmarkAgentStreamingAtTheLimits(b *testing.B) {
	def := workflow.Orders(workflow.Settings{})
	def.ResultLimit = workflow.MaxResultLimit
	srv := answering16MB(b)
	objects := madeObjects{}
	store := payload.New(objects, "bench", 0)
	order, result := objects.ref("orders/o-1/order/x", `{"orderId":"o-1","doc":"`, 'd'), objects.ref("orders/o-1/results/scan-r1/x", `{"pages":"`, 'p')
	docs := streamDoc{claims: &claims{timeout: time.Hour}, order: payload.Check(order, nil), result: payload.Check(result, nil)}
	attemptAtTheLimits(b, def, srv, agent.Deps{Store: docs, Outcomes: recorder{docs.claims}, Kept: kept.New(store, nil), Budget: kept.BudgetFor(128)})
}

// madeObjects is a payload bucket whose objects are made as they are read
// (pad's bytes), by key; it keeps what it is given as discardObjects does.
type madeObjects map[string]func() io.Reader

// ref is the Ref of the object of pad(head, c) at key, its hash read once.
func (m madeObjects) ref(key, head string, c byte) payload.Ref {
	m[key] = func() io.Reader { return padReader(head, c) }
	h := sha256.New()
	n, _ := io.Copy(h, m[key]())
	return payload.Ref{Bucket: "bench", Key: key, Bytes: int(n), SHA256: hex.EncodeToString(h.Sum(nil))}
}

func (m madeObjects) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return &s3.GetObjectOutput{Body: io.NopCloser(m[*in.Key]()), ContentLength: aws.Int64(workflow.MaxResultLimit - 64)}, nil
}

func (madeObjects) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return discardObjects{}.PutObject(ctx, in, opts...)
}

func (madeObjects) CopyObject(context.Context, *s3.CopyObjectInput, ...func(*s3.Options)) (*s3.CopyObjectOutput, error) {
	return nil, io.ErrUnexpectedEOF
}

func (madeObjects) ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	return nil, io.ErrUnexpectedEOF
}

// padReader reads pad(head, c) without holding it: head, c, and its end.
func padReader(head string, c byte) io.Reader {
	n := workflow.MaxResultLimit - 64
	return io.MultiReader(strings.NewReader(head), io.LimitReader(repeat(c), int64(n-len(head)-2)), strings.NewReader(`"}`))
}

type repeat byte

func (r repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// BenchmarkAgentSealedAtTheLimits is BenchmarkAgentAtTheLimits for a
// deployment that seals its data, at an Agent's smallest memory: its
// document's 16 MB order and 16 MB result are sealed objects in the bucket
// (the object form), weighed (kept.Value.Weight) and reserved of a 128 MB
// Agent's budget, read back and opened in place (kept.Boundary.Document), and its
// 16 MB answer sealed and kept. The objects are files read as S3 would
// send them, so that the process's memory is the Agent's:
// GOMEMLIMIT=102MiB go test -run '^$' -bench AgentSealedAtTheLimits -benchtime 5x ./shared/agent.
func BenchmarkAgentSealedAtTheLimits(b *testing.B) {
	def := workflow.Orders(workflow.Settings{})
	def.ResultLimit = workflow.MaxResultLimit
	srv := answering16MB(b)
	sealer := seal.New(fixedKMS{}, "bench-key")
	key, err := sealer.NewKey(context.Background(), "o-1")
	if err != nil {
		b.Fatal(err)
	}
	objects := fileObjects{dir: b.TempDir()}
	order := objects.sealed(b, key, "orders/o-1/order/x"+payload.SealedSuffix, pad(`{"orderId":"o-1","doc":"`, 'd'))
	result := objects.sealed(b, key, "orders/o-1/results/scan-r1/x"+payload.SealedSuffix, pad(`{"pages":"`, 'p'))
	docs := sealedDoc{claims: &claims{timeout: time.Hour},
		order:  payload.Check(order, map[string]string{"orderId": "o-1", seal.KeyMember: base64.StdEncoding.EncodeToString(key.Blob())}),
		result: payload.Check(result, nil)}
	forgetPeak(b) // the objects were sealed in this process: their memory is not the Agent's
	attemptAtTheLimits(b, def, srv, agent.Deps{Store: docs, Outcomes: recorder{docs.claims}, Kept: kept.New(payload.New(objects, "bench", 0), sealer),
		Budget: kept.BudgetFor(128)})
}

// BenchmarkAgentSealedTextAtTheLimits is BenchmarkAgentSealedAtTheLimits
// with an answer that is not JSON, as large as its kept form may be (16 MB,
// two bytes short: quoted, it is the limit): the answer as it came, its
// kept form (a JSON string) and that sealed are the most one attempt holds
// of an answer:
// GOMEMLIMIT=102MiB go test -run '^$' -bench AgentSealedTextAtTheLimits -benchtime 5x ./shared/agent.
func BenchmarkAgentSealedTextAtTheLimits(b *testing.B) {
	def := workflow.Orders(workflow.Settings{})
	def.ResultLimit = workflow.MaxResultLimit
	srv := answering(b, "", workflow.MaxResultLimit-2, "")
	sealer := seal.New(fixedKMS{}, "bench-key")
	key, err := sealer.NewKey(context.Background(), "o-1")
	if err != nil {
		b.Fatal(err)
	}
	objects := fileObjects{dir: b.TempDir()}
	order := objects.sealed(b, key, "orders/o-1/order/x"+payload.SealedSuffix, pad(`{"orderId":"o-1","doc":"`, 'd'))
	result := objects.sealed(b, key, "orders/o-1/results/scan-r1/x"+payload.SealedSuffix, pad(`{"pages":"`, 'p'))
	docs := sealedDoc{claims: &claims{timeout: time.Hour},
		order:  payload.Check(order, map[string]string{"orderId": "o-1", seal.KeyMember: base64.StdEncoding.EncodeToString(key.Blob())}),
		result: payload.Check(result, nil)}
	forgetPeak(b)
	attemptAtTheLimits(b, def, srv, agent.Deps{Store: docs, Outcomes: recorder{docs.claims}, Kept: kept.New(payload.New(objects, "bench", 0), sealer),
		Budget: kept.BudgetFor(128)})
	if len(docs.claims.recorded) == 0 || docs.claims.recorded[0] != "complete o-1 attempt 3" {
		b.Fatalf("not kept: %q", docs.claims.recorded)
	}
}

// forgetPeak returns the memory the process no longer uses to the system
// and starts its high-water mark (peakRSS) again from what it holds now
// (Linux's clear_refs).
func forgetPeak(b *testing.B) {
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("the peak is the process's since it started: %v", err)
	}
}

// sealedDoc is a store whose step's document is a sealed order and a
// sealed result kept in the bucket (their claim checks), which its Agent's
// boundary weighs, reserves, then reads back and opens.
type sealedDoc struct {
	*claims
	order, result json.RawMessage
}

func (d sealedDoc) Order(context.Context, string) (string, error) { return string(d.order), nil }

func (d sealedDoc) Inputs(_ context.Context, st statestore.Step, order kept.Value) (kept.Inputs, error) {
	return kept.Inputs{OrderID: st.OrderID, Order: order, Results: []kept.Part{{Name: "scan", Value: kept.Stored(d.result)}}}, nil
}

// fixedKMS is a KMS whose every data key is the same, its blob naming the
// order it was made for.
type fixedKMS struct{}

var fixedKey = bytes.Repeat([]byte{7}, 32)

func (fixedKMS) GenerateDataKey(_ context.Context, in *kms.GenerateDataKeyInput, _ ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	return &kms.GenerateDataKeyOutput{Plaintext: fixedKey, CiphertextBlob: []byte("blob of " + in.EncryptionContext["orderId"])}, nil
}

func (fixedKMS) Decrypt(_ context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	if string(in.CiphertextBlob) != "blob of "+in.EncryptionContext["orderId"] {
		return nil, &kmstypes.InvalidCiphertextException{Message: aws.String("not this order's")}
	}
	return &kms.DecryptOutput{Plaintext: fixedKey}, nil
}

// fileObjects is a payload bucket whose objects are files of dir, sent as
// they are read; it keeps what it is given as discardObjects does.
type fileObjects struct {
	discardObjects
	dir string
}

// sealed keeps plain sealed by key at key's name, and returns its Ref.
func (f fileObjects) sealed(b *testing.B, key seal.Key, name string, plain []byte) payload.Ref {
	obj, err := key.SealObject(plain)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, hex.EncodeToString([]byte(name))), obj, 0o600); err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(obj)
	return payload.Ref{Bucket: "bench", Key: name, Bytes: len(obj), SHA256: hex.EncodeToString(sum[:])}
}

func (f fileObjects) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	file, err := os.Open(filepath.Join(f.dir, hex.EncodeToString([]byte(*in.Key))))
	if err != nil {
		return nil, err
	}
	info, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, err
	}
	return &s3.GetObjectOutput{Body: file, ContentLength: aws.Int64(info.Size())}, nil
}
