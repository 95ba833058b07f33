package statestore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// sweepFixture is a state store on DynamoDB Local (moto's index query walks
// the whole table) holding `finished` processed orders, `inFlight` orders at
// work whose next look is a day away, and `due` overdue steps, with a meter
// on its client.
type sweepFixture struct {
	store *statestore.Store
	meter *accounting.Meter
	now   time.Time
}

func newSweepFixture(tb testing.TB, finished, inFlight, due int) sweepFixture {
	tb.Helper()
	ctx := context.Background()
	meter := accounting.New()
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: engines["dynamodb-local"].DynamoDBEndpoint,
		Emulated: true, APIOptions: []func(*middleware.Stack) error{meter.AddTo}})
	require.NoError(tb, err)
	topo := topology.Default(fmt.Sprintf("sweep%d-%d-%d", time.Now().UnixNano()%1e6, finished, inFlight), "payment")
	require.NoError(tb, provision.EnsureTables(ctx, c.DynamoDB, topo))
	store := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	def := workflow.Single(workflow.Settings{})
	t0 := time.Now().Add(-time.Hour)

	// One real order run to the end, and one at work whose step is due a
	// day from now: their items are the templates of the rest.
	require.NoError(tb, submitClaim(ctx, store, def, "tpl-done", t0))
	rec, err := outcome.Recorder{Store: store}.Record(ctx, def, outcome.Attempt{OrderID: "tpl-done", Ref: workflow.Ref{}, Attempt: 1, Now: t0})
	require.NoError(tb, err)
	require.Equal(tb, workflow.Processed, rec.State)
	require.NoError(tb, submitClaim(ctx, store, def, "tpl-work", time.Now().Add(24*time.Hour)))
	done := templates(tb, c.DynamoDB, "tpl-done", topo.OrdersTable(), topo.StateTable())
	work := templates(tb, c.DynamoDB, "tpl-work", topo.StateTable()) // the sweep never reads the orders table
	fill(tb, c.DynamoDB, done, finished, "done-", topo.DeadlineShards)
	fill(tb, c.DynamoDB, work, inFlight, "work-", topo.DeadlineShards)
	require.Equal(tb, finished+1+inFlight+1+1+1, count(tb, c.DynamoDB, topo.StateTable()),
		"one state item per order, the workflow version's definition, and the ended one's hour of health counts")
	for i := range due {
		require.NoError(tb, submitClaim(ctx, store, def, fmt.Sprintf("late-%d", i), t0))
	}
	meter.Reset()
	return sweepFixture{store: store, meter: meter, now: time.Now()}
}

// templates are the order's items in the tables, each marked with its table.
func templates(tb testing.TB, db *dynamodb.Client, orderID string, tables ...string) []map[string]types.AttributeValue {
	tb.Helper()
	var out []map[string]types.AttributeValue
	for _, table := range tables {
		res, err := db.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(table),
			KeyConditionExpression:    aws.String("OrderID = :id"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: orderID}}})
		require.NoError(tb, err)
		require.Len(tb, res.Items, 1)
		it := res.Items[0]
		it["_table"] = &types.AttributeValueMemberS{Value: table}
		out = append(out, it)
	}
	return out
}

// count is the number of items in the table, as DynamoDB Local reports it
// at once (DynamoDB itself every six hours or so): a Scan of a million items
// would take half an hour.
func count(tb testing.TB, db *dynamodb.Client, table string) int {
	tb.Helper()
	out, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(tb, err)
	return int(aws.ToInt64(out.Table.ItemCount))
}

func submitClaim(ctx context.Context, s *statestore.Store, def workflow.Definition, id string, at time.Time) error {
	if _, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`, Workflow: def, Now: at}); err != nil {
		return err
	}
	_, err := s.Claim(ctx, statestore.Claim{OrderID: id, Ref: workflow.Ref{}, Agent: def.Steps[0].Agent, Owner: "agent", Now: at})
	return err
}

// fill copies the template order's items n times under new OrderIDs
// (prefix + number), 25 per BatchWriteItem, four writers at once; an index
// entry is spread over the shards as the store spreads orders.
func fill(tb testing.TB, db *dynamodb.Client, tpl []map[string]types.AttributeValue, n int, prefix string, shards int) {
	tb.Helper()
	per := 25 / len(tpl) // orders per request
	jobs := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for start := range jobs {
				if err := put(db, tpl, start, min(start+per, n), prefix, shards); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for start := 0; start < n; start += per {
		jobs <- start
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(tb, err)
	}
}

// put writes the copies of orders from to to of the template.
func put(db *dynamodb.Client, tpl []map[string]types.AttributeValue, from, to int, prefix string, shards int) error {
	reqs := map[string][]types.WriteRequest{}
	for i := from; i < to; i++ {
		for _, src := range tpl {
			it := make(map[string]types.AttributeValue, len(src))
			for k, v := range src {
				it[k] = v
			}
			table := src["_table"].(*types.AttributeValueMemberS).Value
			delete(it, "_table")
			it[topology.KeyOrderID] = &types.AttributeValueMemberS{Value: prefix + strconv.Itoa(i)}
			if _, ok := it[topology.KeyDueShard]; ok {
				it[topology.KeyDueShard] = &types.AttributeValueMemberS{Value: strconv.Itoa(i % shards)}
			}
			if end, ok := it[topology.KeyEndShard].(*types.AttributeValueMemberS); ok {
				state, _, _ := strings.Cut(end.Value, "#")
				it[topology.KeyEndShard] = &types.AttributeValueMemberS{Value: topology.EndPartition(state, strconv.Itoa(i%shards))}
			}
			reqs[table] = append(reqs[table], types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
	}
	return writeAll(db, reqs)
}

// writeAll writes reqs with BatchWriteItem, again until none is left
// unprocessed.
func writeAll(db *dynamodb.Client, reqs map[string][]types.WriteRequest) error {
	for len(reqs) > 0 {
		out, err := db.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: reqs})
		if err != nil {
			return err
		}
		reqs = out.UnprocessedItems
	}
	return nil
}

// sweepCost runs the Supervisor's query once and returns the read units it
// consumed and the records it found.
func (f sweepFixture) sweepCost(tb testing.TB) (float64, int) {
	tb.Helper()
	f.meter.Reset()
	due, err := storetest.Overdue(context.Background(), f.store, f.now, 500)
	require.NoError(tb, err)
	var rcu float64
	for _, u := range f.meter.Snapshot() {
		rcu += u.ReadUnits
	}
	return rcu, len(due)
}

// The sweep reads the overdue work, not the table: with thousands of
// finished orders its read units are those of an empty table (within 2x),
// and with thousands of orders in flight but not due, in the very index it
// queries, they are the same.
func TestSweepCostFollowsTheOverdueWork(t *testing.T) {
	t.Parallel()
	empty := newSweepFixture(t, 0, 0, 10)
	full := newSweepFixture(t, 2000, 0, 10)
	busy := newSweepFixture(t, 0, 2000, 10)
	rcuEmpty, nEmpty := empty.sweepCost(t)
	rcuFull, nFull := full.sweepCost(t)
	rcuBusy, nBusy := busy.sweepCost(t)
	require.Equal(t, 10, nEmpty)
	require.Equal(t, 10, nFull)
	require.Equal(t, 10, nBusy)
	require.Positive(t, rcuEmpty)
	require.LessOrEqual(t, rcuFull, 2*rcuEmpty, "read units with 2000 finished orders vs none")
	require.InDelta(t, rcuEmpty, rcuBusy, 1e-9, "read units with 2000 orders in flight, not due, vs none")
	t.Logf("sweep read units: %.1f on an empty table, %.1f with 2000 finished orders, %.1f with 2000 in flight not due",
		rcuEmpty, rcuFull, rcuBusy)
}

// BenchmarkSweep times the Supervisor's whole sweep (every shard's due
// pages) on an empty table, on one with SAS_SWEEP_ORDERS finished orders
// (default 2000), and on one with as many orders in flight whose next look
// is a day away, SAS_SWEEP_DUE overdue steps in each (default 10), and
// reports its read units. Select one with -bench 'Sweep/inflight' (the
// others are not filled).
func BenchmarkSweep(b *testing.B) {
	n, due := envInt("SAS_SWEEP_ORDERS", 2000), envInt("SAS_SWEEP_DUE", 10)
	filled := map[string]sweepFixture{} // b.Run calls each function more than once: fill once
	for _, c := range []struct {
		name             string
		finished, flight int
	}{{"empty", 0, 0}, {fmt.Sprintf("finished=%d", n), n, 0}, {fmt.Sprintf("inflight=%d", n), 0, n}} {
		b.Run(c.name, func(b *testing.B) {
			f, ok := filled[c.name]
			if !ok {
				start := time.Now()
				f = newSweepFixture(b, c.finished, c.flight, due)
				filled[c.name] = f
				b.Logf("%s: filled in %s", c.name, time.Since(start).Round(time.Second))
			}
			rcu, found := f.sweepCost(b)
			if found != due {
				b.Fatalf("found %d overdue, want %d", found, due)
			}
			for b.Loop() {
				if _, err := storetest.Overdue(context.Background(), f.store, f.now, 500); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(rcu, "RCU/sweep")
		})
	}
}

// envInt is the whole number in the environment variable, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
