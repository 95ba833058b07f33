package statestore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
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
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// sweepFixture is a state store on DynamoDB Local (moto's index query walks
// the whole table) holding `finished` processed orders and ten overdue steps,
// with a meter on its client.
type sweepFixture struct {
	store *statestore.Store
	meter *accounting.Meter
	now   time.Time
}

func newSweepFixture(tb testing.TB, finished int) sweepFixture {
	tb.Helper()
	ctx := context.Background()
	meter := accounting.New()
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: aws.ToString(engines["dynamodb-local"].Config.BaseEndpoint),
		Emulated: true, APIOptions: []func(*middleware.Stack) error{meter.AddTo}})
	require.NoError(tb, err)
	topo := topology.Default(fmt.Sprintf("sweep%d-%d", time.Now().UnixNano()%1e6, finished), "payment")
	require.NoError(tb, provision.EnsureTables(ctx, c.DynamoDB, topo))
	store := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	def := workflow.Single(workflow.Settings{})
	t0 := time.Now().Add(-time.Hour)
	one := workflow.Ref{}

	// One real order run to the end; its items are the template of the rest.
	require.NoError(tb, submitClaim(ctx, store, def, "tpl", t0))
	require.NoError(tb, errOf(store.Complete(ctx, statestore.Completion{OrderID: "tpl", Ref: one, Attempt: 1, End: workflow.Processed, Now: t0})))
	var tpl []map[string]types.AttributeValue
	for _, table := range []string{topo.OrdersTable(), topo.StateTable()} {
		out, err := c.DynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
		require.NoError(tb, err)
		for _, it := range out.Items {
			if sk, ok := it["SK"].(*types.AttributeValueMemberS); ok && sk.Value != "TASK" {
				continue // the workflow's definition: one for all the orders
			}
			it["_table"] = &types.AttributeValueMemberS{Value: table}
			tpl = append(tpl, it)
		}
	}
	fill(tb, c.DynamoDB, tpl, finished)
	p := dynamodb.NewScanPaginator(c.DynamoDB, &dynamodb.ScanInput{TableName: aws.String(topo.StateTable()), Select: types.SelectCount})
	records := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(tb, err)
		records += int(page.Count)
	}
	require.Equal(tb, finished+2, records, "one state item per finished order, and the workflow version's definition")
	for i := range 10 {
		require.NoError(tb, submitClaim(ctx, store, def, fmt.Sprintf("late-%d", i), t0))
	}
	meter.Reset()
	return sweepFixture{store: store, meter: meter, now: time.Now()}
}

func submitClaim(ctx context.Context, s *statestore.Store, def workflow.Definition, id string, at time.Time) error {
	if _, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`, Workflow: def, Now: at}); err != nil {
		return err
	}
	_, err := s.Claim(ctx, statestore.Claim{OrderID: id, Ref: workflow.Ref{}, Agent: def.Steps[0].Agent, Owner: "agent", Now: at})
	return err
}

// fill copies the template order's items n times under new OrderIDs, 25 per
// BatchWriteItem, four writers at once.
func fill(tb testing.TB, db *dynamodb.Client, tpl []map[string]types.AttributeValue, n int) {
	tb.Helper()
	jobs := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for start := range jobs {
				reqs := map[string][]types.WriteRequest{}
				for i := start; i < min(start+25/len(tpl)*len(tpl), n*len(tpl)); i++ {
					src := tpl[i%len(tpl)]
					it := make(map[string]types.AttributeValue, len(src))
					for k, v := range src {
						it[k] = v
					}
					table := src["_table"].(*types.AttributeValueMemberS).Value
					delete(it, "_table")
					it[topology.KeyOrderID] = &types.AttributeValueMemberS{Value: "done-" + strconv.Itoa(i/len(tpl))}
					reqs[table] = append(reqs[table], types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
				}
				for len(reqs) > 0 {
					out, err := db.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: reqs})
					if err != nil {
						errs <- err
						return
					}
					reqs = out.UnprocessedItems
				}
			}
		})
	}
	step := 25 / len(tpl) * len(tpl)
	for start := 0; start < n*len(tpl); start += step {
		jobs <- start
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(tb, err)
	}
}

// sweepCost runs the Supervisor's query once and returns the read units it
// consumed and the records it found.
func (f sweepFixture) sweepCost(tb testing.TB) (float64, int) {
	tb.Helper()
	f.meter.Reset()
	due, err := f.store.Overdue(context.Background(), f.now, 500)
	require.NoError(tb, err)
	var rcu float64
	for _, u := range f.meter.Snapshot() {
		rcu += u.ReadUnits
	}
	return rcu, len(due)
}

// The sweep reads the overdue work, not the table: with thousands of
// finished orders its read units are those of an empty table (within 2x).
func TestSweepCostFollowsTheOverdueWork(t *testing.T) {
	t.Parallel()
	empty := newSweepFixture(t, 0)
	full := newSweepFixture(t, 2000)
	rcuEmpty, nEmpty := empty.sweepCost(t)
	rcuFull, nFull := full.sweepCost(t)
	require.Equal(t, 10, nEmpty)
	require.Equal(t, 10, nFull)
	require.Positive(t, rcuEmpty)
	require.LessOrEqual(t, rcuFull, 2*rcuEmpty, "read units with 2000 finished orders vs none")
	t.Logf("sweep read units: %.1f on an empty table, %.1f with 2000 finished orders", rcuEmpty, rcuFull)
}

// BenchmarkSweep times the Supervisor's query on an empty table and on one
// with SAS_SWEEP_ORDERS finished orders (default 2000; the README's figures
// use 100000), ten overdue steps in each, and reports its read units.
func BenchmarkSweep(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("SAS_SWEEP_ORDERS")); err == nil {
		n = v
	}
	for _, finished := range []int{0, n} {
		b.Run(fmt.Sprintf("finished=%d", finished), func(b *testing.B) {
			f := newSweepFixture(b, finished)
			rcu, found := f.sweepCost(b)
			if found != 10 {
				b.Fatalf("found %d overdue, want 10", found)
			}
			for b.Loop() {
				if _, err := f.store.Overdue(context.Background(), f.now, 500); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(rcu, "RCU/sweep")
		})
	}
}
