package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/payload"
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
	o := newPayloadOrder(t, c)
	inTurn(t, []namedCase{
		{"TheItemsHoldTheClaimChecksSmall", o.itemsHoldTheChecks},
		{"AStepsDocumentReadsThePayloadsBackWhole", o.documentReadsBackWhole},
		{"ToStreamTheChecksAreLeftAndOnlyTheirBytesReserved", o.streamLeavesTheChecks},
		{"AnUndoReadsItsStepsResultBackWhole", o.undoReadsTheResult},
		{"APayloadGoneIsAnErrorNamingIt", o.payloadGone},
	})
}

// namedCase is one case of a run on one order: each goes on from where the
// one before left the order.
type namedCase struct {
	name string
	run  func(t *testing.T)
}

// inTurn runs cases in turn, each a subtest, and stops at the first that
// fails (those after it would start from an order it did not leave).
func inTurn(t *testing.T, cases []namedCase) {
	for _, c := range cases {
		if !t.Run(c.name, c.run) {
			return
		}
	}
}

// payloadOrder is Payloads' order: its 16 MB body kept by claim check
// (order), its step s0 done with a 16 MB result (answer, kept as result),
// and the attempts the cases claim (next: s1's; undo: s0's undo's).
type payloadOrder struct {
	c              *awsclient.Clients
	k              *kept.Boundary
	s              *statestore.Store
	d              workflow.Definition
	body           string
	order, result  json.RawMessage
	answer         []byte
	st, next, undo statestore.Step
}

// newPayloadOrder submits payloadOrder's order, its body offloaded first,
// and records s0 done with its result offloaded.
func newPayloadOrder(t *testing.T, c *awsclient.Clients) *payloadOrder {
	ctx := context.Background()
	topo := NewTables(t, c.DynamoDB)
	bucket := strings.ToLower(topo.Prefix) + "-payloads"
	require.NoError(t, provision.EnsureBucket(ctx, c.S3, bucket))
	o := &payloadOrder{c: c, k: kept.New(kept.Payloads(c.S3, bucket, 0), nil),
		s: statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards), d: def(3)}

	o.body = `{"orderId":"o-large","doc":"` + strings.Repeat("d", payload.MaxBytes-40) + `"}`
	v, err := o.k.Offload(ctx, "o-large", "order", kept.Unsealed([]byte(o.body), map[string]string{"orderId": "o-large"}))
	require.NoError(t, err)
	o.order = v.JSON()
	created, err := o.s.Submit(ctx, statestore.Submission{OrderID: "o-large", Order: string(o.order), Workflow: o.d, Now: t0})
	require.NoError(t, err)
	require.True(t, created)

	o.st = claimedAs(t, o.s, "o-large", step0, t0)
	o.answer = []byte(`{"pages":"` + strings.Repeat("p", payload.MaxBytes-12) + `"}`)
	require.Len(t, o.answer, payload.MaxBytes)
	v, err = o.k.Offload(ctx, "o-large", "results/s0-r1", kept.Unsealed(o.answer, nil))
	require.NoError(t, err)
	o.result = v.JSON()
	require.NoError(t, o.s.PutResult(ctx, statestore.Result{OrderID: "o-large", Ref: step0, Name: o.st.Name, Round: 1,
		Attempt: o.st.Attempt, JSON: o.result, Now: t0}))
	rec, err := outcome.Recorder{Store: o.s}.Record(ctx, o.d, outcome.Attempt{OrderID: "o-large", Ref: step0, Attempt: o.st.Attempt,
		Round: 1, ResultBytes: len(o.result), Read: o.st.Read, Now: t0})
	require.NoError(t, err)
	require.False(t, rec.Stale)
	return o
}

// itemsHoldTheChecks: the order's item and the result's hold their claim
// checks, and the state item no payload.
func (o *payloadOrder) itemsHoldTheChecks(t *testing.T) {
	ctx := context.Background()
	stored, err := o.s.Order(ctx, "o-large")
	require.NoError(t, err)
	_, checked := payload.Parse([]byte(stored))
	require.True(t, checked, "the order item holds the claim check")
	results, err := o.s.Results(ctx, "o-large", 1)
	require.NoError(t, err)
	_, checked = payload.Parse(results[step0].JSON)
	require.True(t, checked, "the result item holds the claim check")
	size, err := o.s.ItemBytes(ctx, "o-large")
	require.NoError(t, err)
	require.Less(t, size, 4096, "the state item: no payload in it")
}

// documentReadsBackWhole: s1's document holds the order and s0's result,
// read back whole.
func (o *payloadOrder) documentReadsBackWhole(t *testing.T) {
	o.next = claimedAs(t, o.s, "o-large", step1, t0)
	doc, err := document(context.Background(), o.s, o.k, o.next, o.order)
	require.NoError(t, err)
	require.Equal(t, o.body, string(doc.Order), "the order read back whole")
	require.Equal(t, string(o.answer), string(doc.Results["s0"]), "the result read back whole")
}

// streamLeavesTheChecks: to stream, the checks are left in the document,
// for its Agent to read as it sends them, and only their bytes reserved of
// its budget (a budget of 4 KB holds them; read whole, the document is 32
// MB over).
func (o *payloadOrder) streamLeavesTheChecks(t *testing.T) {
	ctx := context.Background()
	small := kept.NewBudget(4096)
	rctx, let := kept.Reserving(ctx, small, time.Time{}, 0)
	doc, err := documentToStream(rctx, o.s, o.k, o.next, o.order)
	let()
	require.NoError(t, err)
	require.JSONEq(t, string(o.order), string(doc.Order), "the order's check, unread")
	require.JSONEq(t, string(o.result), string(doc.Results["s0"]), "the result's check, unread")
	rctx, let = kept.Reserving(ctx, small, time.Time{}, 0)
	_, err = document(rctx, o.s, o.k, o.next, o.order)
	let()
	var large *kept.DocumentError
	require.ErrorAs(t, err, &large, "read whole, over the 4 KB")
}

// undoReadsTheResult: s1 refused, s0's undo reads the order and its step's
// result back.
func (o *payloadOrder) undoReadsTheResult(t *testing.T) {
	r := finish(t, o.s, o.d, o.next, "refused", t0.Add(1))
	require.Equal(t, []workflow.Ref{undo0}, r.Ready)
	o.undo = claimedAs(t, o.s, "o-large", undo0, t0)
	doc, err := document(context.Background(), o.s, o.k, o.undo, o.order)
	require.NoError(t, err)
	require.Equal(t, string(o.answer), string(doc.Result), "the undo's step's result read back whole")
}

// payloadGone: its step is told which payload is gone, and why.
func (o *payloadOrder) payloadGone(t *testing.T) {
	ctx := context.Background()
	ref, _ := payload.Parse(o.result)
	_, err := o.c.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
	require.NoError(t, err)
	_, err = document(ctx, o.s, o.k, o.undo, o.order)
	var gone *payload.Error
	require.ErrorAs(t, err, &gone)
	require.ErrorContains(t, err, ref.Key)
	require.ErrorContains(t, err, fmt.Sprintf("the result of %s", o.st.Name))
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
