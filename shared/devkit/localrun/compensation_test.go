package localrun_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/workflow"
)

// order sends one order that asks for status messages on replyQueue.
func (e *env) order(id, replyQueue string) {
	e.t.Helper()
	o := localrun.DemoOrder(id, 1)
	o.ReplyQueue = replyQueue
	require.NoError(e.t, e.stack.SendOrders(context.Background(), o.JSON()))
}

func requireSequence(t *testing.T, sts []message.Status) {
	for i := 1; i < len(sts); i++ {
		require.Greater(t, sts[i].Seq, sts[i-1].Seq)
		require.False(t, sts[i].At.Before(sts[i-1].At), "sequence follows time: %v", eventsOf(sts))
	}
}

func TestStatusMessagesOfAProcessedOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, nil)
	q := e.clientQueue("happy")
	e.order("o-happy", q)
	sts := e.statuses(q, "processed")
	require.Equal(t, []string{"received", "step-done reserve-inventory", "step-done charge-payment",
		"step-done create-shipment", "processed"}, eventsOf(sts))
	requireSequence(t, sts)
	require.Equal(t, "Processed", sts[len(sts)-1].State)
	for _, st := range sts {
		require.Equal(t, "o-happy", st.OrderID)
		require.Equal(t, 1, st.Round)
	}
	for i, action := range forward {
		var answer struct{ Action, Key string }
		require.NoError(t, json.Unmarshal(sts[i+1].Result, &answer), "step-done carries the service's answer")
		require.Equal(t, action, answer.Action)
		require.Equal(t, "o-happy/"+action, answer.Key)
	}
	require.Empty(t, sts[0].Result, "only a step done has a result")
}

func TestFailureAtStepThreeUndoesStepsTwoAndOneInReverse(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, nil)
	e.sim.SetFaults("shipping", remotesim.Faults{PermanentOrders: []string{"o-comp"}})
	q := e.clientQueue("comp")
	e.order("o-comp", q)
	tasks := e.waitEnded([]string{"o-comp"})
	require.Equal(t, workflow.Failed, tasks["o-comp"].State, "failed, its work undone")
	// Each effect applied once, and the undos ran in reverse order.
	e.requireLedger("o-comp", "reserve-inventory", "charge-payment", "refund-payment", "release-inventory")
	recs := e.records("o-comp")
	require.Equal(t, workflow.Error, recs[workflow.Ref{Index: 2}].State)
	require.Equal(t, workflow.Processed, recs[workflow.Ref{Index: 1, Undo: true}].State)
	require.Equal(t, workflow.Processed, recs[workflow.Ref{Index: 0, Undo: true}].State)

	sts := e.statuses(q, "compensated")
	require.Equal(t, []string{"received", "step-done reserve-inventory", "step-done charge-payment",
		"failed create-shipment", "undo-done refund-payment", "undo-done release-inventory", "compensated"}, eventsOf(sts))
	requireSequence(t, sts)
	require.Contains(t, sts[3].Error, "HTTP 422")
	alerts := e.alerts(1)
	require.Equal(t, "create-shipment", alerts[0].StepName)
	require.Contains(t, alerts[0].Compensation, "started")
	e.stop() // every invocation ended: its metrics are written
	require.EqualValues(t, 1, e.stack.Tally.Sum(metrics.OrdersCompensated))
}

func TestUndoFailingForGoodEndsCompensationFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, nil)
	e.sim.SetFaults("shipping", remotesim.Faults{PermanentOrders: []string{"o-cf"}})
	e.sim.SetFaults("payment"+"/refund-payment", remotesim.Faults{PermanentOrders: []string{"o-cf"}})
	q := e.clientQueue("cf")
	e.order("o-cf", q)
	tasks := e.waitEnded([]string{"o-cf"})
	require.Equal(t, workflow.CompensationFailed, tasks["o-cf"].State)
	require.Contains(t, tasks["o-cf"].LastError, "refund-payment (undo)", "which undo did not happen")
	e.requireLedger("o-cf", "reserve-inventory", "charge-payment")
	recs := e.records("o-cf")
	require.Equal(t, workflow.Error, recs[workflow.Ref{Index: 1, Undo: true}].State)
	require.Equal(t, workflow.Pending, recs[workflow.Ref{Index: 0, Undo: true}].State, "left for the operator")

	alerts := e.alerts(2)
	var undo bool
	for _, a := range alerts {
		if a.Undo {
			undo = true
			require.Equal(t, "refund-payment", a.StepName)
			require.Contains(t, a.Compensation, "did not happen")
		}
	}
	require.True(t, undo, "an alert says the undo failed")
	sts := e.statuses(q, "compensation-failed")
	require.Equal(t, []string{"received", "step-done reserve-inventory", "step-done charge-payment",
		"failed create-shipment", "compensation-failed"}, eventsOf(sts))
	requireSequence(t, sts)
	require.EqualValues(t, 1, e.stack.Tally.Sum(metrics.CompensationFailures))
}

// The last step (create-shipment) has no undo action. Timed out for good, it
// may have taken effect, so the Supervisor undoes nothing: the order ends
// CompensationFailed and the alert tells the operator to check and resubmit.
func TestThresholdAtAStepWithoutUndoLeavesItToTheOperator(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) { o.Settings.MaxFailures = 1 })
	e.sim.SetFaults("shipping", remotesim.Faults{StallOrders: []string{"o-sup"}})
	q := e.clientQueue("sup")
	e.order("o-sup", q)
	tasks := e.waitEnded([]string{"o-sup"})
	require.Equal(t, workflow.CompensationFailed, tasks["o-sup"].State)
	e.requireLedger("o-sup", "reserve-inventory", "charge-payment")
	require.Equal(t, 1, e.step("o-sup", 2).FailureCount, "never past the threshold")
	require.Equal(t, workflow.Pending, e.records("o-sup")[workflow.Ref{Index: 1, Undo: true}].State, "nothing undone")
	sts := e.statuses(q, "compensation-failed")
	require.Equal(t, "failed create-shipment", eventsOf(sts)[3])
	require.Contains(t, sts[3].Error, "failure threshold 1 reached")
	alerts := e.alerts(1)
	require.Equal(t, "supervisor", alerts[0].DetectedBy)
	require.Contains(t, alerts[0].Compensation, "NOT STARTED: this step timed out for good and has no undo action")
}

// A step with an undo action that times out for good is undone itself first:
// its effect may have happened.
func TestThresholdAtAStepWithUndoCompensatesThroughTheSupervisor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) { o.Settings.MaxFailures = 1 })
	e.sim.SetFaults("payment"+"/charge-payment", remotesim.Faults{LostReplyOrders: []string{"o-pay"}})
	q := e.clientQueue("pay")
	e.order("o-pay", q)
	tasks := e.waitEnded([]string{"o-pay"})
	require.Equal(t, workflow.Failed, tasks["o-pay"].State)
	e.requireLedger("o-pay", "reserve-inventory", "charge-payment", "refund-payment", "release-inventory")
	sts := e.statuses(q, "compensated")
	require.Equal(t, "failed charge-payment", eventsOf(sts)[2])
	alerts := e.alerts(1)
	require.Contains(t, alerts[0].Compensation, "started")
}

// A reply queue outside the allowed ones is refused at submission, also one
// that starts with the allowed prefix and walks out of it (the orders queue
// would otherwise receive the order's status messages).
func TestDisallowedReplyQueueRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, nil)
	topo := e.stack.Topology()
	walked := e.stack.QueueURL(localrun.ClientQueuePrefix(e.stack.Opts.Prefix) + "../" + topo.OrdersQueue().Name)
	bad := map[string]string{
		"o-bad-reply":   e.stack.QueueURL(topo.SchedulerQueue().Name), // a queue no order may write to
		"o-walked-out":  walked,
		"o-encoded-out": strings.Replace(walked, "..", "%2e%2e", 1),
	}
	for id, q := range bad {
		e.order(id, q)
	}
	e.order("o-good", e.clientQueue("good"))
	e.waitEnded([]string{"o-good"})
	ctx := context.Background()
	reasons := map[string]string{}
	e.eventually("the orders rejected to the DLQ", e.rejectionWait(), func() bool {
		msgs, err := e.stack.Peek(ctx, e.stack.QueueURL(topo.OrdersQueue().DLQName))
		require.NoError(t, err)
		for _, m := range msgs {
			o, err := message.DecodeOrder(aws.ToString(m.Body), nil)
			require.NoError(t, err)
			reasons[o.OrderID] = aws.ToString(m.MessageAttributes["RejectReason"].StringValue)
		}
		return len(reasons) == len(bad)
	})
	require.Contains(t, reasons["o-bad-reply"], "is not allowed: it must be a queue of")
	require.Contains(t, reasons["o-walked-out"], "is not allowed: the path must be /ACCOUNT/QUEUE, nothing more")
	require.Contains(t, reasons["o-encoded-out"], "is not allowed: a queue URL has no percent-escape")
	got, err := e.stack.Store.Tasks(ctx, slices.Collect(maps.Keys(bad)))
	require.NoError(t, err)
	require.Empty(t, got, "none stored")
	msgs, err := e.stack.Peek(ctx, e.stack.QueueURL(topo.OrdersQueue().Name))
	require.NoError(t, err)
	require.Empty(t, msgs, "no status message walked into the orders queue")
}
