package localrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// operatorOf is the operator code sasctl and the console run, on e's stack.
func (e *env) operatorOf() *operator.Operator {
	op := operator.New(e.stack.Deployment.Clients, e.stack.Topology())
	op.PickupTimeout = e.stack.Opts.Settings.PickupTimeout
	return op
}

// orderTold sends one order, with a reply queue, and returns the queue's URL.
func (e *env) orderTold(id string) string {
	e.t.Helper()
	q := e.clientQueue(id)
	e.order(id, q)
	return q
}

func (e *env) cancelMessage(id string) {
	e.t.Helper()
	b, err := json.Marshal(message.Cancel{Kind: message.KindCancel, OrderID: id, Reason: "customer asked"})
	require.NoError(e.t, err)
	require.NoError(e.t, e.stack.SendOrders(context.Background(), string(b)))
}

// waitState waits until the order's task is in state st.
func (e *env) waitState(id string, st workflow.State) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s %s", id, st), 60*time.Second, func() bool {
		task, _, err := e.stack.Store.Load(context.Background(), id)
		return err == nil && task.State == st
	})
}

// A cancel message before the order's first step was claimed: the step never
// runs, nothing is undone, the order ends Cancelled at once, and its caller
// is told.
func TestCancelBeforeTheFirstClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		o.Stopped = []string{"agent-" + "inventory"} // the first step waits
	})
	q := e.orderTold("o-early")
	e.eventually("the order stored", 30*time.Second, func() bool {
		_, err := e.stack.Store.Order(context.Background(), "o-early")
		return err == nil
	})
	e.cancelMessage("o-early")
	tasks := e.waitEnded([]string{"o-early"})
	require.Equal(t, workflow.Cancelled, tasks["o-early"].State)
	require.Contains(t, tasks["o-early"].CancelledBy, "orders queue")
	require.Equal(t, "customer asked", tasks["o-early"].CancelReason)
	e.requireLedger("o-early")
	require.Equal(t, []string{"received", "cancel-requested", "cancelled"}, eventsOf(e.statuses(q, "cancelled")))
	e.stop() // every invocation ended: its metrics are written
	require.EqualValues(t, 1, e.stack.Tally.Sum(metrics.OrdersCancelled))
	requireEndMetric(t, e, workflow.OrderWorkflow, workflow.Cancelled)
}

// A cancel (from sasctl's operator code) while a step runs: its outcome is
// awaited, nothing new starts, the completed steps (the running one
// included) are undone in reverse order, each once, and the order ends
// Cancelled. Asking again is no error.
func TestCancelWhileAStepRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, patient)
	// Long enough that the cancel lands while it runs on a loaded machine
	// (the step's timeout is 20 s).
	e.sim.SetFaults("payment"+"/charge-payment", remotesim.Faults{Latency: 8 * time.Second})
	q := e.orderTold("o-mid")
	e.eventually("the charge running", 30*time.Second, func() bool {
		_, recs, err := e.stack.Store.Load(context.Background(), "o-mid")
		return err == nil && recs[1].State == workflow.Processing
	})
	op := e.operatorOf()
	res, err := op.Cancel(context.Background(), "o-mid", "test operator", "")
	require.NoError(t, err)
	require.Contains(t, res.What, "a step is running: its outcome is awaited")
	again, err := op.Cancel(context.Background(), "o-mid", "test operator", "")
	require.NoError(t, err)
	require.Contains(t, again.What, "asked before")
	tasks := e.waitEnded([]string{"o-mid"})
	require.Equal(t, workflow.Cancelled, tasks["o-mid"].State)
	e.requireLedger("o-mid", "reserve-inventory", "charge-payment", "refund-payment", "release-inventory")
	require.Equal(t, workflow.Pending, e.step("o-mid", 2).State, "the shipment never started")
	require.Equal(t, []string{"received", "step-done reserve-inventory", "step-done charge-payment", "cancel-requested",
		"undo-done refund-payment", "undo-done release-inventory", "cancelled"}, eventsOf(e.statuses(q, "cancelled")))
}

// A cancel while the order is already undoing its work after a failure is
// noted; the order ends Failed.
func TestCancelWhileCompensating(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, patient)
	e.sim.SetFaults("shipping", remotesim.Faults{PermanentOrders: []string{"o-comp"}})
	e.sim.SetFaults("payment"+"/refund-payment", remotesim.Faults{Latency: 2 * time.Second})
	e.orderTold("o-comp")
	e.waitState("o-comp", workflow.Compensating)
	res, err := e.operatorOf().Cancel(context.Background(), "o-comp", "test operator", "changed my mind")
	require.NoError(t, err)
	require.Equal(t, workflow.Compensating, res.State)
	require.Contains(t, res.What, "already undoing its work after a failure")
	tasks := e.waitEnded([]string{"o-comp"})
	require.Equal(t, workflow.Failed, tasks["o-comp"].State)
	require.Equal(t, "test operator", tasks["o-comp"].CancelledBy)
	e.requireLedger("o-comp", "reserve-inventory", "charge-payment", "refund-payment", "release-inventory")
}

// A cancel after the order ended is refused with the reason: from sasctl's
// operator code as an error, from the queue into the orders DLQ (and the
// caller told); the order stays as it was.
func TestCancelAfterTheEndIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, patient)
	q := e.orderTold("o-done")
	e.waitEnded([]string{"o-done"})
	_, err := e.operatorOf().Cancel(context.Background(), "o-done", "test operator", "")
	require.True(t, statestore.IsNotCancellable(err))
	require.ErrorContains(t, err, "the order is Processed: there is nothing to cancel")
	e.cancelMessage("o-done")
	reason := e.rejection(e.stack.Topology().OrdersQueue().DLQName, `"kind":"cancel"`)
	require.Contains(t, reason, "order o-done cannot be cancelled: the order is Processed")
	require.Contains(t, eventsOf(e.statuses(q, "cancel-refused")), "cancel-refused")
	tasks, err := e.stack.Store.Tasks(context.Background(), []string{"o-done"})
	require.NoError(t, err)
	require.Equal(t, workflow.Processed, tasks["o-done"].State)
	require.Empty(t, tasks["o-done"].CancelledBy)
}

// An OrderID resent with other content is a conflict: rejected to the
// orders DLQ with the reason, counted, its caller told; resent with the same
// content it is an idempotent success.
func TestConflictingResendIsRejectedWithItsReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, patient)
	e.orderTold("o-dup")
	e.waitEnded([]string{"o-dup"})
	same := localrun.DemoOrder("o-dup", 1)
	same.ReplyQueue = e.clientQueue("o-dup") // the same queue URL: the same content
	other := localrun.DemoOrder("o-dup", 2)
	other.ReplyQueue = e.clientQueue("o-dup-2")
	require.NoError(t, e.stack.SendOrders(context.Background(), same.JSON(), other.JSON()))
	reason := e.rejection(e.stack.Topology().OrdersQueue().DLQName, `"customerId":"customer-2"`)
	require.Equal(t, "invalid message: orderId o-dup was already accepted with different content", reason)
	sts := e.statuses(other.ReplyQueue, "rejected")
	require.Contains(t, sts[0].Error, "already accepted with different content")
	e.eventually("the identical resend counted", 30*time.Second, func() bool {
		return e.stack.Tally.Sum(metrics.DuplicateOrders) >= 1 && e.stack.Tally.Sum(metrics.ConflictingOrders) >= 1
	})
	stored, err := e.stack.Store.Order(context.Background(), "o-dup")
	require.NoError(t, err)
	require.Equal(t, same.JSON(), stored, "the first content stands")
	e.requireLedger("o-dup", forward...)
}

// rejection waits for a message containing body in the DLQ and returns its
// RejectReason.
func (e *env) rejection(dlq, body string) string {
	e.t.Helper()
	var reason string
	e.eventually("a rejection in "+dlq, e.rejectionWait(), func() bool {
		for b, r := range e.deadLetters(dlq) {
			if strings.Contains(b, body) {
				reason = r
				return true
			}
		}
		return false
	})
	return reason
}

// deadLetters peeks at a DLQ and returns every message seen in it so far,
// body → reason (those an earlier peek hid included).
func (e *env) deadLetters(dlq string) map[string]string {
	e.t.Helper()
	if e.rejected == nil {
		e.rejected = map[string]string{}
	}
	msgs, err := e.stack.Peek(context.Background(), e.stack.QueueURL(dlq))
	require.NoError(e.t, err)
	for _, m := range msgs {
		e.rejected[aws.ToString(m.Body)] = aws.ToString(m.MessageAttributes["RejectReason"].StringValue)
	}
	return e.rejected
}

// drained waits until a queue holds no message, visible or in flight.
func (e *env) drained(name string) {
	e.t.Helper()
	q := queue.NewSender(e.stack.Deployment.Clients.SQS)
	e.eventually(name+" drained", 60*time.Second, func() bool {
		d, err := q.Depth(context.Background(), e.stack.QueueURL(name))
		return err == nil && d.Visible == 0 && d.InFlight == 0
	})
}
