package localrun_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/shop"
	"github.com/sas-go/sas/shared/workflow"
)

// asyncItemsFlow is a workflow whose one step runs once per item of the
// order, each item's service answering later with a callback.
const asyncItemsFlow = `name: asyncitems
agents:
  inventory: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/inventory"}
defaults: {timeout: 10s, maxFailures: 3}
steps:
  - name: pack-item
    agent: inventory
    forEach: items
    async: true
`

// asyncItemsOrder is an order of asyncItemsFlow with n items, its status
// messages to replyQueue.
func asyncItemsOrder(id string, n int, replyQueue string) shop.Order {
	o := parallelOrder(id, n)
	o.Workflow, o.ReplyQueue = "asyncitems", replyQueue
	return o
}

// Each item's callback completes its own record: its status message names
// the item (pack-item#2), with a sequence number of its own, so none is
// dropped as a repeat of another (statuses keeps one message a number).
func TestEachItemOfAnAsyncForEachStepIsToldDone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, asyncItemsFlow))
	q := e.clientQueue("items")
	require.NoError(t, e.stack.SendOrders(context.Background(), asyncItemsOrder("o-items", 3, q).JSON()))
	sts := e.statuses(q, "processed")
	got := eventsOf(sts)
	require.Equal(t, "received", got[0])
	require.Equal(t, "processed", got[len(got)-1])
	done := slices.Sorted(slices.Values(got[1 : len(got)-1]))
	require.Equal(t, []string{"step-done pack-item#1", "step-done pack-item#2", "step-done pack-item#3"}, done)
}

// An item's callback that refuses the call fails that item for good: its
// failure names the item, and the Scheduler alerts at once (the record it
// names is the one whose alert is pending).
func TestAnAsyncItemRefusedByItsCallbackIsAlertedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		running(t, asyncItemsFlow)(o)
		o.SupervisorEvery = time.Hour // no sweep in the test: only the Scheduler can alert
	})
	e.sim.OnCallback(func(c remotesim.Callback) {
		ev := message.Event{OrderID: c.OrderID, Token: c.Token, Data: c.Answer}
		if tok, err := outcome.ParseToken(c.Token); err == nil && tok.Ref.Item == 1 {
			ev.Data, ev.Error = nil, "out of stock"
		}
		assert.NoError(t, e.stack.Signal(context.Background(), ev), "the callback sent") // not the test's goroutine
	})
	q := e.clientQueue("refused")
	require.NoError(t, e.stack.SendOrders(context.Background(), asyncItemsOrder("o-refused", 1, q).JSON()))
	tasks := e.waitEnded([]string{"o-refused"})
	require.Equal(t, workflow.Failed, tasks["o-refused"].State)
	require.Contains(t, eventsOf(e.statuses(q, "compensated")), "failed pack-item#1")
	alerts := e.alerts(1)
	require.Equal(t, "pack-item#1", alerts[0].StepName)
	require.Equal(t, "scheduler", alerts[0].DetectedBy)
	require.Equal(t, "out of stock", alerts[0].LastError)
}
