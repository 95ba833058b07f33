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
	k := retainedTables(t, db)
	for _, c := range []struct {
		name string
		run  func(*testing.T, retained)
	}{
		{"AnEndedOrderExpiresOnBothTables", anEndedOrderExpires},
		{"AResubmittedOrderAndItsResultsOutliveItsNewRound", aResubmittedOrderIsKept},
		{"AnOperatorsResubmissionKeepsTheOrdersRetention", anOperatorResubmitsByTheOrdersRetention},
		{"AHoldAndItsDecisionPushOutTheExpiry", aHoldPushesOutTheExpiry},
		{"AnOrderKeptForeverIsKeptForever", anOrderKeptForever},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, k) })
	}
}

// keep is the retention of the deployment Retention's cases run in.
const keep = 90 * 24 * time.Hour

// retained is where Retention's cases run: tables with their time to live
// on, the deployment's store (keeping ended orders keep) and an operator's
// (told no retention).
type retained struct {
	db          *dynamodb.Client
	topo        topology.Topology
	s, operator *statestore.Store
}

func retainedTables(t *testing.T, db *dynamodb.Client) retained {
	t.Helper()
	topo := NewTables(t, db)
	for _, table := range []string{topo.OrdersTable(), topo.StateTable()} {
		require.NoError(t, provision.EnableTTL(context.Background(), db, table))
		out, err := db.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		require.NoError(t, err)
		require.Equal(t, statestore.ExpiresAttribute, aws.ToString(out.TimeToLiveDescription.AttributeName), table)
	}
	return retained{db: db, topo: topo,
		s:        statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards).WithRetention(keep),
		operator: statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)}
}

// expiresItem is when item sk of order id in table expires, if it does.
func (k retained) expiresItem(t *testing.T, table, id, sk string) (int64, bool) {
	t.Helper()
	v, ok := rawItem(t, k.db, table, id, sk)[statestore.ExpiresAttribute].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	require.NoError(t, err)
	return n, true
}

// expires is when order id's item in table (its state item, or its orders
// item) expires, if it does.
func (k retained) expires(t *testing.T, table, id string) (int64, bool) {
	t.Helper()
	if table == k.topo.StateTable() {
		return k.expiresItem(t, table, id, "TASK")
	}
	return k.expiresItem(t, table, id, "")
}

// keepResult keeps a result of order id's first step, of attempt.
func (k retained) keepResult(t *testing.T, s *statestore.Store, id string, attempt int, lifetime, own time.Duration) {
	t.Helper()
	require.NoError(t, s.PutResult(context.Background(), statestore.Result{OrderID: id, Ref: step0, Name: "s0", Round: 1,
		Attempt: attempt, JSON: []byte(`{"id":"r-1"}`), Now: t0, Lifetime: lifetime, Keep: own}))
}

// anEndedOrderExpires: an order ended Processed a minute after its
// submission: its state item expires at the end plus the retention, its
// orders item at the latest end its workflow allows plus the retention.
func anEndedOrderExpires(t *testing.T, k retained) {
	ctx := context.Background()
	submit(t, k.s, "o-1", 1)
	st, err := claim(ctx, k.s, "o-1", step0, "sched", t0)
	require.NoError(t, err)
	end := t0.Add(time.Minute)
	_, err = complete(ctx, k.s, "o-1", step0, st.Attempt, end)
	require.NoError(t, err)
	got, ok := k.expires(t, k.topo.StateTable(), "o-1")
	require.True(t, ok, "an ended order's state item expires")
	require.Equal(t, end.Add(keep).Unix(), got)
	got, ok = k.expires(t, k.topo.OrdersTable(), "o-1")
	require.True(t, ok, "its orders item too")
	require.Equal(t, t0.Add(def(1).Lifetime()).Add(keep).Unix(), got)
}

// aResubmittedOrderIsKept: an order in flight is kept; ended Failed, it
// expires; resubmitted, it is kept again, and its orders item and its
// results outlive its new round.
func aResubmittedOrderIsKept(t *testing.T, k retained) {
	ctx := context.Background()
	submit(t, k.s, "o-2", 2)
	_, ok := k.expires(t, k.topo.StateTable(), "o-2")
	require.False(t, ok, "an order in flight is kept")
	st, err := claim(ctx, k.s, "o-2", step0, "sched", t0)
	require.NoError(t, err)
	// A result kept (as an async step's refusal may follow its data, or an
	// earlier step's answer): it outlives any end the order can reach.
	k.keepResult(t, k.s, "o-2", st.Attempt, def(2).Lifetime(), 0)
	got, ok := k.expiresItem(t, k.topo.StateTable(), "o-2", "R#s0")
	require.True(t, ok, "a kept result expires")
	require.Equal(t, t0.Add(def(2).Lifetime()).Add(keep).Unix(), got)
	_, err = refuse(ctx, k.s, "o-2", step0, st.Attempt, "declined", t0)
	require.NoError(t, err)
	task, _, err := k.s.Load(ctx, "o-2")
	require.NoError(t, err)
	require.Equal(t, workflow.Failed, task.State)
	got, ok = k.expires(t, k.topo.StateTable(), "o-2")
	require.True(t, ok, "a failed order's state item expires")
	require.Equal(t, t0.Add(keep).Unix(), got)
	later := t0.Add(time.Hour)
	_, err = k.s.Resubmit(ctx, "o-2", "", time.Minute, later)
	require.NoError(t, err)
	_, ok = k.expires(t, k.topo.StateTable(), "o-2")
	require.False(t, ok, "at work again: kept")
	got, _ = k.expires(t, k.topo.OrdersTable(), "o-2")
	require.Equal(t, later.Add(def(2).Lifetime()).Add(keep).Unix(), got, "its orders item outlives its new round")
	got, _ = k.expiresItem(t, k.topo.StateTable(), "o-2", "R#s0")
	require.Equal(t, later.Add(def(2).Lifetime()).Add(keep).Unix(), got, "and so do its results, which the new round may read")
}

// anOperatorResubmitsByTheOrdersRetention: an operator's store knows no
// retention: resubmitting, it keeps the order's own.
func anOperatorResubmitsByTheOrdersRetention(t *testing.T, k retained) {
	ctx := context.Background()
	submit(t, k.s, "o-5", 2)
	st, err := claim(ctx, k.s, "o-5", step0, "sched", t0)
	require.NoError(t, err)
	k.keepResult(t, k.s, "o-5", st.Attempt, def(2).Lifetime(), 0)
	_, err = refuse(ctx, k.s, "o-5", step0, st.Attempt, "declined", t0)
	require.NoError(t, err)
	later := t0.Add(time.Hour)
	_, err = k.operator.Resubmit(ctx, "o-5", "", time.Minute, later)
	require.NoError(t, err)
	got, _ := k.expires(t, k.topo.OrdersTable(), "o-5")
	require.Equal(t, later.Add(def(2).Lifetime()).Add(keep).Unix(), got, "resubmitted by an operator: its orders item outlives its new round")
	got, _ = k.expiresItem(t, k.topo.StateTable(), "o-5", "R#s0")
	require.Equal(t, later.Add(def(2).Lifetime()).Add(keep).Unix(), got, "and its results")
}

// aHoldPushesOutTheExpiry: a workflow whose step may hold the order: its
// items outlive a hold, a decision on one pushes them out, as a
// resubmission does (never in), and an operator's write that ends it sets
// the end plus the order's own retention.
func aHoldPushesOutTheExpiry(t *testing.T, k retained) {
	ctx := context.Background()
	held := def(2)
	held.Steps[1].HoldFor = 12 * time.Hour
	require.Equal(t, 2*held.Deadline+12*time.Hour, held.Lifetime())
	submitDef(t, k.s, "o-4", held)
	got, _ := k.expires(t, k.topo.OrdersTable(), "o-4")
	require.Equal(t, t0.Add(held.Lifetime()).Add(keep).Unix(), got, "the round, a hold, the compensation, and the retention")
	snap, err := k.operator.Read(ctx, "o-4")
	require.NoError(t, err)
	require.Equal(t, keep, snap.Retention(), "the retention it was submitted with")
	decided := t0.Add(30 * time.Hour)
	require.NoError(t, k.operator.Keep(ctx, snap, decided))
	got, _ = k.expires(t, k.topo.OrdersTable(), "o-4")
	require.Equal(t, decided.Add(held.Lifetime()).Add(keep).Unix(), got, "a decision puts it to work again")
	require.NoError(t, k.operator.Keep(ctx, snap, t0), "a writer whose clock runs behind")
	got, _ = k.expires(t, k.topo.OrdersTable(), "o-4")
	require.Equal(t, decided.Add(held.Lifetime()).Add(keep).Unix(), got, "never pulls an expiry in")
	// Ended by an operator's write: the end plus its own retention.
	st, err := claim(ctx, k.s, "o-4", step0, "sched", decided)
	require.NoError(t, err)
	_, err = complete(ctx, k.s, "o-4", step0, st.Attempt, decided)
	require.NoError(t, err)
	st, err = claim(ctx, k.s, "o-4", step1, "sched", decided)
	require.NoError(t, err)
	ended := decided.Add(time.Minute)
	_, err = complete(ctx, k.operator, "o-4", step1, st.Attempt, ended)
	require.NoError(t, err)
	got, ok := k.expires(t, k.topo.StateTable(), "o-4")
	require.True(t, ok, "an order an operator's write ended expires")
	require.Equal(t, ended.Add(keep).Unix(), got)
}

// anOrderKeptForever: submitted to be kept forever, it is, whoever ends
// it: a store with a retention (retentionDays turned on since) too.
func anOrderKeptForever(t *testing.T, k retained) {
	ctx := context.Background()
	submit(t, k.operator, "o-3", 1) // a store with no retention: forever
	st, err := claim(ctx, k.s, "o-3", step0, "sched", t0)
	require.NoError(t, err)
	require.Equal(t, statestore.Forever, st.Retention())
	k.keepResult(t, k.s, "o-3", st.Attempt, def(1).Lifetime(), st.Retention())
	_, ok := k.expiresItem(t, k.topo.StateTable(), "o-3", "R#s0")
	require.False(t, ok, "nor its result")
	_, err = complete(ctx, k.s, "o-3", step0, st.Attempt, t0)
	require.NoError(t, err)
	_, ok = k.expires(t, k.topo.StateTable(), "o-3")
	require.False(t, ok, "no retention: kept forever")
	_, ok = k.expires(t, k.topo.OrdersTable(), "o-3")
	require.False(t, ok)
}
