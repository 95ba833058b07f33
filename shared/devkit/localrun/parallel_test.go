package localrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/shop"
	"github.com/sas-go/sas/shared/workflow"
)

// parallelOrder is an order of the parallel example with n items.
func parallelOrder(id string, n int) shop.Order {
	o := localrun.DemoOrder(id, 0)
	o.Workflow = workflow.ParallelWorkflow
	for k := range n {
		o.Items = append(o.Items[:k], shop.Item{SKU: fmt.Sprintf("SKU-%d", k), Quantity: 1 + k, UnitPriceCents: 100})
	}
	return o
}

func parallelExample(o *localrun.Options) {
	o.Workflows = workflow.MustSet(workflow.MustExample(workflow.ParallelWorkflow))
}

// The two reservations and the authorization run at once, the charge after
// all three, then one pack per item (each given its item), then the
// shipment: every effect once, and each reservation claimed before any of
// the others was done.
func TestParallelStepsRunAtOnceThenTheJoinThenEachItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{Latency: 300 * time.Millisecond}, func(o *localrun.Options) { parallelExample(o); patient(o) })
	// The three first steps take long enough that each is claimed before
	// any is done, on a loaded machine too.
	for _, a := range []string{"inventory/reserve-inventory", "payment/authorize-payment"} {
		e.sim.SetFaults(a, remotesim.Faults{Latency: 2 * time.Second})
	}
	ids := []string{"p-1", "p-2"}
	for _, id := range ids {
		require.NoError(t, e.stack.SendOrders(context.Background(), parallelOrder(id, 3).JSON()))
	}
	tasks := e.waitEnded(ids)
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State, id)
		var got []string
		for _, eff := range e.sim.Ledger() {
			if eff.OrderID == id {
				got = append(got, workflow.RecordName(eff.Action, workflow.Ref{}))
			}
		}
		slices.Sort(got)
		require.Equal(t, []string{"authorize-payment", "charge-payment", "create-shipment", "pack-item", "pack-item", "pack-item",
			"reserve-inventory", "reserve-inventory"}, got, "each effect once, an item's pack once per item")
		east, west, auth, charge := e.step(id, 0), e.step(id, 1), e.step(id, 2), e.step(id, 3)
		first := slices.MinFunc([]time.Time{east.DoneAt, west.DoneAt, auth.DoneAt}, time.Time.Compare)
		for _, st := range []time.Time{east.ClaimedAt, west.ClaimedAt, auth.ClaimedAt} {
			require.True(t, st.Before(first), "the three started at once: each claimed before any was done")
		}
		last := slices.MaxFunc([]time.Time{east.DoneAt, west.DoneAt, auth.DoneAt}, time.Time.Compare)
		require.False(t, charge.ClaimedAt.Before(last), "the charge after all three")
	}
	for k := 1; k <= 3; k++ {
		in := e.itemInput("p-1", k)
		require.EqualValues(t, k, in["item"].(map[string]any)["quantity"], "item %d got its own item", k)
	}
}

// itemInput is what the pack service got for item k of the order.
func (e *env) itemInput(id string, k int) map[string]any {
	e.t.Helper()
	key := workflow.IdempotencyKey(id, workflow.RecordName("pack-item", workflow.Ref{Item: k}), 1)
	for _, eff := range e.sim.Ledger() {
		if eff.Key == key {
			var v map[string]any
			require.NoError(e.t, json.Unmarshal(eff.Input, &v))
			return v
		}
	}
	e.t.Fatalf("%s: no effect with key %s", id, key)
	return nil
}

// A reservation refused while the other and the authorization run: they
// are awaited, then what completed is undone, the latest first.
func TestAFailedBranchIsUndoneWithItsCompletedSiblings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{Latency: 200 * time.Millisecond}, func(o *localrun.Options) { parallelExample(o); patient(o) })
	e.sim.SetFaults("payment/authorize-payment", remotesim.Faults{Latency: time.Second})
	e.sim.SetFaults("inventory", remotesim.Faults{Latency: 200 * time.Millisecond, PermanentOrders: []string{"p-bad"}})
	// The refusals wait for the authorization's call, however loaded the
	// machine: it runs when they come, and is awaited.
	authorizing := make(chan struct{})
	var once sync.Once
	e.sim.Guard("payment", func(*http.Request, []byte) error { once.Do(func() { close(authorizing) }); return nil })
	e.sim.Guard("inventory", func(*http.Request, []byte) error {
		select {
		case <-authorizing:
		case <-time.After(60 * time.Second):
		}
		return nil
	})
	require.NoError(t, e.stack.SendOrders(context.Background(), parallelOrder("p-bad", 2).JSON()))
	tasks := e.waitEnded([]string{"p-bad"})
	require.Equal(t, workflow.Failed, tasks["p-bad"].State)
	e.requireLedger("p-bad", "authorize-payment", "void-authorization")
	require.True(t, e.step("p-bad", 3).ClaimedAt.IsZero(), "the charge never started")
}

// An order of the parallel example with a hundred items (the most a
// forEach step takes), every call answered in 300 ms and no fault: the
// completion that makes its hundred items ready is one write, the hundred
// finish at once around each other, and no attempt is recovered and no
// failure counted (waiting is not failing). The figures (time to Processed, write
// units and writes an item: its claim, its result, its completion; the
// state item's size) are logged: go test
// -run TestAnOrderOfAHundredItems -v ./shared/devkit/localrun.
func TestAnOrderOfAHundredItems(t *testing.T) {
	t.Parallel()
	meter := accounting.NewForDynamoDBLocal()
	e := newEnv(t, remotesim.Faults{Latency: 300 * time.Millisecond}, func(o *localrun.Options) {
		parallelExample(o)
		o.Settings, o.Meter = workflow.Settings{}, meter // the example's own timeouts: 20 s a step, a 1 m pickup
		// A deployment's visibility timeout, not the tests' 5 s: a batch of
		// ten calls on a loaded machine may take longer, and its requests
		// would come back to be refused, writes a deployment never makes.
		o.VisibilityTimeout = 30 * time.Second
	})
	ctx := context.Background()
	ids := []string{"big-1"}
	meter.Reset()
	start := time.Now()
	require.NoError(t, e.stack.SendOrders(ctx, parallelOrder(ids[0], workflow.MaxForEachItems).JSON()))
	tasks := e.waitEnded(ids)
	elapsed := time.Since(start)
	failures, sizes := 0, []int{}
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State, id)
		_, recs, err := e.stack.Store.Load(ctx, id)
		require.NoError(t, err)
		for _, r := range recs {
			failures += r.FailureCount
		}
		size, err := e.stack.Store.ItemBytes(ctx, id)
		require.NoError(t, err)
		sizes = append(sizes, size)
	}
	recovered := e.stack.Tally.Sum(metrics.SupervisorRecoveries)
	require.Zero(t, recovered, "no attempt recovered")
	require.Zero(t, failures, "no failure counted")
	var writes, units float64
	by := map[string]float64{} // writes by function and operation
	for k, u := range meter.Snapshot() {
		if k.Service == "DynamoDB" && (k.Operation == "UpdateItem" || k.Operation == "PutItem" || k.Operation == "TransactWriteItems") {
			writes += float64(u.Requests)
			units += u.WriteUnits
			by[k.Function+"/"+k.Operation] += float64(u.Requests)
		}
	}
	t.Logf("writes by function and operation: %v", by)
	items := float64(len(ids) * workflow.MaxForEachItems)
	t.Logf("an order of %d items, 300 ms a call: Processed in %s; %d attempts recovered, %d failures counted; "+
		"%.1f writes and %.1f write units an item (%.0f and %.0f in all); the state item at its end: %v bytes",
		workflow.MaxForEachItems, elapsed.Round(100*time.Millisecond), int(recovered), failures, writes/items, units/items, writes, units, sizes)
}
