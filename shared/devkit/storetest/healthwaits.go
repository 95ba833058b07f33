package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
)

// HealthWaits checks, on the engine c names (DynamoDB), that an operator's
// health view (sasctl top, the console's health page) counts each order in
// flight by what it waits for, read from the store: an event (named), a
// timer, a callback, its flow control's class, held with its cause, or at
// work; and that a step ready for an agent its operator paused waits in
// its flow control, no longer at work.
func HealthWaits(t *testing.T, c *awsclient.Clients) {
	t.Helper()
	ctx := context.Background()
	topo := NewTables(t, c.DynamoDB)
	s := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	waitingOrders(t, s)
	heldAt(t, s, "o-held", t0)
	op := operator.New(c, topo)

	want := map[string]map[string]int{
		"waiting": {"event: approved": 1}, "sleeping": {"timer": 1}, "async": {"callback": 1},
		"test": {"flow: pause": 1}, "ready": {"at work": 1}, "running": {"at work": 1},
		"holding": {"held: refused": 1},
	}
	require.Equal(t, want, waitingByWorkflow(t, op))

	_, err := op.PauseAgent(ctx, "svc", "ops")
	require.NoError(t, err)
	want["ready"] = map[string]int{"flow: pause": 1}
	require.Equal(t, want, waitingByWorkflow(t, op), "ready for a paused agent: waiting in its flow control; a call running is at work")
}

// waitingByWorkflow is each workflow's orders in flight by what they wait
// for, as op's health view counts them.
func waitingByWorkflow(t *testing.T, op *operator.Operator) map[string]map[string]int {
	t.Helper()
	hs, err := op.Health(context.Background(), t0)
	require.NoError(t, err)
	out := map[string]map[string]int{}
	for _, h := range hs {
		out[h.Workflow] = h.Waiting
	}
	return out
}
