package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Payloads runs an order at the largest payloads on the engine c names
// (DynamoDB) beside moto's S3: a 16 MB order and a 16 MB result kept by
// claim check (shared/kept). The items hold the checks, small; a step's
// document, and an undo's, made of what the store keeps (Inputs) and opened
// through the boundary, read back the payloads whole; a payload gone is a
// *payload.Error naming it.
func Payloads(t *testing.T, c *awsclient.Clients) {
	ctx := context.Background()
	topo := NewTables(t, c.DynamoDB)
	bucket := strings.ToLower(topo.Prefix) + "-payloads"
	require.NoError(t, provision.EnsureBucket(ctx, c.S3, bucket))
	k := kept.New(kept.Payloads(c.S3, bucket, 0), nil)
	s := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	d := def(3)

	body := `{"orderId":"o-large","doc":"` + strings.Repeat("d", payload.MaxBytes-40) + `"}`
	v, err := k.Offload(ctx, "o-large", "order", kept.Unsealed([]byte(body), map[string]string{"orderId": "o-large"}))
	require.NoError(t, err)
	order := v.JSON()
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-large", Order: string(order), Workflow: d, Now: t0})
	require.NoError(t, err)
	require.True(t, created)

	st := claimedAs(t, s, "o-large", step0, t0)
	answer := []byte(`{"pages":"` + strings.Repeat("p", payload.MaxBytes-12) + `"}`)
	require.Len(t, answer, payload.MaxBytes)
	v, err = k.Offload(ctx, "o-large", "results/s0-r1", kept.Unsealed(answer, nil))
	require.NoError(t, err)
	result := v.JSON()
	require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: "o-large", Ref: step0, Name: st.Name, Round: 1,
		Attempt: st.Attempt, JSON: result, Now: t0}))
	rec, err := outcome.Recorder{Store: s}.Record(ctx, d, outcome.Attempt{OrderID: "o-large", Ref: step0, Attempt: st.Attempt,
		Round: 1, ResultBytes: len(result), Read: st.Read, Now: t0})
	require.NoError(t, err)
	require.False(t, rec.Stale)

	stored, err := s.Order(ctx, "o-large")
	require.NoError(t, err)
	_, checked := payload.Parse([]byte(stored))
	require.True(t, checked, "the order item holds the claim check")
	results, err := s.Results(ctx, "o-large", 1)
	require.NoError(t, err)
	_, checked = payload.Parse(results[step0].JSON)
	require.True(t, checked, "the result item holds the claim check")
	size, err := s.ItemBytes(ctx, "o-large")
	require.NoError(t, err)
	require.Less(t, size, 4096, "the state item: no payload in it")

	next := claimedAs(t, s, "o-large", step1, t0)
	doc, err := document(ctx, s, k, next, order)
	require.NoError(t, err)
	require.Equal(t, body, string(doc.Order), "the order read back whole")
	require.Equal(t, string(answer), string(doc.Results["s0"]), "the result read back whole")

	// To stream: the checks left in the document, for its Agent to read
	// as it sends them, and only their bytes reserved of its budget (a
	// budget of 4 KB holds them; read whole, the document is 32 MB over).
	small := kept.NewBudget(4096)
	rctx, let := kept.Reserving(ctx, small, time.Time{}, 0)
	doc, err = documentToStream(rctx, s, k, next, order)
	let()
	require.NoError(t, err)
	require.JSONEq(t, string(order), string(doc.Order), "the order's check, unread")
	require.JSONEq(t, string(result), string(doc.Results["s0"]), "the result's check, unread")
	rctx, let = kept.Reserving(ctx, small, time.Time{}, 0)
	_, err = document(rctx, s, k, next, order)
	let()
	var large *kept.DocumentError
	require.ErrorAs(t, err, &large, "read whole, over the 4 KB")

	// s1 refused: s0's undo reads the order and its step's result back.
	r := finish(t, s, d, next, "refused", t0.Add(1))
	require.Equal(t, []workflow.Ref{undo0}, r.Ready)
	undo := claimedAs(t, s, "o-large", undo0, t0)
	doc, err = document(ctx, s, k, undo, order)
	require.NoError(t, err)
	require.Equal(t, string(answer), string(doc.Result), "the undo's step's result read back whole")

	// Gone: its step is told which payload, and why.
	ref, _ := payload.Parse(result)
	_, err = c.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
	require.NoError(t, err)
	_, err = document(ctx, s, k, undo, order)
	var gone *payload.Error
	require.ErrorAs(t, err, &gone)
	require.ErrorContains(t, err, ref.Key)
	require.ErrorContains(t, err, fmt.Sprintf("the result of %s", st.Name))
}

// SealedPayloads runs an order of a deployment that seals its data (KMS
// being moto's) at the largest payloads on the engine c names: a 16 MB
// order and a 16 MB result, sealed under the order's data key and kept in
// the object form (shared/kept). Each weighs its plaintext and a few
// hundred bytes, so a step's document and an undo's, read whole and opened
// (sealed data is not streamed), fit the payload budget of an Agent of the
// smallest memory (128 MB). An order whose payloads were kept in the JSON
// form (before the object form existed) reads back as well, weighing what
// it is kept as.
func SealedPayloads(t *testing.T, c *awsclient.Clients) {
	ctx := context.Background()
	topo := NewTables(t, c.DynamoDB)
	bucket := strings.ToLower(topo.Prefix) + "-sealed"
	require.NoError(t, provision.EnsureBucket(ctx, c.S3, bucket))
	keyID, err := provision.EnsureKey(ctx, c.KMS, "alias/"+strings.ToLower(topo.Prefix)+"-sealed")
	require.NoError(t, err)
	x := seal.New(c.KMS, keyID)
	k := kept.New(kept.Payloads(c.S3, bucket, 0), x)
	s := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	d := def(3)
	inBudget := func(read func(context.Context) (workflow.Document, error)) workflow.Document {
		t.Helper()
		rctx, let := kept.Reserving(ctx, kept.BudgetFor(128), time.Time{}, 0)
		defer let()
		doc, err := read(rctx)
		require.NoError(t, err)
		return doc
	}

	const top = `{"orderId":"o-sealed","doc":"`
	body := top + strings.Repeat("d", payload.MaxBytes-len(top)-2) + `"}`
	require.Equal(t, payload.MaxBytes, len(body))
	sealed, err := k.SealOrder(ctx, "o-sealed", []byte(body), map[string]string{"orderId": "o-sealed"})
	require.NoError(t, err)
	v, err := k.Offload(ctx, "o-sealed", "order", sealed)
	require.NoError(t, err)
	order := v.JSON()
	require.Contains(t, string(order), seal.KeyMember, "its claim check keeps its data key")
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-sealed", Order: string(order), Sealed: true, Workflow: d, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	// Its state item says its data is sealed (a Submission with no data key
	// keeps none of its events' data), and a clear order's says not.
	created, err = s.Submit(ctx, statestore.Submission{OrderID: "o-clear", Order: `{"orderId":"o-clear"}`, Workflow: d, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	for id, sealed := range map[string]bool{"o-sealed": true, "o-clear": false} {
		task, _, err := s.Load(ctx, id)
		require.NoError(t, err)
		require.Equal(t, sealed, task.Sealed, id)
	}

	st := claimedAs(t, s, "o-sealed", step0, t0)
	answer := []byte(`{"pages":"` + strings.Repeat("p", payload.MaxBytes-12) + `"}`)
	sealed, err = k.Seal(ctx, "o-sealed", kept.Stored(order), answer)
	require.NoError(t, err)
	v, err = k.Offload(ctx, "o-sealed", "results/s0-r1", sealed)
	require.NoError(t, err)
	result := v.JSON()
	require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: "o-sealed", Ref: step0, Name: st.Name, Round: 1,
		Attempt: st.Attempt, JSON: result, Now: t0}))
	rec, err := outcome.Recorder{Store: s}.Record(ctx, d, outcome.Attempt{OrderID: "o-sealed", Ref: step0, Attempt: st.Attempt,
		Round: 1, ResultBytes: len(answer), Read: st.Read, Now: t0})
	require.NoError(t, err)
	require.False(t, rec.Stale)
	for _, check := range []json.RawMessage{order, result} {
		ref, ok := payload.Parse(check)
		require.True(t, ok)
		require.Less(t, ref.Bytes, payload.MaxBytes+1024, "%s: its plaintext and its seal's head", ref)
		require.True(t, strings.HasSuffix(ref.Key, payload.SealedSuffix), ref.Key)
		out, err := c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: &ref.Bucket, Key: &ref.Key, Range: aws.String("bytes=0-63")})
		require.NoError(t, err)
		head, err := io.ReadAll(out.Body)
		out.Body.Close()
		require.NoError(t, err)
		require.True(t, seal.IsObject(head), "%s: a 16 MB payload sealed in the object form", ref)
	}

	next := claimedAs(t, s, "o-sealed", step1, t0)
	doc := inBudget(func(ctx context.Context) (workflow.Document, error) { return document(ctx, s, k, next, order) })
	require.Equal(t, body, string(doc.Order), "the order read back whole, opened")
	require.Equal(t, string(answer), string(doc.Results["s0"]), "the result read back whole, opened")
	doc = inBudget(func(ctx context.Context) (workflow.Document, error) { return documentToStream(ctx, s, k, next, order) })
	require.Equal(t, body, string(doc.Order), "sealed: read whole to stream it too")

	r := finish(t, s, d, next, "refused", t0.Add(1))
	require.Equal(t, []workflow.Ref{undo0}, r.Ready)
	undo := claimedAs(t, s, "o-sealed", undo0, t0)
	doc = inBudget(func(ctx context.Context) (workflow.Document, error) { return document(ctx, s, k, undo, order) })
	require.Equal(t, string(answer), string(doc.Result), "the undo's step's result read back whole, opened")

	// Kept in the JSON form, as before the object form: it reads back.
	old := legacyOrder(t, c, x, s, bucket, "o-sealed-json")
	next = claimedAs(t, s, "o-sealed-json", step0, t0)
	doc, err = document(ctx, s, k, next, old.order)
	require.NoError(t, err)
	require.Equal(t, old.body, string(doc.Order), "an order kept in the JSON form opens")
}

// document is record st's document as its Agent reads it whole: what the
// store keeps of it (statestore.Store.Inputs), opened through k (nil:
// inline values only, none sealed).
func document(ctx context.Context, s *statestore.Store, k *kept.Boundary, st statestore.Step, order json.RawMessage) (workflow.Document, error) {
	in, err := s.Inputs(ctx, st, kept.Stored(order))
	if err != nil {
		return workflow.Document{}, err
	}
	doc, err := k.Document(ctx, in)
	return doc.Document, err
}

// documentToStream is document with the values in the payload bucket left
// for its Agent to stream (kept.Boundary.DocumentToStream).
func documentToStream(ctx context.Context, s *statestore.Store, k *kept.Boundary, st statestore.Step, order json.RawMessage) (workflow.Document, error) {
	in, err := s.Inputs(ctx, st, kept.Stored(order))
	if err != nil {
		return workflow.Document{}, err
	}
	doc, err := k.DocumentToStream(ctx, in)
	return doc.Document, err
}

// legacy is an order kept in the JSON form, and its body.
type legacy struct {
	order json.RawMessage
	body  string
}

// legacyOrder submits an order of 1 MB whose payload was kept sealed in the
// JSON form, as before the object form existed (written as it is: the
// boundary would keep it in the object form).
func legacyOrder(t *testing.T, c *awsclient.Clients, x *seal.Sealer, s *statestore.Store, bucket, id string) legacy {
	ctx := context.Background()
	body := `{"orderId":"` + id + `","doc":"` + strings.Repeat("j", 1<<20) + `"}`
	key, err := x.NewKey(ctx, id)
	require.NoError(t, err)
	sealed, err := key.Seal([]byte(body), map[string]string{"orderId": id})
	require.NoError(t, err)
	sum := sha256.Sum256(sealed)
	ref := payload.Ref{Bucket: bucket, Key: payload.Key(id, "order", sum), Bytes: len(sealed), SHA256: hex.EncodeToString(sum[:])}
	_, err = c.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: &ref.Bucket, Key: &ref.Key, Body: bytes.NewReader(sealed)})
	require.NoError(t, err)
	order := payload.Check(ref, map[string]string{"orderId": id, seal.KeyMember: base64.StdEncoding.EncodeToString(key.Blob())})
	created, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: string(order), Sealed: true, Workflow: def(3), Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	return legacy{order: order, body: body}
}
