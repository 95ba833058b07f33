package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/client"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

var motoEndpoint string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMoto(m, &motoEndpoint)) }

// A local pipeline of the approval example, and a client of it reached as
// an application reaches a deployment: by its prefix and endpoint.
func pipeline(t *testing.T) *client.Client {
	t.Helper()
	c, start := idlePipeline(t)
	start()
	return c
}

// idlePipeline is pipeline with its functions not started yet: start runs
// them (and the test's end stops them).
func idlePipeline(t *testing.T) (c *client.Client, start func()) {
	t.Helper()
	sim := remotesim.New(1)
	srv, err := sim.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	prefix := fmt.Sprintf("cl%d", time.Now().UnixNano()%1e6)
	stack, err := localrun.New(context.Background(), localrun.Options{Endpoint: motoEndpoint, Prefix: prefix, RemoteURL: srv.URL,
		Workflows: workflow.MustSet(searchableApproval()), VisibilityTimeout: 5 * time.Second,
		SupervisorEvery: 200 * time.Millisecond, Settings: workflow.Settings{StepTimeout: 8 * time.Second, PickupTimeout: 2 * time.Second}})
	require.NoError(t, err)
	t.Setenv("AWS_REGION", "us-east-1")
	c, err = client.New(context.Background(), client.Options{Prefix: prefix, Endpoint: motoEndpoint})
	require.NoError(t, err)
	return c, func() { t.Cleanup(stack.Start(context.Background())) }
}

// searchableApproval is the approval workflow with its orders' customerId
// searchable.
func searchableApproval() workflow.Definition {
	text, err := workflow.ExampleFile("approval")
	if err != nil {
		panic(err)
	}
	d, err := workflow.ParseFile("approval.yaml", append(text, "search: [customerId]\n"...), workflow.Options{})
	if err != nil {
		panic(err)
	}
	return d
}

// waitFor polls the order's status until ok says so.
func waitFor(t *testing.T, c *client.Client, id string, ok func(operator.Status) bool) operator.Status {
	t.Helper()
	var st operator.Status
	require.Eventually(t, func() bool {
		var err error
		st, err = c.Status(context.Background(), id)
		return err == nil && ok(st)
	}, 60*time.Second, 100*time.Millisecond, "order %s: %+v", id, st.Order)
	return st
}

// An application submits an order, sees it wait for its approval, sends
// the approval and sees it Processed; each mistake is a typed error.
func TestAnApplicationDrivesAnOrderWithTheClient(t *testing.T) {
	c := pipeline(t)
	ctx := context.Background()
	o := localrun.DemoOrder("o-cl1", 1)
	o.Workflow = "approval"
	id, err := c.Submit(ctx, o)
	require.NoError(t, err)
	require.Equal(t, "o-cl1", id)
	waitFor(t, c, id, func(st operator.Status) bool { return len(st.Records) > 1 && st.Records[1].Waiting != nil })

	_, err = c.Signal(ctx, "o-none", "approved", nil, "", client.IfStored())
	require.ErrorIs(t, err, client.ErrNotFound)
	_, err = c.Signal(ctx, "o-none", "approved", json.RawMessage(nil), "", client.IfStored())
	require.ErrorIs(t, err, client.ErrNotFound, "empty data is no data")
	_, err = c.Signal(ctx, id, "approved!", nil, "")
	require.ErrorIs(t, err, client.ErrBadEvent)
	_, err = c.Signal(ctx, id, "approved", json.RawMessage("{nope"), "")
	require.ErrorIs(t, err, client.ErrBadEvent, "data that is not JSON")
	sent, err := c.Signal(ctx, id, "approved", map[string]any{"amountCents": 1998, "by": "ana"}, "e-1")
	require.NoError(t, err)
	require.Equal(t, "e-1", sent.EventID)
	st := waitFor(t, c, id, func(st operator.Status) bool { return st.Order.State == workflow.Processed })
	require.Equal(t, "e-1", st.Order.Events["approved"])

	orders, _, err := c.List(ctx, workflow.Processed, 10, "")
	require.NoError(t, err)
	require.Contains(t, ids(orders), id)

	_, err = c.Cancel(ctx, id, "app", "too late")
	var nc *client.NotCancellableError
	require.ErrorAs(t, err, &nc)
	require.Contains(t, nc.Error(), "the order is Processed")
	_, err = c.Status(ctx, "o-none")
	require.True(t, errors.Is(err, client.ErrNotFound))
	_, err = c.Retry(ctx, id, "", "app")
	var held *client.HeldError
	require.ErrorAs(t, err, &held)

	for _, c2 := range []struct {
		order any
		says  string
	}{
		{`{"items":[]}`, "orderId"},
		{"not json", "not JSON"},
		{map[string]int{"x": 1}, "orderId"},
		{`{"orderId":"o-x","nope":`, "not JSON"},
	} {
		_, err := c.Submit(ctx, c2.order)
		var rej *client.RejectedError
		require.ErrorAs(t, err, &rej, "%v", c2.order)
		require.Contains(t, rej.Error(), c2.says, "%v", c2.order)
	}
}

// An application signals an order right after submitting it, before
// Submission has stored it: the event is sent all the same (Ahead), as one
// on the events queue from the application's own SQS client would be, and
// the order takes it once it is stored.
func TestASignalRightAfterSubmitIsTaken(t *testing.T) {
	c, start := idlePipeline(t) // nothing takes the order before the event is sent
	ctx := context.Background()
	o := localrun.DemoOrder("o-cl2", 1)
	o.Workflow = "approval"
	id, err := c.Submit(ctx, o)
	require.NoError(t, err)
	_, err = c.Signal(ctx, id, "approved", nil, "", client.IfStored())
	require.ErrorIs(t, err, client.ErrNotFound, "asked for a stored order only: nothing sent")
	sent, err := c.Signal(ctx, id, "approved", map[string]any{"amountCents": 1998, "by": "ana"}, "e-early")
	require.NoError(t, err)
	require.True(t, sent.Ahead, "sent before its order was stored")
	start()
	st := waitFor(t, c, id, func(st operator.Status) bool { return st.Order.State.Ended() })
	require.Equal(t, workflow.Processed, st.Order.State)
	require.Equal(t, "e-early", st.Order.Events["approved"])
	require.JSONEq(t, `{"amountCents": 1998, "by": "ana"}`, string(st.Records[1].Result), "the event's data is the wait's result")
}

func ids(orders []operator.Order) []string {
	var out []string
	for _, o := range orders {
		out = append(out, o.OrderID)
	}
	return out
}
