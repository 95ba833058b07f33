package storetest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// OperatorRetention checks, on the engine c names (DynamoDB) beside moto's
// queues, that an operator (shared/operator: sasctl, the console, the typed
// client) keeps an order stored before orders kept their own retention and
// lifetime (no KpS, no LfMs) as long as the deployment it is told of keeps
// one: the order it ends (a cancel) expires at the end plus the
// deployment's retention, or, told nothing, never (a deployment may keep
// its orders for ever: an operator's guess could only take one sooner); the
// one it resubmits late in that retention has its orders item and its
// results kept past its new round, as the deployment's own writes keep
// them.
func OperatorRetention(t *testing.T, c *awsclient.Clients) {
	t.Helper()
	ctx := context.Background()
	topo := NewTables(t, c.DynamoDB)
	_, err := provision.Ensure(ctx, c, topo) // the queues an operator's actions send to
	require.NoError(t, err)
	// The deployment of before: its writes set no retention on the items.
	s := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	legacy := func(id string) {
		t.Helper()
		_, err := c.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(topo.StateTable()),
			Key:              itemKey(id, "TASK"),
			UpdateExpression: aws.String("REMOVE KpS, LfMs")})
		require.NoError(t, err)
		_, err = c.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(topo.OrdersTable()),
			Key:              map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: id}},
			UpdateExpression: aws.String("REMOVE " + statestore.ExpiresAttribute)})
		require.NoError(t, err)
		raw := rawItem(t, c.DynamoDB, topo.StateTable(), id, "TASK")
		require.NotContains(t, raw, "KpS")
		require.NotContains(t, raw, "LfMs")
	}
	expires := func(table, id, sk string) (time.Time, bool) {
		t.Helper()
		v, ok := rawItem(t, c.DynamoDB, table, id, sk)[statestore.ExpiresAttribute].(*types.AttributeValueMemberN)
		if !ok {
			return time.Time{}, false
		}
		n, err := strconv.ParseInt(v.Value, 10, 64)
		require.NoError(t, err)
		return time.Unix(n, 0), true
	}
	const keep = 30 * 24 * time.Hour // the deployment's retentionDays: 30
	at := t0.Add(time.Hour)
	told := operator.New(c, topo).WithRetention(keep)
	told.Now = func() time.Time { return at }

	submit(t, s, "o-legacy-1", 2)
	legacy("o-legacy-1")
	res, err := told.Cancel(ctx, "o-legacy-1", "test", "legacy")
	require.NoError(t, err)
	require.Equal(t, workflow.Cancelled, res.State, "nothing ran: it ends at once")
	got, ok := expires(topo.StateTable(), "o-legacy-1", "TASK")
	require.True(t, ok, "an order an operator ends expires, its own retention unknown")
	require.Equal(t, at.Add(keep).Unix(), got.Unix(), "at its end plus the deployment's retention")

	// Told nothing: no expiry (a deployment may keep its orders for ever,
	// or longer than the default); one an operator would write could only
	// take the order sooner than its deployment would.
	untold := operator.New(c, topo)
	untold.Now = func() time.Time { return at }
	submit(t, s, "o-legacy-2", 2)
	legacy("o-legacy-2")
	_, err = untold.Cancel(ctx, "o-legacy-2", "test", "legacy")
	require.NoError(t, err)
	_, ok = expires(topo.StateTable(), "o-legacy-2", "TASK")
	require.False(t, ok, "an operator told no retention sets no expiry")

	// Resubmitted late in its retention: what it keeps outlives its new
	// round, as the deployment's writes would keep it.
	submit(t, s, "o-legacy-3", 2)
	st, err := claim(ctx, s, "o-legacy-3", step0, "sched", t0)
	require.NoError(t, err)
	require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: "o-legacy-3", Ref: step0, Name: "s0", Round: 1, Attempt: st.Attempt,
		JSON: []byte(`{"id":"r-3"}`), Now: t0}))
	_, err = refuse(ctx, s, "o-legacy-3", step0, st.Attempt, "declined", t0)
	require.NoError(t, err)
	legacy("o-legacy-3")
	late := t0.Add(keep - 24*time.Hour)
	told.Now = func() time.Time { return late }
	_, err = told.Resubmit(ctx, "o-legacy-3", "")
	require.NoError(t, err)
	lifetime := 2 * def(2).Deadline // an item without LfMs: twice its deadline
	got, ok = expires(topo.OrdersTable(), "o-legacy-3", "")
	require.True(t, ok, "its orders item kept past its new round")
	require.Equal(t, late.Add(lifetime).Add(keep).Unix(), got.Unix())
	got, ok = expires(topo.StateTable(), "o-legacy-3", "R#s0")
	require.True(t, ok, "and its result, which the new round may read")
	require.Equal(t, late.Add(lifetime).Add(keep).Unix(), got.Unix())

	// Resubmitted late in its retention by an operator told none: what
	// expires is pushed out past its new round all the same (by the
	// default, later than its deployment's 30 days would: kept longer,
	// never lost mid-round); what its deployment keeps for ever is given
	// no expiry.
	kept := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards).WithRetention(keep)
	failed := func(s *statestore.Store, id string) {
		t.Helper()
		submit(t, s, id, 2)
		st, err := claim(ctx, s, id, step0, "sched", t0)
		require.NoError(t, err)
		require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: id, Ref: step0, Name: "s0", Round: 1, Attempt: st.Attempt,
			JSON: []byte(`{"id":"r"}`), Now: t0}))
		_, err = refuse(ctx, s, id, step0, st.Attempt, "declined", t0)
		require.NoError(t, err)
		_, err = c.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(topo.StateTable()),
			Key: itemKey(id, "TASK"), UpdateExpression: aws.String("REMOVE KpS, LfMs")}) // as stored before orders kept theirs
		require.NoError(t, err)
	}
	failed(kept, "o-legacy-4")
	before, ok := expires(topo.OrdersTable(), "o-legacy-4", "")
	require.True(t, ok, "its deployment gave it an expiry at its submission")
	untold.Now = func() time.Time { return late }
	_, err = untold.Resubmit(ctx, "o-legacy-4", "")
	require.NoError(t, err)
	for _, at := range []struct{ table, sk string }{{topo.OrdersTable(), ""}, {topo.StateTable(), "R#s0"}} {
		got, ok := expires(at.table, "o-legacy-4", at.sk)
		require.True(t, ok)
		require.True(t, got.After(before), "%s%s pushed out", at.table, at.sk)
		require.Equal(t, late.Add(lifetime).Add(statestore.DefaultRetention).Unix(), got.Unix(), "%s%s past its new round", at.table, at.sk)
	}
	failed(s, "o-legacy-5") // its deployment's retention 0: kept for ever
	_, err = untold.Resubmit(ctx, "o-legacy-5", "")
	require.NoError(t, err)
	for _, at := range []struct{ table, sk string }{{topo.OrdersTable(), ""}, {topo.StateTable(), "R#s0"}} {
		_, ok := expires(at.table, "o-legacy-5", at.sk)
		require.False(t, ok, "%s%s: kept for ever, as its deployment keeps it", at.table, at.sk)
	}
}

// itemKey is the key of the state table's item sk of order id.
func itemKey(id, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: id},
		topology.KeySort: &types.AttributeValueMemberS{Value: sk}}
}
