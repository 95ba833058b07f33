package localrun_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/workflow"
)

// Turning sealData off (a redeploy, the kms key kept) fails no order
// sealed before: an order sealed and parked at its wait runs to its end
// on the handlers rebuilt with sealData off, its event's data sealed under
// its own data key, its steps reading its data opened. A new order is not
// sealed, and its payloads are streamed to its service, as a deployment
// with no key streams them.
func TestTurningSealDataOffFailsNoSealedOrder(t *testing.T) {
	t.Parallel()
	flow := largeFlow[:strings.Index(largeFlow, "steps:")] + `steps:
  - name: scan
    agent: scans
  - name: await
    wait:
      event: approved
      timeout: 5m
  - name: file
    agent: scans
`
	e, svc := largeEnv(t, flow, func(o *localrun.Options) { o.SealData = true })
	ctx := context.Background()
	orders := e.stack.Topology().OrdersQueue().Name
	e.send(orders, largeOrder("sealed-1", 100<<10, 100<<10))
	e.parked("sealed-1", 1)
	stored, err := e.stack.Store.Order(ctx, "sealed-1")
	require.NoError(t, err)
	require.True(t, seal.Covers([]byte(stored)), "submitted sealed")

	// Redeployed with sealData off: the same key, the handlers rebuilt.
	e.stop()
	e.stack.Deployment.Config.SealData = false
	e.start()

	e.signal("sealed-1", "approved", "e-1", `{"by":"ana"}`)
	require.Equal(t, workflow.Processed, e.waitEndedWithin([]string{"sealed-1"}, 2*time.Minute)["sealed-1"].State,
		"the order sealed before runs to its end")
	results, err := e.stack.Store.Results(ctx, "sealed-1", 1)
	require.NoError(t, err)
	require.True(t, seal.IsSealed(results[workflow.Ref{Index: 1}].JSON), "its event's data sealed under its data key: %.100s",
		results[workflow.Ref{Index: 1}].JSON)
	in, ok := svc.of("sealed-1", "file")
	require.True(t, ok, "file ran")
	require.Equal(t, sum(pages(100<<10)), in.scanPages, "file read scan's sealed result opened")
	require.Equal(t, sum(strings.Repeat("d", 100<<10-len(`{"orderId":"sealed-1","workflow":"large","answer":102400,"doc":"`)-2)), in.orderDoc,
		"and the sealed order opened")

	e.send(orders, largeOrder("clear-1", 100<<10, 100<<10))
	e.parked("clear-1", 1)
	stored, err = e.stack.Store.Order(ctx, "clear-1")
	require.NoError(t, err)
	require.False(t, seal.Covers([]byte(stored)), "a new order is not sealed")
	e.signal("clear-1", "approved", "e-2", `{"by":"bo"}`)
	require.Equal(t, workflow.Processed, e.waitEndedWithin([]string{"clear-1"}, 2*time.Minute)["clear-1"].State)
	in, ok = svc.of("clear-1", "file")
	require.True(t, ok, "file ran")
	require.True(t, in.streamed, "its payloads streamed from the bucket, as a deployment with no key streams them")
	require.Equal(t, sum(pages(100<<10)), in.scanPages)
}
