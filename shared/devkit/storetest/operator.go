package storetest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/provision"
	x "github.com/sas-go/sas/shared/dynamoexpr"
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
	topo := NewTables(t, c.DynamoDB)
	_, err := provision.Ensure(context.Background(), c, topo) // the queues an operator's actions send to
	require.NoError(t, err)
	l := legacyOrders{db: c.DynamoDB, topo: topo,
		s:    statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards),
		told: operator.New(c, topo).WithRetention(deployed), untold: operator.New(c, topo)}
	for _, tc := range []struct {
		name string
		run  func(*testing.T, legacyOrders)
	}{
		{"AnOperatorEndsALegacyOrderByItsDeploymentsRetention", anOperatorEndsByTheDeploymentsRetention},
		{"AnOperatorToldNoRetentionSetsNoExpiry", anOperatorToldNothingSetsNoExpiry},
		{"ALateResubmissionKeepsWhatTheNewRoundReads", aLateResubmissionKeepsWhatTheRoundReads},
		{"AnOperatorToldNothingPushesOutOnlyWhatExpires", anOperatorToldNothingPushesOutWhatExpires},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, l) })
	}
}

// deployed is the retention of the deployment OperatorRetention's operator
// is told of (its retentionDays: 30).
const deployed = 30 * 24 * time.Hour

// legacyOrders is where OperatorRetention's cases run: the deployment of
// before (its writes set no retention on the items), and operators told
// its retention and told none.
type legacyOrders struct {
	db           *dynamodb.Client
	topo         topology.Topology
	s            *statestore.Store
	told, untold *operator.Operator
}

// legacy makes order id's items as stored before orders kept their own
// retention and lifetime: no KpS, no LfMs, an orders item with no expiry
// (withOrder).
func (l legacyOrders) legacy(t *testing.T, id string, withOrder bool) {
	t.Helper()
	ctx := context.Background()
	b := x.New()
	b.Remove(b.Plain("KpS"))
	b.Remove(b.Plain("LfMs"))
	in, err := b.UpdateInput(l.topo.StateTable(), itemKey(id, "TASK"))
	require.NoError(t, err)
	_, err = l.db.UpdateItem(ctx, in)
	require.NoError(t, err)
	raw := rawItem(t, l.db, l.topo.StateTable(), id, "TASK")
	require.NotContains(t, raw, "KpS")
	require.NotContains(t, raw, "LfMs")
	if !withOrder {
		return
	}
	b = x.New()
	b.Remove(b.Plain(statestore.ExpiresAttribute))
	in, err = b.UpdateInput(l.topo.OrdersTable(), map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: id}})
	require.NoError(t, err)
	_, err = l.db.UpdateItem(ctx, in)
	require.NoError(t, err)
}

// expires is when item sk of order id in table expires, if it does.
func (l legacyOrders) expires(t *testing.T, table, id, sk string) (time.Time, bool) {
	t.Helper()
	v, ok := rawItem(t, l.db, table, id, sk)[statestore.ExpiresAttribute].(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	require.NoError(t, err)
	return time.Unix(n, 0), true
}

// failed submits order id with s, keeps its first step's result and has
// it refused: the order ends Failed, its state item as stored before
// orders kept their retention.
func (l legacyOrders) failed(t *testing.T, s *statestore.Store, id string) {
	t.Helper()
	ctx := context.Background()
	submit(t, s, id, 2)
	st, err := claim(ctx, s, id, step0, "sched", t0)
	require.NoError(t, err)
	require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: id, Ref: step0, Name: "s0", Round: 1, Attempt: st.Attempt,
		JSON: []byte(`{"id":"r"}`), Now: t0}))
	_, err = refuse(ctx, s, id, step0, st.Attempt, "declined", t0)
	require.NoError(t, err)
}

// lateLifetime is how long an order resubmitted by OperatorRetention's
// cases may go on: an item without LfMs, twice its deadline.
var lateLifetime = 2 * def(2).Deadline

// anOperatorEndsByTheDeploymentsRetention: the order an operator told its
// deployment's retention ends (a cancel) expires at the end plus that
// retention.
func anOperatorEndsByTheDeploymentsRetention(t *testing.T, l legacyOrders) {
	at := t0.Add(time.Hour)
	l.told.Now = func() time.Time { return at }
	submit(t, l.s, "o-legacy-1", 2)
	l.legacy(t, "o-legacy-1", true)
	res, err := l.told.Cancel(context.Background(), "o-legacy-1", "test", "legacy")
	require.NoError(t, err)
	require.Equal(t, workflow.Cancelled, res.State, "nothing ran: it ends at once")
	got, ok := l.expires(t, l.topo.StateTable(), "o-legacy-1", "TASK")
	require.True(t, ok, "an order an operator ends expires, its own retention unknown")
	require.Equal(t, at.Add(deployed).Unix(), got.Unix(), "at its end plus the deployment's retention")
}

// anOperatorToldNothingSetsNoExpiry: told nothing, an operator sets no
// expiry (a deployment may keep its orders for ever, or longer than the
// default); one it would write could only take the order sooner than its
// deployment would.
func anOperatorToldNothingSetsNoExpiry(t *testing.T, l legacyOrders) {
	l.untold.Now = func() time.Time { return t0.Add(time.Hour) }
	submit(t, l.s, "o-legacy-2", 2)
	l.legacy(t, "o-legacy-2", true)
	_, err := l.untold.Cancel(context.Background(), "o-legacy-2", "test", "legacy")
	require.NoError(t, err)
	_, ok := l.expires(t, l.topo.StateTable(), "o-legacy-2", "TASK")
	require.False(t, ok, "an operator told no retention sets no expiry")
}

// aLateResubmissionKeepsWhatTheRoundReads: resubmitted late in its
// retention by an operator told it, what the order keeps outlives its new
// round, as the deployment's writes would keep it.
func aLateResubmissionKeepsWhatTheRoundReads(t *testing.T, l legacyOrders) {
	l.failed(t, l.s, "o-legacy-3")
	l.legacy(t, "o-legacy-3", true)
	late := t0.Add(deployed - 24*time.Hour)
	l.told.Now = func() time.Time { return late }
	_, err := l.told.Resubmit(context.Background(), "o-legacy-3", "")
	require.NoError(t, err)
	got, ok := l.expires(t, l.topo.OrdersTable(), "o-legacy-3", "")
	require.True(t, ok, "its orders item kept past its new round")
	require.Equal(t, late.Add(lateLifetime).Add(deployed).Unix(), got.Unix())
	got, ok = l.expires(t, l.topo.StateTable(), "o-legacy-3", "R#s0")
	require.True(t, ok, "and its result, which the new round may read")
	require.Equal(t, late.Add(lateLifetime).Add(deployed).Unix(), got.Unix())
}

// anOperatorToldNothingPushesOutWhatExpires: resubmitted late in its
// retention by an operator told none, what expires is pushed out past its
// new round all the same (by the default, later than its deployment's 30
// days would: kept longer, never lost mid-round); what its deployment
// keeps for ever is given no expiry.
func anOperatorToldNothingPushesOutWhatExpires(t *testing.T, l legacyOrders) {
	ctx := context.Background()
	late := t0.Add(deployed - 24*time.Hour)
	l.untold.Now = func() time.Time { return late }
	kept := statestore.New(l.db, l.topo.OrdersTable(), l.topo.StateTable(), l.topo.DeadlineShards).WithRetention(deployed)
	l.failed(t, kept, "o-legacy-4")
	l.legacy(t, "o-legacy-4", false)
	before, ok := l.expires(t, l.topo.OrdersTable(), "o-legacy-4", "")
	require.True(t, ok, "its deployment gave it an expiry at its submission")
	_, err := l.untold.Resubmit(ctx, "o-legacy-4", "")
	require.NoError(t, err)
	for _, at := range []struct{ table, sk string }{{l.topo.OrdersTable(), ""}, {l.topo.StateTable(), "R#s0"}} {
		got, ok := l.expires(t, at.table, "o-legacy-4", at.sk)
		require.True(t, ok)
		require.True(t, got.After(before), "%s%s pushed out", at.table, at.sk)
		require.Equal(t, late.Add(lateLifetime).Add(statestore.DefaultRetention).Unix(), got.Unix(), "%s%s past its new round", at.table, at.sk)
	}
	l.failed(t, l.s, "o-legacy-5") // its deployment's retention 0: kept for ever
	l.legacy(t, "o-legacy-5", false)
	_, err = l.untold.Resubmit(ctx, "o-legacy-5", "")
	require.NoError(t, err)
	for _, at := range []struct{ table, sk string }{{l.topo.OrdersTable(), ""}, {l.topo.StateTable(), "R#s0"}} {
		_, ok := l.expires(t, at.table, "o-legacy-5", at.sk)
		require.False(t, ok, "%s%s: kept for ever, as its deployment keeps it", at.table, at.sk)
	}
}

// itemKey is the key of the state table's item sk of order id.
func itemKey(id, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: id},
		topology.KeySort: &types.AttributeValueMemberS{Value: sk}}
}
