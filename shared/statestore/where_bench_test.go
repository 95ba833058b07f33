package statestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// whereFixture is searchFixture for searches by where an order is: n
// orders on DynamoDB Local, `matches` of them (failed-0…) refused at
// their one step (Failed), the rest (done-0…) Processed, and an operator
// on the store.
type whereFixture struct {
	searchFixture
	op   *operator.Operator
	step string
}

func newWhereFixture(tb testing.TB, n, matches int) whereFixture {
	tb.Helper()
	f, ddb, topo := meteredStore(tb, "where", n)
	f.matches = matches
	def := workflow.Single(workflow.Settings{})
	endAt(tb, f.store, def, "done-tpl", "")
	endAt(tb, f.store, def, "failed-tpl", "card refused")
	alerted(tb, ddb, topo.StateTable(), "failed-tpl")
	// The templates are two of the orders: one processed, one refused.
	fill(tb, ddb, templates(tb, ddb, "done-tpl", topo.OrdersTable(), topo.StateTable()), n-matches-1, "done-", topo.DeadlineShards)
	fill(tb, ddb, templates(tb, ddb, "failed-tpl", topo.OrdersTable(), topo.StateTable()), matches-1, "failed-", topo.DeadlineShards)
	return whereFixture{searchFixture: f, op: &operator.Operator{Store: f.store}, step: def.Steps[0].Name}
}

// endAt submits order id and ends it: refused (with refusal) or done.
func endAt(tb testing.TB, s *statestore.Store, def workflow.Definition, id, refusal string) {
	tb.Helper()
	ctx := context.Background()
	now := time.Now()
	_, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`, Workflow: def, Now: now})
	require.NoError(tb, err)
	st, err := s.Claim(ctx, statestore.Claim{OrderID: id, Ref: workflow.Ref{}, Agent: def.Steps[0].Agent, Owner: "agent", Now: now})
	require.NoError(tb, err)
	d, err := s.Definition(ctx, id)
	require.NoError(tb, err)
	_, err = outcome.Recorder{Store: s}.Record(ctx, d, outcome.Attempt{OrderID: id, Ref: workflow.Ref{}, Attempt: st.Attempt,
		Round: 1, Refusal: refusal, Now: now})
	require.NoError(tb, err)
}

// alerted has the Supervisor's alert of order id's failure sent: out of
// the deadline index, as a failed order is within a sweep or two.
func alerted(tb testing.TB, db *dynamodb.Client, table, id string) {
	tb.Helper()
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: &table,
		Key: map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: id},
			topology.KeySort: &types.AttributeValueMemberS{Value: "TASK"}},
		UpdateExpression: aws.String("REMOVE DueShard, DueAt, Ua")})
	require.NoError(tb, err)
}

// byWhere lists the orders refused at the step, as sasctl list --step
// --reason refused does (the operator's route: the indexes).
func (f whereFixture) byWhere(next string) ([]statestore.Task, string, error) {
	return f.op.ListTasks(context.Background(), operator.Search{Step: f.step, Reason: "refused"}, 100, next)
}

// byWhereScan lists the same orders by a scan, as before the end index.
func (f whereFixture) byWhereScan(next string) ([]statestore.Task, string, error) {
	return f.store.SearchTasks(context.Background(), statestore.TaskFilter{Step: f.step, Reason: "refused"}, 100, next)
}

// A search by step and reason reads the orders not ended and those ended
// other than Processed: with thousands of orders processed, the same items
// as with none.
func TestWhereSearchCostFollowsTheOrdersFound(t *testing.T) {
	t.Parallel()
	alone := newWhereFixture(t, 21, 20)
	crowd := newWhereFixture(t, 2020, 20)
	_, itemsAlone, nAlone := alone.cost(t, alone.byWhere)
	rcuCrowd, itemsCrowd, nCrowd := crowd.cost(t, crowd.byWhere)
	require.Equal(t, 20, nAlone)
	require.Equal(t, 20, nCrowd)
	require.Equal(t, itemsAlone, itemsCrowd, "items read with 2000 processed orders vs one")
	require.Equal(t, int64(40), itemsCrowd, "an index entry and a state item per order found")
	rcuScan, itemsScan, nScan := crowd.cost(t, crowd.byWhereScan)
	require.Equal(t, 20, nScan)
	require.Greater(t, itemsScan, int64(2000), "a scan reads the table")
	t.Logf("20 orders refused among 2020: by the indexes %d items, %.1f RCU; by scan %d items, %.1f RCU", itemsCrowd, rcuCrowd, itemsScan, rcuScan)
}

// BenchmarkListByWhere lists the SAS_SEARCH_MATCHES orders (default 100)
// refused at a step among SAS_SEARCH_ORDERS (default 10000), the rest
// processed, by the operator's route (the end index) and by a scan, and
// reports the items and read units each reads per order found.
func BenchmarkListByWhere(b *testing.B) {
	n, matches := envInt("SAS_SEARCH_ORDERS", 10000), envInt("SAS_SEARCH_MATCHES", 100)
	start := time.Now()
	f := newWhereFixture(b, n, matches)
	b.Logf("%d orders filled in %s", n, time.Since(start).Round(time.Second))
	f.bench(b, n, listing{"index", f.byWhere}, listing{"scan", f.byWhereScan})
}
