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

	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// rawItem is the item of order id (and sort key sk, if any) in table, as
// stored; the test fails if there is none.
func rawItem(t *testing.T, db *dynamodb.Client, table, id, sk string) map[string]types.AttributeValue {
	t.Helper()
	k := map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: id}}
	if sk != "" {
		k[topology.KeySort] = &types.AttributeValueMemberS{Value: sk}
	}
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: k, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.NotNil(t, out.Item, "%s %s", table, id)
	return out.Item
}

// Retention checks on db that an ended order carries when DynamoDB's time to
// live may delete it, on both tables (their time to live turned on):
// its state item from the write that ends it, the end plus the retention;
// its orders item from its submission, the latest end its workflow allows
// (its Lifetime: its round, a hold, its compensation) plus the retention;
// none on the state item of an order in flight, or of one resubmitted,
// whose orders item is kept longer; none at all with no retention. An
// operator's store, which knows no retention, honours the one the order
// was submitted with: the write that ends it, a resubmission and a
// decision on a held order.
func Retention(t *testing.T, db *dynamodb.Client) {
	t.Helper()
	ctx := context.Background()
	const keep = 90 * 24 * time.Hour
	topo := NewTables(t, db)
	for _, table := range []string{topo.OrdersTable(), topo.StateTable()} {
		require.NoError(t, provision.EnableTTL(ctx, db, table))
		out, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		require.NoError(t, err)
		require.Equal(t, statestore.ExpiresAttribute, aws.ToString(out.TimeToLiveDescription.AttributeName), table)
	}
	s := statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards).WithRetention(keep)
	expiresItem := func(table, id, sk string) (int64, bool) {
		t.Helper()
		v, ok := rawItem(t, db, table, id, sk)[statestore.ExpiresAttribute].(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(v.Value, 10, 64)
		require.NoError(t, err)
		return n, true
	}
	expires := func(table, id string) (int64, bool) {
		t.Helper()
		if table == topo.StateTable() {
			return expiresItem(table, id, "TASK")
		}
		return expiresItem(table, id, "")
	}
	latest := t0.Add(def(1).Lifetime()).Add(keep).Unix()

	submit(t, s, "o-1", 1) // ends Processed a minute after its submission
	st, err := claim(ctx, s, "o-1", step0, "sched", t0)
	require.NoError(t, err)
	end := t0.Add(time.Minute)
	_, err = complete(ctx, s, "o-1", step0, st.Attempt, end)
	require.NoError(t, err)
	got, ok := expires(topo.StateTable(), "o-1")
	require.True(t, ok, "an ended order's state item expires")
	require.Equal(t, end.Add(keep).Unix(), got)
	got, ok = expires(topo.OrdersTable(), "o-1")
	require.True(t, ok, "its orders item too")
	require.Equal(t, latest, got)

	submit(t, s, "o-2", 2) // in flight, then ended Failed, then resubmitted
	_, ok = expires(topo.StateTable(), "o-2")
	require.False(t, ok, "an order in flight is kept")
	st, err = claim(ctx, s, "o-2", step0, "sched", t0)
	require.NoError(t, err)
	// A result kept (as an async step's refusal may follow its data, or an
	// earlier step's answer): it outlives any end the order can reach.
	require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: "o-2", Ref: step0, Name: "s0", Round: 1, Attempt: st.Attempt,
		JSON: []byte(`{"id":"r-1"}`), Now: t0, Lifetime: def(2).Lifetime()}))
	got, ok = expiresItem(topo.StateTable(), "o-2", "R#s0")
	require.True(t, ok, "a kept result expires")
	require.Equal(t, t0.Add(def(2).Lifetime()).Add(keep).Unix(), got)
	_, err = refuse(ctx, s, "o-2", step0, st.Attempt, "declined", t0)
	require.NoError(t, err)
	task, _, err := s.Load(ctx, "o-2")
	require.NoError(t, err)
	require.Equal(t, workflow.Failed, task.State)
	got, ok = expires(topo.StateTable(), "o-2")
	require.True(t, ok, "a failed order's state item expires")
	require.Equal(t, t0.Add(keep).Unix(), got)
	later := t0.Add(time.Hour)
	_, err = s.Resubmit(ctx, "o-2", "", time.Minute, later)
	require.NoError(t, err)
	_, ok = expires(topo.StateTable(), "o-2")
	require.False(t, ok, "at work again: kept")
	got, _ = expires(topo.OrdersTable(), "o-2")
	require.Equal(t, later.Add(def(2).Lifetime()).Add(keep).Unix(), got, "its orders item outlives its new round")
	got, _ = expiresItem(topo.StateTable(), "o-2", "R#s0")
	require.Equal(t, later.Add(def(2).Lifetime()).Add(keep).Unix(), got, "and so do its results, which the new round may read")

	// An operator's store knows no retention: it keeps the order's own.
	operator := statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	submit(t, s, "o-5", 2)
	st, err = claim(ctx, s, "o-5", step0, "sched", t0)
	require.NoError(t, err)
	require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: "o-5", Ref: step0, Name: "s0", Round: 1, Attempt: st.Attempt,
		JSON: []byte(`{"id":"r-5"}`), Now: t0, Lifetime: def(2).Lifetime()}))
	_, err = refuse(ctx, s, "o-5", step0, st.Attempt, "declined", t0)
	require.NoError(t, err)
	_, err = operator.Resubmit(ctx, "o-5", "", time.Minute, later)
	require.NoError(t, err)
	got, _ = expires(topo.OrdersTable(), "o-5")
	require.Equal(t, later.Add(def(2).Lifetime()).Add(keep).Unix(), got, "resubmitted by an operator: its orders item outlives its new round")
	got, _ = expiresItem(topo.StateTable(), "o-5", "R#s0")
	require.Equal(t, later.Add(def(2).Lifetime()).Add(keep).Unix(), got, "and its results")

	// A workflow whose step may hold the order: its items outlive a hold,
	// and a decision on one pushes them out, as a resubmission does.
	held := def(2)
	held.Steps[1].HoldFor = 12 * time.Hour
	require.Equal(t, 2*held.Deadline+12*time.Hour, held.Lifetime())
	submitDef(t, s, "o-4", held)
	got, _ = expires(topo.OrdersTable(), "o-4")
	require.Equal(t, t0.Add(held.Lifetime()).Add(keep).Unix(), got, "the round, a hold, the compensation, and the retention")
	snap, err := operator.Read(ctx, "o-4")
	require.NoError(t, err)
	require.Equal(t, keep, snap.Retention(), "the retention it was submitted with")
	decided := t0.Add(30 * time.Hour)
	require.NoError(t, operator.Keep(ctx, snap, decided))
	got, _ = expires(topo.OrdersTable(), "o-4")
	require.Equal(t, decided.Add(held.Lifetime()).Add(keep).Unix(), got, "a decision puts it to work again")
	require.NoError(t, operator.Keep(ctx, snap, t0), "a writer whose clock runs behind")
	got, _ = expires(topo.OrdersTable(), "o-4")
	require.Equal(t, decided.Add(held.Lifetime()).Add(keep).Unix(), got, "never pulls an expiry in")
	// Ended by an operator's write: the end plus its own retention.
	st, err = claim(ctx, s, "o-4", step0, "sched", decided)
	require.NoError(t, err)
	_, err = complete(ctx, s, "o-4", step0, st.Attempt, decided)
	require.NoError(t, err)
	st, err = claim(ctx, s, "o-4", step1, "sched", decided)
	require.NoError(t, err)
	ended := decided.Add(time.Minute)
	_, err = complete(ctx, operator, "o-4", step1, st.Attempt, ended)
	require.NoError(t, err)
	got, ok = expires(topo.StateTable(), "o-4")
	require.True(t, ok, "an order an operator's write ended expires")
	require.Equal(t, ended.Add(keep).Unix(), got)

	// Submitted to be kept forever, it is, whoever ends it: a store with a
	// retention (retentionDays turned on since) too.
	forever := statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	submit(t, forever, "o-3", 1)
	st, err = claim(ctx, s, "o-3", step0, "sched", t0)
	require.NoError(t, err)
	require.Equal(t, statestore.Forever, st.Retention())
	require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: "o-3", Ref: step0, Name: "s0", Round: 1, Attempt: st.Attempt,
		JSON: []byte(`{"id":"r-3"}`), Now: t0, Lifetime: def(1).Lifetime(), Keep: st.Retention()}))
	_, ok = expiresItem(topo.StateTable(), "o-3", "R#s0")
	require.False(t, ok, "nor its result")
	_, err = complete(ctx, s, "o-3", step0, st.Attempt, t0)
	require.NoError(t, err)
	_, ok = expires(topo.StateTable(), "o-3")
	require.False(t, ok, "no retention: kept forever")
	_, ok = expires(topo.OrdersTable(), "o-3")
	require.False(t, ok)
}
