package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/console"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// An order of a version the deployment no longer runs shows its version and
// offers a move: its confirmation is the dry run (what it runs next, what it
// would undo), and the move moves that one order, which goes on under the
// new version.
func TestAnOrderIsMovedToTheDeployedVersionFromTheConsole(t *testing.T) {
	p := thePipeline(t)
	ctx := context.Background()
	require.NoError(t, p.stack.SendOrders(ctx, approvalOrder("con-mv-1")))
	p.waitParked(t, "con-mv-1", 1)

	text, err := workflow.ExampleFile("approval")
	require.NoError(t, err)
	v2, err := workflow.ParseFile("approval.yaml", []byte(strings.Replace(string(text), "  - name: await-approval\n",
		"  - name: fraud-check\n    agent: payment\n    undo: none\n  - name: await-approval\n", 1)), workflow.Options{})
	require.NoError(t, err)
	v2 = v2.With(workflow.Settings{StepTimeout: 10 * time.Second, MaxFailures: 3, RetryBackoff: 100 * time.Millisecond,
		PickupTimeout: 3 * time.Second}) // the pipeline's
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: motoEndpoint, DynamoDBEndpoint: dynamodbEndpoint, Emulated: true})
	require.NoError(t, err)
	op := operator.New(c, p.stack.Topology())
	op.PickupTimeout, op.Workflows = 3*time.Second, workflow.MustSet(v2)
	srv, err := console.New(console.Config{Operator: op, Refresh: 300 * time.Millisecond, Who: "console-test"})
	require.NoError(t, err)
	l, err := console.Listen("127.0.0.1:0")
	require.NoError(t, err)
	serveCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(serveCtx, l) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	base := strings.TrimSuffix(console.URL(l), "/")

	task, _, err := p.stack.Store.Load(ctx, "con-mv-1")
	require.NoError(t, err)
	_, body := get(t, base+"/orders/con-mv-1")
	require.Contains(t, body, "version "+task.Version)
	require.Contains(t, body, `id="move" href="/orders/con-mv-1/move">Move to version `+v2.Version)
	code, body := get(t, base+"/orders/con-mv-1/move")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "Move order con-mv-1 to version "+v2.Version+"?")
	require.Contains(t, body, "runs next fraud-check; would undo release-inventory")
	after, _, err := p.stack.Store.Load(ctx, "con-mv-1")
	require.NoError(t, err)
	require.Equal(t, task.Version, after.Version, "the confirmation is a dry run")

	code, _, h := post(t, base+"/orders/con-mv-1/move", url.Values{"token": {token(t, base)}}, map[string]string{"Origin": base})
	require.Equal(t, http.StatusSeeOther, code)
	_, body = get(t, base+h.Get("Location"))
	require.Contains(t, body, "Moved from version "+task.Version+" to "+v2.Version)
	require.Contains(t, body, "moved from version "+task.Version+" to "+v2.Version+" by console-test")
	p.waitParked(t, "con-mv-1", 2) // the fraud check ran; it waits again
	require.NoError(t, p.stack.Signal(ctx, message.Event{OrderID: "con-mv-1", Event: "approved", EventID: "e-1",
		Data: []byte(`{"amountCents":1998,"by":"ana"}`)}))
	p.waitState(t, "con-mv-1", workflow.Processed)
}
