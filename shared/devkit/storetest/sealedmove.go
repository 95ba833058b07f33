package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

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

// MovedSealedData moves orders of a deployment that seals its data (KMS
// and S3 being moto's) by a plan that rewrites the order's data and a
// result: one order inline, one whose data is in the payload bucket. What
// the move keeps again is sealed under the order's own data key (its other
// results still open), in the bucket its claim checks name, and the next
// step's document reads the data and the result rewritten.
func MovedSealedData(t *testing.T, c *awsclient.Clients) {
	ctx := context.Background()
	topo := NewTables(t, c.DynamoDB)
	bucket := strings.ToLower(topo.Prefix) + "-moved"
	require.NoError(t, provision.EnsureBucket(ctx, c.S3, bucket))
	keyID, err := provision.EnsureKey(ctx, c.KMS, "alias/"+strings.ToLower(topo.Prefix)+"-moved")
	require.NoError(t, err)
	submitter := kept.New(kept.Payloads(c.S3, bucket, 0), seal.New(c.KMS, keyID))
	operator := kept.New(nil, kept.Sealer(c.KMS, "")).Over(c.S3, "") // told no bucket: the order's claim checks name it
	s := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	v1, v2 := versions()
	v2.Migrate.Transform = workflow.Transform{Order: `.amount |= tonumber`, Results: map[string]string{"s0": `.score |= tonumber`}}
	for id, pad := range map[string]int{"o-inline": 10, "o-bucket": 2 * payload.DefaultInline} {
		sent := `{"orderId":"` + id + `","amount":"12","pad":"` + strings.Repeat("p", pad) + `"}`
		sealed, err := submitter.SealOrder(ctx, id, []byte(sent), map[string]string{"orderId": id})
		require.NoError(t, err)
		v, err := submitter.Offload(ctx, id, "order", sealed)
		require.NoError(t, err)
		_, err = s.Submit(ctx, statestore.Submission{OrderID: id, Order: string(v.JSON()), Sealed: true, Workflow: v1, Now: t0})
		require.NoError(t, err)
		st := claimedAs(t, s, id, step0, t0)
		answer, err := submitter.Seal(ctx, id, v, []byte(`{"score":"700"}`))
		require.NoError(t, err)
		result, err := submitter.Offload(ctx, id, "results/s0-r1", answer)
		require.NoError(t, err)
		require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: id, Ref: step0, Name: st.Name, Round: 1, Attempt: st.Attempt,
			JSON: result.JSON(), Now: t0}))
		_, err = outcome.Recorder{Store: s}.Record(ctx, v1, outcome.Attempt{OrderID: id, Ref: step0, Attempt: st.Attempt, Round: 1,
			ResultBytes: 15, Read: st.Read, Now: t0})
		require.NoError(t, err)

		moved, err := s.Migrate(ctx, statestore.Move{OrderID: id, To: v2, By: "ops", Now: t0, Kept: operator})
		require.NoError(t, err, id)
		require.True(t, moved.Rewritten, id)
		stored, err := s.Order(ctx, id)
		require.NoError(t, err)
		now := kept.Stored([]byte(stored))
		require.True(t, now.Sealed(), "%s: its data rewritten is sealed, its data key beside it", id)
		require.Equal(t, v.Bucket(), now.Bucket(), "%s: in the bucket its claim checks named", id)
		require.NotContains(t, stored, "ppp", id)
		was, err := s.WasSent(ctx, id, sent)
		require.NoError(t, err)
		require.True(t, was, id)

		next := claimedAs(t, s, id, workflow.Ref{Index: v2.Index("s1")}, t0)
		in, err := s.Inputs(ctx, next, now)
		require.NoError(t, err)
		doc, err := submitter.Document(ctx, in)
		require.NoError(t, err, "%s: the next step reads what the move kept, with the deployment's key", id)
		var got struct {
			Amount any `json:"amount"`
		}
		require.NoError(t, json.Unmarshal(doc.Order, &got))
		require.Equal(t, 12.0, got.Amount, id)
		require.JSONEq(t, `{"score":700}`, string(doc.Results["s0"]), id)
		results, err := s.Results(ctx, id, 1)
		require.NoError(t, err)
		s0 := results[workflow.Ref{Index: v2.Index("s0")}].JSON
		require.True(t, seal.IsSealed(s0), "%s: the result rewritten is sealed: %s", id, s0)
	}
}
