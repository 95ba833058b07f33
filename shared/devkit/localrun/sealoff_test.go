package localrun_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
	e, svc := sealedAtItsWait(t, "  - name: scan\n    agent: scans\n", "sealed-1", 100<<10)
	ctx := context.Background()
	orders := e.stack.Topology().OrdersQueue().Name
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

// A Submission with no data key (its configuration lagging the deploy
// that set kms, while another instance already sealed an order) keeps none
// of a sealed order's event data in clear: it gives the event back, to
// come again later (noKeyRetries), and the order waits. Once it has the
// key, the event is taken, its data sealed under the order's data key,
// and the order goes on. Before, it stored the data as it came.
func TestASubmissionWithNoKeyKeepsNoSealedOrdersEventInClear(t *testing.T) {
	t.Parallel()
	e, _ := sealedAtItsWait(t, "", "nokey-1", 1<<10)
	ctx := context.Background()
	task, _, err := e.stack.Store.Load(ctx, "nokey-1")
	require.NoError(t, err)
	require.True(t, task.Sealed, "its state item says its data is sealed")

	// Its handlers rebuilt with no key, as a function not yet updated.
	e.stop()
	key := e.stack.Deployment.Config.DataKey
	e.stack.Deployment.Config.DataKey = ""
	e.start()
	const secret = "card-4111-1111-1111-1111"
	e.signal("nokey-1", "approved", "e-1", `{"by":"ana","card":"`+secret+`"}`)
	e.eventually("the event given back for want of a key", time.Minute, func() bool {
		return strings.Contains(e.logs.Tail(1<<20), "no data key (dataKey) to seal its event's data")
	})
	task, recs, err := e.stack.Store.Load(ctx, "nokey-1")
	require.NoError(t, err)
	require.Empty(t, task.Events, "not taken")
	require.Equal(t, workflow.Pending, recs[0].State, "the order waits")
	results, err := e.stack.Store.Results(ctx, "nokey-1", 1)
	require.NoError(t, err)
	require.Empty(t, results, "no data kept")
	state, err := e.stack.Deployment.Clients.DynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(e.stack.Topology().StateTable())})
	require.NoError(t, err)
	var items []map[string]any
	require.NoError(t, attributevalue.UnmarshalListOfMaps(state.Items, &items))
	require.Contains(t, fmt.Sprint(items), "nokey-1", "the scan reads the items' values")
	require.NotContains(t, fmt.Sprint(items), secret, "nothing of it in the state table")

	// Updated: the event comes back and is taken, sealed.
	e.stop()
	e.stack.Deployment.Config.DataKey = key
	e.start()
	require.Equal(t, workflow.Processed, e.waitEndedWithin([]string{"nokey-1"}, 2*time.Minute)["nokey-1"].State)
	results, err = e.stack.Store.Results(ctx, "nokey-1", 1)
	require.NoError(t, err)
	require.True(t, seal.IsSealed(results[workflow.Ref{Index: 0}].JSON), "its data sealed under the order's data key: %.100s",
		results[workflow.Ref{Index: 0}].JSON)
	require.NotContains(t, string(results[workflow.Ref{Index: 0}].JSON), secret)
}

// sealedAtItsWait is a sealed deployment of the large flow whose steps are
// first, then a wait for "approved", then file; and its order id, of size
// bytes (and its answer), parked at that wait.
func sealedAtItsWait(t *testing.T, first, id string, size int) (*env, *scans) {
	t.Helper()
	flow := largeFlow[:strings.Index(largeFlow, "steps:")] + "steps:\n" + first + `  - name: await
    wait:
      event: approved
      timeout: 5m
  - name: file
    agent: scans
`
	e, svc := largeEnv(t, flow, func(o *localrun.Options) { o.SealData = true })
	e.send(e.stack.Topology().OrdersQueue().Name, largeOrder(id, size, size))
	e.parked(id, strings.Count(first, "- name:"))
	return e, svc
}
