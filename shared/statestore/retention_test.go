package statestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// The bytes an ended three-step order keeps in the tables while it is
// retained (docs/cost.md prices them at $0.25 a GB-month, with DynamoDB's
// 100 bytes of overhead an item): its orders item (the demo order as
// sasctl bench sends it) and its state item at its end, each with its
// expiry; the deadline index no longer holds it.
func TestTheBytesAnEndedOrderKeeps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := engines["dynamodb-local"].Clients.DynamoDB
	topo := storetest.NewTables(t, db)
	s := statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards).WithRetention(90 * 24 * time.Hour)
	def := workflow.MustExample(workflow.OrderWorkflow)
	id, now := "bench-0123456789", time.UnixMilli(1_795_777_164_331) // a fixed clock of full digits (DynamoDB sizes a number by its significant digits): the same bytes each run
	_, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: localrun.DemoOrder(id, 1).JSON(), Workflow: def, Now: now})
	require.NoError(t, err)
	for i, st := range def.Steps {
		ref := workflow.Ref{Index: i}
		claimed, err := s.Claim(ctx, statestore.Claim{OrderID: id, Ref: ref, Agent: st.Agent, Owner: "3fa9c2d1e0b4", Now: now})
		require.NoError(t, err)
		_, err = outcome.Recorder{Store: s}.Record(ctx, def, outcome.Attempt{OrderID: id, Ref: ref, Attempt: claimed.Attempt, Round: 1,
			Read: claimed.Read, Now: now})
		require.NoError(t, err)
	}
	size := func(table string, key map[string]types.AttributeValue) int {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
		require.NoError(t, err)
		require.Contains(t, out.Item, statestore.ExpiresAttribute, table)
		require.NotContains(t, out.Item, topology.KeyDueShard, "out of the index")
		return statestore.ItemSize(out.Item)
	}
	orders := size(topo.OrdersTable(), map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: id}})
	state := size(topo.StateTable(), map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: id},
		topology.KeySort: &types.AttributeValueMemberS{Value: "TASK"}})
	t.Logf("an ended three-step order keeps %d bytes: its orders item %d, its state item %d (+100 bytes of overhead each)",
		orders+state, orders, state)
	require.Less(t, state, 1024, "the state item stays under 1 KB")
	require.Less(t, orders+state+200, 1500, "docs/cost.md's storage figure")
}
