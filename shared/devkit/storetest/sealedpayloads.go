package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
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
	o := newSealedOrder(t, c)
	inTurn(t, []namedCase{
		{"ItsStateItemSaysItsDataIsSealed", o.stateItemSaysSealed},
		{"ItsResultIsSealedUnderItsOrdersKey", o.resultSealed},
		{"EachIsKeptInTheObjectFormItsPlaintextAndAHead", o.keptInTheObjectForm},
		{"AStepsDocumentReadsThemBackWholeOpenedWithinTheBudget", o.documentOpensWithinTheBudget},
		{"AnUndoReadsItsStepsResultBackWholeOpened", o.undoOpensTheResult},
		{"AnOrderKeptInTheJSONFormOpens", o.jsonFormOpens},
	})
}

// sealedOrder is SealedPayloads' order: its 16 MB body sealed under its
// own data key and kept by claim check (order), its step s0's 16 MB result
// (answer, kept as result), and the attempts the cases claim (next: s1's;
// undo: s0's undo's).
type sealedOrder struct {
	c              *awsclient.Clients
	x              *seal.Sealer
	k              *kept.Boundary
	s              *statestore.Store
	d              workflow.Definition
	bucket, body   string
	order, result  json.RawMessage
	answer         []byte
	st, next, undo statestore.Step
}

// newSealedOrder submits sealedOrder's order, sealed and offloaded first.
func newSealedOrder(t *testing.T, c *awsclient.Clients) *sealedOrder {
	ctx := context.Background()
	topo := NewTables(t, c.DynamoDB)
	bucket := strings.ToLower(topo.Prefix) + "-sealed"
	require.NoError(t, provision.EnsureBucket(ctx, c.S3, bucket))
	keyID, err := provision.EnsureKey(ctx, c.KMS, "alias/"+strings.ToLower(topo.Prefix)+"-sealed")
	require.NoError(t, err)
	x := seal.New(c.KMS, keyID)
	o := &sealedOrder{c: c, x: x, k: kept.New(kept.Payloads(c.S3, bucket, 0), x), bucket: bucket,
		s: statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards), d: def(3)}

	const top = `{"orderId":"o-sealed","doc":"`
	o.body = top + strings.Repeat("d", payload.MaxBytes-len(top)-2) + `"}`
	require.Equal(t, payload.MaxBytes, len(o.body))
	sealed, err := o.k.SealOrder(ctx, "o-sealed", []byte(o.body), map[string]string{"orderId": "o-sealed"})
	require.NoError(t, err)
	v, err := o.k.Offload(ctx, "o-sealed", "order", sealed)
	require.NoError(t, err)
	o.order = v.JSON()
	require.Contains(t, string(o.order), seal.KeyMember, "its claim check keeps its data key")
	created, err := o.s.Submit(ctx, statestore.Submission{OrderID: "o-sealed", Order: string(o.order), Sealed: true, Workflow: o.d, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	return o
}

// stateItemSaysSealed: its state item says its data is sealed (a
// Submission with no data key keeps none of its events' data), and a clear
// order's says not.
func (o *sealedOrder) stateItemSaysSealed(t *testing.T) {
	ctx := context.Background()
	created, err := o.s.Submit(ctx, statestore.Submission{OrderID: "o-clear", Order: `{"orderId":"o-clear"}`, Workflow: o.d, Now: t0})
	require.NoError(t, err)
	require.True(t, created)
	for id, sealed := range map[string]bool{"o-sealed": true, "o-clear": false} {
		task, _, err := o.s.Load(ctx, id)
		require.NoError(t, err)
		require.Equal(t, sealed, task.Sealed, id)
	}
}

// resultSealed: s0's 16 MB answer sealed under its order's key, kept and
// recorded as s0's result.
func (o *sealedOrder) resultSealed(t *testing.T) {
	ctx := context.Background()
	o.st = claimedAs(t, o.s, "o-sealed", step0, t0)
	o.answer = []byte(`{"pages":"` + strings.Repeat("p", payload.MaxBytes-12) + `"}`)
	sealed, err := o.k.Seal(ctx, "o-sealed", kept.Stored(o.order), o.answer)
	require.NoError(t, err)
	v, err := o.k.Offload(ctx, "o-sealed", "results/s0-r1", sealed)
	require.NoError(t, err)
	o.result = v.JSON()
	require.NoError(t, o.s.PutResult(ctx, statestore.Result{OrderID: "o-sealed", Ref: step0, Name: o.st.Name, Round: 1,
		Attempt: o.st.Attempt, JSON: o.result, Now: t0}))
	rec, err := outcome.Recorder{Store: o.s}.Record(ctx, o.d, outcome.Attempt{OrderID: "o-sealed", Ref: step0, Attempt: o.st.Attempt,
		Round: 1, ResultBytes: len(o.answer), Read: o.st.Read, Now: t0})
	require.NoError(t, err)
	require.False(t, rec.Stale)
}

// keptInTheObjectForm: the order and the result each weigh their plaintext
// and their seal's head, in an object of the sealed suffix, in the object
// form.
func (o *sealedOrder) keptInTheObjectForm(t *testing.T) {
	for _, check := range []json.RawMessage{o.order, o.result} {
		ref, ok := payload.Parse(check)
		require.True(t, ok)
		require.Less(t, ref.Bytes, payload.MaxBytes+1024, "%s: its plaintext and its seal's head", ref)
		require.True(t, strings.HasSuffix(ref.Key, payload.SealedSuffix), ref.Key)
		out, err := o.c.S3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &ref.Bucket, Key: &ref.Key,
			Range: aws.String("bytes=0-63")})
		require.NoError(t, err)
		head, err := io.ReadAll(out.Body)
		out.Body.Close()
		require.NoError(t, err)
		require.True(t, seal.IsObject(head), "%s: a 16 MB payload sealed in the object form", ref)
	}
}

// documentOpensWithinTheBudget: s1's document holds the order and s0's
// result read back whole and opened, within the budget of an Agent of 128
// MB; to stream it, it is read whole too.
func (o *sealedOrder) documentOpensWithinTheBudget(t *testing.T) {
	o.next = claimedAs(t, o.s, "o-sealed", step1, t0)
	doc := inBudget(t, func(ctx context.Context) (workflow.Document, error) { return document(ctx, o.s, o.k, o.next, o.order) })
	require.Equal(t, o.body, string(doc.Order), "the order read back whole, opened")
	require.Equal(t, string(o.answer), string(doc.Results["s0"]), "the result read back whole, opened")
	doc = inBudget(t, func(ctx context.Context) (workflow.Document, error) {
		return documentToStream(ctx, o.s, o.k, o.next, o.order)
	})
	require.Equal(t, o.body, string(doc.Order), "sealed: read whole to stream it too")
}

// undoOpensTheResult: s1 refused, s0's undo reads its step's result back
// whole, opened, within the budget.
func (o *sealedOrder) undoOpensTheResult(t *testing.T) {
	r := finish(t, o.s, o.d, o.next, "refused", t0.Add(1))
	require.Equal(t, []workflow.Ref{undo0}, r.Ready)
	o.undo = claimedAs(t, o.s, "o-sealed", undo0, t0)
	doc := inBudget(t, func(ctx context.Context) (workflow.Document, error) { return document(ctx, o.s, o.k, o.undo, o.order) })
	require.Equal(t, string(o.answer), string(doc.Result), "the undo's step's result read back whole, opened")
}

// jsonFormOpens: an order kept in the JSON form, as before the object
// form, reads back.
func (o *sealedOrder) jsonFormOpens(t *testing.T) {
	old := legacyOrder(t, o.c, o.x, o.s, o.bucket, "o-sealed-json")
	next := claimedAs(t, o.s, "o-sealed-json", step0, t0)
	doc, err := document(context.Background(), o.s, o.k, next, old.order)
	require.NoError(t, err)
	require.Equal(t, old.body, string(doc.Order), "an order kept in the JSON form opens")
}

// inBudget is what read reads within the payload budget of an Agent of 128
// MB.
func inBudget(t *testing.T, read func(context.Context) (workflow.Document, error)) workflow.Document {
	t.Helper()
	rctx, let := kept.Reserving(context.Background(), kept.BudgetFor(128), time.Time{}, 0)
	defer let()
	doc, err := read(rctx)
	require.NoError(t, err)
	return doc
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
