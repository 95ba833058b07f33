package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Payloads runs an order at the largest payloads on the engine c names
// (DynamoDB) beside moto's S3: a 16 MB order and a 16 MB result kept by
// claim check. The items hold the checks, small; a step's document, and
// an undo's, read back the payloads whole; a payload gone is a
// *payload.Error naming it.
func Payloads(t *testing.T, c *awsclient.Clients) {
	ctx := context.Background()
	topo := NewTables(t, c.DynamoDB)
	bucket := strings.ToLower(topo.Prefix) + "-payloads"
	require.NoError(t, provision.EnsureBucket(ctx, c.S3, bucket))
	p := payload.New(c.S3, bucket, 0)
	s := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards).WithPayloads(p)
	d := def(3)

	body := `{"orderId":"o-large","doc":"` + strings.Repeat("d", payload.MaxBytes-40) + `"}`
	order, err := p.Keep(ctx, "o-large", "order", []byte(body), map[string]string{"orderId": "o-large"})
	require.NoError(t, err)
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-large", Order: string(order), Workflow: d, Now: t0})
	require.NoError(t, err)
	require.True(t, created)

	st := claimedAs(t, s, "o-large", step0, t0)
	answer := []byte(`{"pages":"` + strings.Repeat("p", payload.MaxBytes-12) + `"}`)
	require.Len(t, answer, payload.MaxBytes)
	kept, err := p.Keep(ctx, "o-large", "results/s0-r1", answer, nil)
	require.NoError(t, err)
	require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: "o-large", Ref: step0, Name: st.Name, Round: 1,
		Attempt: st.Attempt, JSON: kept, Now: t0}))
	rec, err := outcome.Recorder{Store: s}.Record(ctx, d, outcome.Attempt{OrderID: "o-large", Ref: step0, Attempt: st.Attempt,
		Round: 1, ResultBytes: len(kept), Read: st.Read, Now: t0})
	require.NoError(t, err)
	require.False(t, rec.Stale)

	stored, err := s.Order(ctx, "o-large")
	require.NoError(t, err)
	require.True(t, payload.IsCheck([]byte(stored)), "the order item holds the claim check")
	results, err := s.Results(ctx, "o-large", 1)
	require.NoError(t, err)
	require.True(t, payload.IsCheck(results[step0].JSON), "the result item holds the claim check")
	size, err := s.ItemBytes(ctx, "o-large")
	require.NoError(t, err)
	require.Less(t, size, 4096, "the state item: no payload in it")

	next := claimedAs(t, s, "o-large", step1, t0)
	doc, err := s.Document(ctx, next, order)
	require.NoError(t, err)
	require.Equal(t, body, string(doc.Order), "the order read back whole")
	require.Equal(t, string(answer), string(doc.Results["s0"]), "the result read back whole")

	// To stream: the checks left in the document, for its Agent to read
	// as it sends them, and only their bytes reserved of its budget (a
	// budget of 4 KB holds them; read whole, the document is 32 MB over).
	small := payload.NewBudget(4096)
	rctx, let := payload.Reserving(ctx, small, time.Time{}, 0)
	doc, err = s.DocumentToStream(rctx, next, order)
	let()
	require.NoError(t, err)
	require.JSONEq(t, string(order), string(doc.Order), "the order's check, unread")
	require.JSONEq(t, string(kept), string(doc.Results["s0"]), "the result's check, unread")
	rctx, let = payload.Reserving(ctx, small, time.Time{}, 0)
	_, err = s.Document(rctx, next, order)
	let()
	var large *payload.DocumentError
	require.ErrorAs(t, err, &large, "read whole, over the 4 KB")

	// s1 refused: s0's undo reads the order and its step's result back.
	r := finish(t, s, d, next, "refused", t0.Add(1))
	require.Equal(t, []workflow.Ref{undo0}, r.Ready)
	undo := claimedAs(t, s, "o-large", undo0, t0)
	doc, err = s.Document(ctx, undo, order)
	require.NoError(t, err)
	require.Equal(t, string(answer), string(doc.Result), "the undo's step's result read back whole")

	// Gone: its step is told which payload, and why.
	ref, _ := payload.Parse(kept)
	_, err = c.S3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
	require.NoError(t, err)
	_, err = s.Document(ctx, undo, order)
	var gone *payload.Error
	require.ErrorAs(t, err, &gone)
	require.ErrorContains(t, err, ref.Key)
	require.ErrorContains(t, err, fmt.Sprintf("the result of %s", st.Name))
}
