package statestore_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// countingDB counts the items the store's reads read: a Query's and a
// Scan's ScannedCount (what DynamoDB bills), a BatchGetItem's items.
type countingDB struct {
	*dynamodb.Client
	read atomic.Int64
}

func (c *countingDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.Client.Query(ctx, in, o...)
	if err == nil {
		c.read.Add(int64(out.ScannedCount))
	}
	return out, err
}

func (c *countingDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := c.Client.Scan(ctx, in, o...)
	if err == nil {
		c.read.Add(int64(out.ScannedCount))
	}
	return out, err
}

func (c *countingDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := c.Client.BatchGetItem(ctx, in, o...)
	if err == nil {
		for _, items := range out.Responses {
			c.read.Add(int64(len(items)))
		}
	}
	return out, err
}

// searchFixture is a state store on DynamoDB Local holding n orders of a
// workflow with customerId searchable, `matches` of them of customer
// "c-hot" (ids hot-0…) and each other of a customer of its own, with a
// meter and an item count on its client.
type searchFixture struct {
	store   *statestore.Store
	db      *countingDB
	meter   *accounting.Meter
	matches int
}

// meteredStore is a store on new tables (named kind and n) of DynamoDB
// Local, with a meter and an item count on its client, and the client.
func meteredStore(tb testing.TB, kind string, n int) (searchFixture, *dynamodb.Client, topology.Topology) {
	tb.Helper()
	ctx := context.Background()
	meter := accounting.New()
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: engines["dynamodb-local"].DynamoDBEndpoint,
		Emulated: true, APIOptions: []func(*middleware.Stack) error{meter.AddTo}})
	require.NoError(tb, err)
	topo := topology.Default(fmt.Sprintf("%s%d-%d", kind, time.Now().UnixNano()%1e6, n), "payment")
	require.NoError(tb, provision.EnsureTables(ctx, c.DynamoDB, topo))
	db := &countingDB{Client: c.DynamoDB}
	store := statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	return searchFixture{store: store, db: db, meter: meter}, c.DynamoDB, topo
}

func newSearchFixture(tb testing.TB, n, matches int) searchFixture {
	tb.Helper()
	ctx := context.Background()
	f, ddb, topo := meteredStore(tb, "search", n)
	f.matches = matches
	store := f.store
	def := workflow.Single(workflow.Settings{})
	def.Search = []string{"customerId"}
	// One real order: its items are the templates of the rest.
	_, err := store.Submit(ctx, statestore.Submission{OrderID: "tpl", Order: `{"orderId":"tpl","customerId":"c-tpl"}`,
		Workflow: def, Search: map[string]string{"customerId": "c-tpl"}, Now: time.Now()})
	require.NoError(tb, err)
	tpl := templates(tb, ddb, "tpl", topo.OrdersTable(), topo.StateTable())
	fill(tb, ddb, tpl, matches, "hot-", topo.DeadlineShards)
	fill(tb, ddb, tpl, n-matches, "cold-", topo.DeadlineShards)
	index(tb, ddb, topo.StateTable(), matches, "hot-", func(int) string { return "c-hot" })
	index(tb, ddb, topo.StateTable(), n-matches, "cold-", func(i int) string { return "c-" + strconv.Itoa(i) })
	return f
}

// index writes the index items of orders prefix+0 to prefix+n-1, each of
// customerOf(i), 25 a BatchWriteItem.
func index(tb testing.TB, db *dynamodb.Client, state string, n int, prefix string, customerOf func(int) string) {
	tb.Helper()
	for start := 0; start < n; start += 25 {
		var reqs []types.WriteRequest
		for i := start; i < min(start+25, n); i++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				topology.KeyOrderID: &types.AttributeValueMemberS{Value: topology.SearchPartition("customerId", customerOf(i))},
				topology.KeySort:    &types.AttributeValueMemberS{Value: prefix + strconv.Itoa(i)}}}})
		}
		require.NoError(tb, writeAll(db, map[string][]types.WriteRequest{state: reqs}))
	}
}

// cost lists every order list finds and returns the read units and items
// it read, and the orders found.
func (f searchFixture) cost(tb testing.TB, list func(next string) ([]statestore.Task, string, error)) (rcu float64, items int64, found int) {
	tb.Helper()
	f.meter.Reset()
	f.db.read.Store(0)
	next := ""
	for {
		tasks, token, err := list(next)
		require.NoError(tb, err)
		found += len(tasks)
		if next = token; next == "" {
			break
		}
	}
	for _, u := range f.meter.Snapshot() {
		rcu += u.ReadUnits
	}
	return rcu, f.db.read.Load(), found
}

// byField lists the hot customer's orders by the field's index.
func (f searchFixture) byField(next string) ([]statestore.Task, string, error) {
	ids, token, err := f.store.WithField(context.Background(), "customerId", []string{"c-hot"}, 100, next)
	if err != nil {
		return nil, "", err
	}
	tasks, err := f.store.Tasks(context.Background(), ids)
	out := make([]statestore.Task, 0, len(tasks))
	for _, id := range ids {
		out = append(out, tasks[id])
	}
	return out, token, err
}

// byScan lists the same orders by a scan (their id prefix), as a search
// with no index does.
func (f searchFixture) byScan(next string) ([]statestore.Task, string, error) {
	return f.store.SearchTasks(context.Background(), statestore.TaskFilter{Prefix: "hot-"}, 100, next)
}

// A search by a searchable field reads the orders of its value: with
// thousands of other orders, the same items and read units as with none,
// where a scan reads every order.
func TestFieldSearchCostFollowsTheOrdersFound(t *testing.T) {
	t.Parallel()
	alone := newSearchFixture(t, 20, 20)
	crowd := newSearchFixture(t, 2020, 20)
	rcuAlone, itemsAlone, nAlone := alone.cost(t, alone.byField)
	rcuCrowd, itemsCrowd, nCrowd := crowd.cost(t, crowd.byField)
	require.Equal(t, 20, nAlone)
	require.Equal(t, 20, nCrowd)
	require.Equal(t, itemsAlone, itemsCrowd, "items read with 2000 other orders vs none")
	require.Equal(t, int64(40), itemsCrowd, "an index item and a state item per order found")
	require.InDelta(t, rcuAlone, rcuCrowd, 1e-9)
	rcuScan, itemsScan, nScan := crowd.cost(t, crowd.byScan)
	require.Equal(t, 20, nScan)
	require.Greater(t, itemsScan, int64(2000), "a scan reads the table")
	t.Logf("20 orders found among 2020: by field %d items, %.1f RCU; by scan %d items, %.1f RCU", itemsCrowd, rcuCrowd, itemsScan, rcuScan)
}

// BenchmarkListByField lists the SAS_SEARCH_MATCHES orders (default 100)
// of one customer among SAS_SEARCH_ORDERS (default 10000) by the field's
// index, and by a scan for comparison, and reports the items and read
// units each reads per order found.
func BenchmarkListByField(b *testing.B) {
	n, matches := envInt("SAS_SEARCH_ORDERS", 10000), envInt("SAS_SEARCH_MATCHES", 100)
	start := time.Now()
	f := newSearchFixture(b, n, matches)
	b.Logf("%d orders filled in %s", n, time.Since(start).Round(time.Second))
	f.bench(b, n, listing{"field", f.byField}, listing{"scan", f.byScan})
}

// listing is one way to list the orders a fixture's search finds.
type listing struct {
	name string
	list func(next string) ([]statestore.Task, string, error)
}

// bench runs each listing of the fixture's n orders as a sub-benchmark
// and reports the items and read units each reads per order found.
func (f searchFixture) bench(b *testing.B, n int, ls ...listing) {
	for _, c := range ls {
		b.Run(fmt.Sprintf("%s/orders=%d/found=%d", c.name, n, f.matches), func(b *testing.B) {
			rcu, items, found := f.cost(b, c.list)
			if found != f.matches {
				b.Fatalf("found %d, want %d", found, f.matches)
			}
			for b.Loop() {
				f.cost(b, c.list)
			}
			b.ReportMetric(float64(items)/float64(found), "items-read/result")
			b.ReportMetric(rcu/float64(found), "RCU/result")
		})
	}
}
