package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// bucketObjects is a payload bucket in memory (payload.Store's reads and
// checks are tested on moto; here the subject is the Agent's use of them).
type bucketObjects struct {
	payload.API
	mu    sync.Mutex
	byKey map[string][]byte
	cut   atomic.Bool // every body's reads fail from now on (a connection reset)
}

func (o *bucketObjects) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	b, err := io.ReadAll(in.Body)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.byKey[aws.ToString(in.Key)] = b
	return &s3.PutObjectOutput{}, err
}

func (o *bucketObjects) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.byKey[aws.ToString(in.Key)]
	if !ok {
		return nil, &types.NoSuchKey{Message: aws.String("no such key")}
	}
	return &s3.GetObjectOutput{Body: &networkBody{r: bytes.NewReader(b), cut: &o.cut}, ContentLength: aws.Int64(int64(len(b)))}, nil
}

// networkBody reads as an S3 response's body does: in pieces of 16 KB, a
// little time apart, and failing once closed.
type networkBody struct {
	r      io.Reader
	closed atomic.Bool
	cut    *atomic.Bool
}

func (b *networkBody) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errors.New("http: read on closed response body")
	}
	if b.cut.Load() {
		return 0, errors.New("read: connection reset by peer")
	}
	time.Sleep(50 * time.Microsecond) // the network's pace: a service may answer before the last piece
	return b.r.Read(p[:min(len(p), 16<<10)])
}

func (b *networkBody) Close() error {
	b.closed.Store(true)
	return nil
}

// streamDoc is a store whose step's document is an order and one result
// before the step kept in the bucket, by claim check (statestore.Store's
// Inputs are tested on both engines): the order it keeps, whatever the
// request carries.
type streamDoc struct {
	*claims
	order, result json.RawMessage
}

func (d streamDoc) Inputs(_ context.Context, st statestore.Step, _ kept.Value) (kept.Inputs, error) {
	return kept.Inputs{OrderID: st.OrderID, Order: kept.Stored(d.order), Results: []kept.Part{{Name: "scan", Value: kept.Stored(d.result)}}}, nil
}

// streamed is an Agent whose step's document is a 1 MB order and a 1 MB
// result, kept in its bucket, and what its service received whole (its
// Content-Length of bytes).
func streamed(t *testing.T) (f *fixture, h *agent.Handler, objects *bucketObjects, refs []payload.Ref, whole func() [][]byte, want []byte) {
	t.Helper()
	var mu sync.Mutex
	var bodies [][]byte
	f, h, objects, refs, want = streamedTo(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil || int64(len(b)) != r.ContentLength {
			return // the request broke off: a server acts on no part of a body
		}
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		fmt.Fprint(w, `{"reserved":true}`)
	})
	return f, h, objects, refs, func() [][]byte { mu.Lock(); defer mu.Unlock(); return bodies }, want
}

// streamedTo is streamed's Agent calling a service that serves as serve.
func streamedTo(t *testing.T, serve http.HandlerFunc) (f *fixture, h *agent.Handler, objects *bucketObjects, refs []payload.Ref, want []byte) {
	t.Helper()
	srv := httptest.NewServer(serve)
	t.Cleanup(srv.Close)
	return streamedBy(t, &agent.HTTPRemote{Endpoint: srv.URL, Service: "inventory", Client: srv.Client()}, &bucketObjects{byKey: map[string][]byte{}})
}

// streamedBy is streamed's Agent on remote, its bucket objects.
func streamedBy(t *testing.T, remote agent.Remote, objects *bucketObjects) (f *fixture, h *agent.Handler, _ *bucketObjects, refs []payload.Ref, want []byte) {
	t.Helper()
	store := payload.New(objects, "bucket", 0)
	order := []byte(`{"orderId":"o-1","scan":"` + strings.Repeat("o", 1<<20) + `"}`)
	result := []byte(`{"pages":"` + strings.Repeat("p", 1<<20) + `"}`)
	f = newFixture(t, remotesim.Faults{})
	var checks []json.RawMessage
	for _, obj := range []struct {
		what string
		b    []byte
	}{{"order", order}, {"results/scan-r1", result}} {
		ref, err := store.Put(context.Background(), "o-1", obj.what, obj.b, false)
		require.NoError(t, err)
		refs = append(refs, ref)
		checks = append(checks, payload.Check(ref, nil))
	}
	d := workflow.Orders(workflow.Settings{})
	h = agent.New(agent.Config{Workflows: workflow.MustSet(d), Name: "inventory", InstanceID: "agent-inventory/test", CallTimeout: 10 * time.Second},
		agent.Deps{Remote: remote,
			Breaker: &resilience.Breaker{Threshold: 100, Cooldown: time.Second}, Store: streamDoc{claims: f.claims, order: checks[0], result: checks[1]},
			Outcomes: recorder{f.claims}, Send: f.out, Metrics: metrics.New(f.tally, "agent"), Log: slog.New(slog.DiscardHandler), Kept: kept.New(store, nil),
			Budget: kept.BudgetFor(128)})
	want = []byte(`{"order":` + string(order) + `,"results":{"scan":` + string(result) + `}}`)
	return f, h, objects, refs, want
}

// A step whose input is its whole document sends it as it is read back
// from the bucket: its service receives the document, its length told.
func TestAStepsDocumentIsStreamedFromTheBucket(t *testing.T) {
	t.Parallel()
	f, h, _, _, whole, want := streamed(t)
	resp, err := h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Len(t, whole(), 1)
	require.Equal(t, want, whole()[0])
	require.Equal(t, []string{"complete o-1 attempt 3"}, f.claims.recorded)
}

// A payload of the document that is not as kept when it is sent fails the
// step with the reason: its service never has the whole of a body (the
// payload's last byte is not sent), and so acts on none. One that is gone
// fails it before any byte is sent.
func TestAPayloadNotAsKeptFailsItsStepAndItsServiceNeverHasIt(t *testing.T) {
	t.Parallel()
	f, h, objects, refs, whole, _ := streamed(t)
	objects.byKey[refs[1].Key][1000] = 'X' // the result, altered, as long
	_, err := h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Empty(t, whole(), "its service had no whole body")
	require.Len(t, f.claims.recorded, 1)
	require.Contains(t, f.claims.recorded[0], "fail o-1 attempt 3: reserve's input: payload "+refs[1].String()+": its bytes are not the ones kept (SHA-256 differs)")

	f, h, objects, refs, whole, _ = streamed(t)
	delete(objects.byKey, refs[0].Key)
	_, err = h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Empty(t, whole())
	require.Len(t, f.claims.recorded, 1)
	require.Contains(t, f.claims.recorded[0], "fail o-1 attempt 3: reserve's input: payload "+refs[0].String()+": not found")
}

// earlyRefuser is a service in Go that refuses a streamed input once it has
// read a little of it, as a proxy refuses a body too large, while the rest
// of the input's reading fails (the connection cut).
type earlyRefuser struct{ objects *bucketObjects }

func (earlyRefuser) Apply(context.Context, string, string, []byte) ([]byte, error) {
	panic("its input is streamed")
}

func (e earlyRefuser) ApplyInput(ctx context.Context, _, _ string, in *agent.Input) ([]byte, error) {
	r, err := in.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if _, err := io.CopyN(io.Discard, r, 100<<10); err != nil {
		return nil, err
	}
	e.objects.cut.Store(true)
	if _, err := r.Read(make([]byte, 1)); err == nil {
		return nil, errors.New("the input read on past its cut")
	}
	return nil, &agent.PermanentError{Status: http.StatusRequestEntityTooLarge, Body: "too large"}
}

// A service that answers before it has read its streamed input (a proxy's
// 413 for a body too large) answered: its refusal fails the step, whatever
// the reading of the input, cut off by the answer, met then. Taken for a
// call not made, the step would be given back and called again for ever.
// A service in Go whose input's reading fails before it refuses, at once;
// an HTTP service that answers 413 before reading it all, ten times over.
func TestAServiceThatAnswersBeforeReadingItsInputAnswered(t *testing.T) {
	t.Parallel()
	objects := &bucketObjects{byKey: map[string][]byte{}}
	f, h, _, _, _ := streamedBy(t, earlyRefuser{objects}, objects)
	resp, err := h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Len(t, f.claims.recorded, 1)
	require.Contains(t, f.claims.recorded[0], "fail o-1 attempt 3: remote refused the request permanently (HTTP 413): too large")

	for i := range 10 {
		f, h, _, _, _ := streamedTo(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.CopyN(io.Discard, r.Body, 100<<10) // its limit read, the rest refused
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			fmt.Fprint(w, "too large")
		})
		resp, err := h.Handle(context.Background(), request("o-1"))
		require.NoError(t, err)
		require.Empty(t, resp.BatchItemFailures, "try %d", i)
		require.Len(t, f.claims.recorded, 1, "try %d", i)
		require.Contains(t, f.claims.recorded[0], "fail o-1 attempt 3: remote refused the request permanently (HTTP 413): too large", "try %d", i)
	}
}
