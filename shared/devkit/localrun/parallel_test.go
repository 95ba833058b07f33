package localrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

// parallelOrder is an order of the parallel example with n items.
func parallelOrder(id string, n int) message.Order {
	o := localrun.DemoOrder(id, 0)
	o.Workflow = workflow.ParallelWorkflow
	for k := range n {
		o.Items = append(o.Items[:k], message.Item{SKU: fmt.Sprintf("SKU-%d", k), Quantity: 1 + k, UnitPriceCents: 100})
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
	require.NoError(t, e.stack.SendOrders(context.Background(), parallelOrder("p-bad", 2).JSON()))
	tasks := e.waitEnded([]string{"p-bad"})
	require.Equal(t, workflow.Failed, tasks["p-bad"].State)
	e.requireLedger("p-bad", "authorize-payment", "void-authorization")
	require.True(t, e.step("p-bad", 3).ClaimedAt.IsZero(), "the charge never started")
}
