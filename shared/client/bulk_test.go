package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/client"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// submitWaiting submits approval orders (id → its customer's number) and
// waits until each waits for its approval.
func submitWaiting(t *testing.T, c *client.Client, orders map[string]int) {
	t.Helper()
	for id, customer := range orders {
		o := localrun.DemoOrder(id, customer)
		o.Workflow = "approval"
		_, err := c.Submit(context.Background(), o)
		require.NoError(t, err)
	}
	for id := range orders {
		waitFor(t, c, id, func(st operator.Status) bool { return len(st.Records) > 1 && st.Records[1].Waiting != nil })
	}
}

// An application finds orders by a field its workflow declares searchable
// (from the field's index) and by the step they are at, as sasctl list
// does; a search that can keep nothing is an error.
func TestAnApplicationFindsOrdersByAFieldAndAStep(t *testing.T) {
	c := pipeline(t)
	ctx := context.Background()
	submitWaiting(t, c, map[string]int{"o-f1": 61, "o-f2": 61, "o-f3": 62})

	found, next, err := c.Find(ctx, client.Search{Field: "customerId", Value: "customer-61"}, 10, "")
	require.NoError(t, err)
	require.Empty(t, next)
	require.ElementsMatch(t, []string{"o-f1", "o-f2"}, ids(found))
	found, _, err = c.Find(ctx, client.Search{Prefix: "o-f", Step: "await-approval"}, 10, "")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"o-f1", "o-f2", "o-f3"}, ids(found))
	found, _, err = c.Find(ctx, client.Search{Prefix: "o-f", Step: "charge-approved"}, 10, "")
	require.NoError(t, err)
	require.Empty(t, found, "none is at its charge")
	found, _, err = c.Find(ctx, client.Search{Field: "customerId", Value: "customer-62", State: workflow.Processed}, 10, "")
	require.NoError(t, err)
	require.Empty(t, found, "none is Processed")
	_, _, err = c.Find(ctx, client.Search{OlderThan: 2 * time.Hour, NewerThan: 10 * time.Minute}, 10, "")
	require.ErrorContains(t, err, "no order is older than 2h and newer than 10m")
}

// An application cancels the orders of a customer by a search: the dry run
// lists them and writes nothing; the run that confirms it acts on those it
// listed (one ended meanwhile: changed since the dry run, not touched), its
// report counts them, and each order's history names the bulk action. The
// same search again refuses them all, ended; a bulk that names no orders,
// or no one acting, is refused.
func TestAnApplicationCancelsOrdersByASearchAfterADryRun(t *testing.T) {
	c := pipeline(t)
	ctx := context.Background()
	submitWaiting(t, c, map[string]int{"o-k1": 63, "o-k2": 63, "o-k3": 63, "o-k4": 64})
	customer := client.Search{Field: "customerId", Value: "customer-63"}
	before := orders(t, c, "o-k1", "o-k2", "o-k3")

	dry, err := c.CancelMany(ctx, client.Bulk{Search: customer, By: "backoffice", DryRun: true}, "customer left")
	require.NoError(t, err)
	require.True(t, dry.DryRun)
	require.Equal(t, [3]int{3, 3, 0}, [3]int{dry.Listed, dry.Done, dry.Refused + dry.Changed + dry.Left})
	require.ElementsMatch(t, []string{"o-k1", "o-k2", "o-k3"}, dry.Would())
	require.Equal(t, before, orders(t, c, "o-k1", "o-k2", "o-k3"), "a dry run writes nothing")

	_, err = c.Cancel(ctx, "o-k3", "the customer", "by phone") // meanwhile
	require.NoError(t, err)
	waitFor(t, c, "o-k3", func(st operator.Status) bool { return st.Order.State == workflow.Cancelled })
	var told []string
	rep, err := c.CancelMany(ctx, client.Bulk{IDs: dry.Would(), FromDryRun: true, By: "backoffice",
		Each: func(r client.BulkResult) { told = append(told, r.OrderID) }}, "customer left")
	require.NoError(t, err)
	require.False(t, rep.DryRun)
	require.Equal(t, [5]int{3, 2, 0, 1, 0}, [5]int{rep.Listed, rep.Done, rep.Refused, rep.Changed, rep.Left}, "%+v", rep.Orders)
	require.Equal(t, map[string]int{"it ended Cancelled": 1}, rep.Why)
	require.ElementsMatch(t, dry.Would(), told)
	require.Contains(t, rep.By, "backoffice cancel (bulk ")
	require.Contains(t, rep.By, ", 3 orders)")
	for _, id := range []string{"o-k1", "o-k2"} {
		st := waitFor(t, c, id, func(st operator.Status) bool { return st.Order.State == workflow.Cancelled })
		require.Equal(t, rep.By, st.Order.CancelledBy, "its history names the bulk action")
	}
	st, err := c.Status(ctx, "o-k4")
	require.NoError(t, err)
	require.Equal(t, workflow.Pending, st.Order.State, "another customer's order is not touched")

	again, err := c.CancelMany(ctx, client.Bulk{Search: customer, By: "backoffice", Rate: -1}, "customer left")
	require.NoError(t, err)
	require.Equal(t, [3]int{3, 0, 3}, [3]int{again.Listed, again.Done, again.Refused})
	require.Equal(t, map[string]int{"it ended Cancelled": 3}, again.Why)

	for _, b := range []client.Bulk{{By: "x"}, {IDs: []string{"o-k4"}, Search: customer, By: "x"}} {
		_, err = c.CancelMany(ctx, b, "")
		require.ErrorIs(t, err, client.ErrNoSelection)
	}
	_, err = c.CancelMany(ctx, client.Bulk{IDs: []string{"o-k4"}}, "")
	require.ErrorContains(t, err, "needs By")
	_, err = c.SkipMany(ctx, client.Bulk{IDs: []string{"o-k4"}, By: "x"}, "", "{nope")
	var held *client.HeldError
	require.ErrorAs(t, err, &held)
	st, err = c.Status(ctx, "o-k4")
	require.NoError(t, err)
	require.Equal(t, workflow.Pending, st.Order.State, "nothing refused touched it")
}

// orders are the orders' views, by id.
func orders(t *testing.T, c *client.Client, ids ...string) map[string]operator.Order {
	t.Helper()
	out := map[string]operator.Order{}
	for _, id := range ids {
		st, err := c.Status(context.Background(), id)
		require.NoError(t, err)
		out[id] = st.Order
	}
	return out
}

// A client is used from many goroutines at once (an application's
// handlers): their first actions, before the deployment's agents are
// known, each look them up, and none writes what another reads (run with
// -race, as CI does: the operator wrote its Topology's agents from each).
func TestAClientActsFromManyGoroutinesAtOnce(t *testing.T) {
	c := pipeline(t)
	ids := map[string]int{"o-g1": 70, "o-g2": 71, "o-g3": 72, "o-g4": 73}
	submitWaiting(t, c, ids)
	errs := make(chan error, len(ids))
	var wg sync.WaitGroup
	for id := range ids {
		wg.Go(func() {
			_, err := c.Cancel(context.Background(), id, "backoffice", "at once")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for id := range ids {
		waitFor(t, c, id, func(st operator.Status) bool { return st.Order.State == workflow.Cancelled })
	}
}
