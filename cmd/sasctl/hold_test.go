package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/workflow"
)

// The order workflow whose payment holds the order on failure: the
// operator retries it once the card is fixed, skips it with a result given
// by hand, or undoes the order; list --state held shows the held ones.
func TestAnOperatorRetriesSkipsOrUndoesAHeldOrder(t *testing.T) {
	t.Parallel()
	ids := []string{"o-hr", "o-hs", "o-hu"}
	p := heldPipeline(t, ids...) // a card expired
	code, out, _ := p.ctl("", "status", "o-hr")
	require.Zero(t, code)
	require.Contains(t, out, "Order o-hr: Held")
	require.Contains(t, out, "held for its operator since ")
	require.Contains(t, out, "sasctl retry, skip or undo o-hr")
	var page listPage
	p.json("list", &page, "list", "--state", "held")
	require.Len(t, page.Orders, 3)
	require.False(t, page.Orders[0].HeldUntil.IsZero())
	require.Equal(t, []string{"o-hr/reserve-inventory"}, p.keys("o-hr"), "nothing undone while held")

	p.sim.SetFaults("payment", remotesim.Faults{}) // the card is replaced
	var res outcome.HoldDecided
	p.json("held", &res, "retry", "o-hr")
	require.Equal(t, outcome.HoldDecided{OrderID: "o-hr", Step: "charge-payment", State: workflow.Pending}, res)
	code, out, _ = p.ctl("", "skip", "o-hs", "--result", `{"charged":"by phone"}`)
	require.Zero(t, code)
	require.Equal(t, "order o-hs: step charge-payment taken as done; the order is Pending\n", out)
	code, out, _ = p.ctl("", "undo", "o-hu")
	require.Zero(t, code)
	require.Equal(t, "order o-hu is being undone; it is Compensating\n", out)
	p.waitEnded(ids...)

	var st operator.Status
	p.json("status", &st, "status", "o-hr")
	require.Equal(t, workflow.Processed, st.Order.State)
	require.Equal(t, []string{"o-hr/reserve-inventory", "o-hr/charge-payment", "o-hr/create-shipment"}, p.keys("o-hr"),
		"retried: charged, then shipped")
	p.json("status", &st, "status", "o-hs")
	require.Equal(t, workflow.Processed, st.Order.State)
	require.Equal(t, []string{"o-hs/reserve-inventory", "o-hs/create-shipment"}, p.keys("o-hs"), "skipped: never charged here")
	p.json("status", &st, "status", "o-hu")
	require.Equal(t, workflow.Failed, st.Order.State)
	require.Equal(t, []string{"o-hu/reserve-inventory", "o-hu/release-inventory"}, p.keys("o-hu"), "undone")

	code, _, errs := p.ctl("", "retry", "o-hr")
	require.Equal(t, 1, code)
	require.Equal(t, "sasctl retry: order o-hr is Processed, not held\n", errs)
	code, _, errs = p.ctl("", "skip", "o-hr", "--result", "{nope")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--result: its result is not JSON with one meaning (valid UTF-8, no member twice): {nope")
	code, _, errs = p.ctl("", "undo", "o-none")
	require.Equal(t, 1, code)
	require.Equal(t, "sasctl undo: order o-none not found\n", errs)
}

// heldPipeline is a pipeline of the order workflow whose payment holds the
// order on failure, with the orders ids submitted and held: their payments
// refused, until the test clears the payment service's faults.
func heldPipeline(t *testing.T, ids ...string) *pipeline {
	t.Helper()
	text, err := workflow.ExampleFile(workflow.OrderWorkflow)
	require.NoError(t, err)
	held := strings.Replace(string(text), "  - name: charge-payment\n    agent: payment\n",
		"  - name: charge-payment\n    agent: payment\n    onFailure: hold\n    holdFor: 1h\n", 1)
	require.NotEqual(t, string(text), held)
	d, err := workflow.ParseFile("order.yaml", []byte(held), workflow.Options{})
	require.NoError(t, err)
	p := newPipelineOf(t, workflow.MustSet(d), workflow.Settings{StepTimeout: 8 * time.Second, MaxFailures: 3,
		PickupTimeout: 2 * time.Second})
	p.sim.SetFaults("payment", remotesim.Faults{PermanentOrders: ids})
	for _, id := range ids {
		code, _, errs := p.ctl(orderJSON(id), "submit", "-")
		require.Zero(t, code, errs)
	}
	for _, id := range ids {
		p.waitState(id, workflow.Held)
	}
	return p
}
