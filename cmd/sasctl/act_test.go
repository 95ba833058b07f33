package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

func TestStatusOfACompensatedOrder(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	p.sim.SetFaults("shipping", remotesim.Faults{PermanentOrders: []string{"o-st"}})
	code, _, _ := p.ctl(orderJSON("o-st"), "submit", "-")
	require.Zero(t, code)
	p.waitEnded("o-st")

	code, out, _ := p.ctl("", "status", "o-st")
	require.Zero(t, code)
	t.Logf("sasctl status o-st:\n%s", out)
	require.Contains(t, out, "Order o-st: Failed (workflow order, round 1)")
	require.Contains(t, out, "last error: create-shipment: remote refused the request permanently (HTTP 422)")
	require.Regexp(t, `create-shipment\s+step\s+Error\s+1\s+0/3`, out)
	require.Regexp(t, `refund-payment\s+undo\s+Processed\s+1`, out)
	require.Regexp(t, `release-inventory\s+undo\s+Processed\s+1`, out)
	require.Less(t, strings.Index(out, "refund-payment"), strings.Index(out, "release-inventory"), "undos listed in the order they run")
	require.Contains(t, out, "Timeline")
	require.Contains(t, out, "failed for good (refused)")
	require.Regexp(t, `create-shipment\s+attempt 1 claimed by shipping/[0-9a-f]{12}`, out, "told by the record's own times")
	require.Regexp(t, `create-shipment\s+operator alerted`, out)

	var st operator.Status
	p.json("status", &st, "status", "o-st") // the flag after the argument
	require.Equal(t, workflow.Failed, st.Order.State)
	require.Equal(t, "o-st", st.Order.OrderID)
	require.False(t, st.Order.CompletedAt.IsZero())
	require.True(t, st.Order.CancelledAt.IsZero())
	require.Len(t, st.Records, 5)
	require.Equal(t, operator.Record{Name: "create-shipment", Kind: "agent", State: workflow.Error,
		Step: statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: 2}, State: workflow.Error, Attempt: 1, FailureCount: 0,
			Cause:  workflow.Refused,
			Action: workflow.Action{Name: "create-shipment", Agent: "shipping", MaxFailures: 3, Timeout: 8 * time.Second}}}},
		clearTimes(st.Records[2]))
	require.NotEmpty(t, st.Timeline)

	code, _, errs := p.ctl("", "status", "o-none")
	require.Equal(t, 1, code)
	require.Equal(t, "sasctl status: order o-none not found\n", errs)
	code, _, errs = p.ctl("", "status")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "sasctl status: need exactly one ORDER id, not 0 arguments\nRun 'sasctl status --help' for usage.")
	code, _, errs = p.ctl("", "status", "o-st", "--output", "yaml")
	require.Equal(t, 2, code)
	require.Contains(t, errs, `invalid argument "yaml" for "-o, --output" flag: must be text or json`)
}

// clearTimes is r without its times and its last error, for comparing the
// rest.
func clearTimes(r operator.Record) operator.Record {
	r.ReadyAt, r.ClaimedAt, r.CompleteBy, r.DueAt, r.DoneAt, r.LastError = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}, ""
	return r
}

// An ended order's records that will never run say so: the undo actions of
// a Processed order are not needed; in a Failed order, the undo action of
// the step that failed is not needed, and the steps after it were skipped.
func TestStatusOfAnEndedOrderSaysWhatNeverRuns(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	p.sim.SetFaults("payment", remotesim.Faults{PermanentOrders: []string{"o-nn-fail"}})
	for _, id := range []string{"o-nn-ok", "o-nn-fail"} {
		code, _, _ := p.ctl(orderJSON(id), "submit", "-")
		require.Zero(t, code)
	}
	p.waitEnded("o-nn-ok", "o-nn-fail")
	code, out, _ := p.ctl("", "status", "o-nn-ok")
	require.Zero(t, code)
	require.Regexp(t, `refund-payment\s+undo\s+NotNeeded\s+0`, out)
	require.Regexp(t, `release-inventory\s+undo\s+NotNeeded\s+0`, out)
	states := func(id string) map[string]workflow.State {
		var st operator.Status
		p.json("status", &st, "status", id)
		out := map[string]workflow.State{}
		for _, r := range st.Records {
			out[r.Name] = r.State
		}
		return out
	}
	require.Equal(t, map[string]workflow.State{"reserve-inventory": workflow.Processed, "charge-payment": workflow.Processed,
		"create-shipment": workflow.Processed, "refund-payment": operator.NotNeeded, "release-inventory": operator.NotNeeded},
		states("o-nn-ok"))
	require.Equal(t, map[string]workflow.State{"reserve-inventory": workflow.Processed, "charge-payment": workflow.Error,
		"create-shipment": operator.Skipped, "refund-payment": operator.NotNeeded, "release-inventory": workflow.Processed},
		states("o-nn-fail"))
}

func TestResubmitAfterTheFaultIsCleared(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	p.sim.SetFaults("payment", remotesim.Faults{PermanentOrders: []string{"o-rs"}})
	for _, id := range []string{"o-rs", "o-ok"} {
		code, _, _ := p.ctl(orderJSON(id), "submit", "-")
		require.Zero(t, code)
	}
	p.waitEnded("o-rs", "o-ok")

	code, _, errs := p.ctl("", "resubmit", "o-ok")
	require.Equal(t, 1, code)
	require.Equal(t, "sasctl resubmit: order o-ok is Processed; only Failed or CompensationFailed orders can be resubmitted\n", errs)
	code, _, errs = p.ctl("", "resubmit", "o-rs", "--step", "reserve-inventory")
	require.Equal(t, 1, code)
	require.Contains(t, errs, `step "reserve-inventory" is not one that failed (charge-payment)`)
	code, _, errs = p.ctl("", "resubmit", "o-missing")
	require.Equal(t, 1, code)
	require.Equal(t, "sasctl resubmit: order o-missing not found\n", errs)

	p.sim.SetFaults("payment", remotesim.Faults{}) // the operator fixed the cause
	var res operator.Resubmitted
	p.json("resubmit", &res, "resubmit", "o-rs")
	require.Equal(t, operator.Resubmitted{OrderID: "o-rs", Step: "reserve-inventory", Round: 2}, res)
	p.waitState("o-rs", workflow.Processed)
	require.Equal(t, []string{"o-rs/reserve-inventory", "o-rs/release-inventory", "o-rs/reserve-inventory/r2",
		"o-rs/charge-payment/r2", "o-rs/create-shipment/r2"}, p.keys("o-rs"), "undone in round 1, done again in round 2")
}

// create-shipment has no undo action. Its effect happens but every reply is
// lost, so it times out for good: the order ends CompensationFailed with
// nothing undone, and once the operator resubmits, the step runs again with
// the same idempotency key and the order completes, shipped once.
func TestResubmitAPivotStepThatTimedOut(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	p.sim.SetFaults("shipping", remotesim.Faults{LostReplyOrders: []string{"o-piv"}})
	code, _, _ := p.ctl(orderJSON("o-piv"), "submit", "-")
	require.Zero(t, code)
	p.waitEnded("o-piv")
	task, _, err := p.stack.Store.Load(context.Background(), "o-piv")
	require.NoError(t, err)
	require.Equal(t, workflow.CompensationFailed, task.State)
	require.Equal(t, []string{"o-piv/reserve-inventory", "o-piv/charge-payment", "o-piv/create-shipment"}, p.keys("o-piv"),
		"shipped, and nothing undone")
	code, out, _ := p.ctl("", "status", "o-piv")
	require.Zero(t, code)
	require.Regexp(t, `refund-payment\s+undo\s+Pending`, out, "what a resubmission may still run is not NotNeeded")

	p.sim.SetFaults("shipping", remotesim.Faults{})
	code, out, _ = p.ctl("", "resubmit", "o-piv")
	require.Zero(t, code)
	require.Equal(t, "order o-piv resubmitted: step create-shipment is Pending again (round 1); its request was sent\n", out)
	p.waitState("o-piv", workflow.Processed)
	require.Equal(t, []string{"o-piv/reserve-inventory", "o-piv/charge-payment", "o-piv/create-shipment"}, p.keys("o-piv"),
		"the resubmitted step replayed its effect: shipped once")
}

func TestRedriveMovesADeadLetterBack(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	ctx := context.Background()
	require.NoError(t, p.stack.SendOrders(ctx, `{"orderId":"o-dead"}`))
	dlq := p.stack.QueueURL(p.stack.Topology().OrdersQueue().DLQName)
	waitDLQ := func() {
		require.Eventually(t, func() bool {
			msgs, err := p.stack.Peek(ctx, dlq)
			require.NoError(t, err)
			// Peek hid them for a minute; redrive must see them: let them back.
			for _, m := range msgs {
				_, _ = p.stack.Deployment.Clients.SQS.ChangeMessageVisibility(ctx,
					&sqs.ChangeMessageVisibilityInput{QueueUrl: &dlq, ReceiptHandle: m.ReceiptHandle})
			}
			return len(msgs) > 0
		}, 30*time.Second, 100*time.Millisecond, "nothing reached the DLQ")
	}
	waitDLQ()
	var res operator.Redriven
	p.json("redrive", &res, "redrive", "--queue", "orders")
	// SQS may deliver a message twice: Submission then rejects it twice,
	// and the DLQ holds two copies of it.
	require.GreaterOrEqual(t, res.Moved, 1)
	require.Equal(t, operator.Redriven{Moved: res.Moved, From: p.prefix + "-orders-dlq", To: p.prefix + "-orders"}, res)
	waitDLQ() // still malformed: Submission rejects it again, with its reason
	code, out, _ := p.ctl("", "redrive", "--queue", "orders")
	require.Zero(t, code)
	require.Regexp(t, fmt.Sprintf(`^moved [1-9][0-9]* messages from %[1]s-orders-dlq to %[1]s-orders\n$`, regexp.QuoteMeta(p.prefix)), out)
	code, _, errs := p.ctl("", "redrive", "--queue", "payments")
	require.Equal(t, 1, code)
	require.Contains(t, errs, `no queue "payments"; the queues are orders, events, scheduler, agent-inventory-requests`)
}

func TestCancelFromTheCLI(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	// The charge hangs until its attempt's CompleteBy, however long the
	// cancel takes to come on a loaded machine: it is running when it does.
	p.sim.SetFaults("payment/charge-payment", remotesim.Faults{StallOrders: []string{"o-cx"}})
	code, _, _ := p.ctl(orderJSON("o-cx"), "submit", "-")
	require.Zero(t, code)
	require.Eventually(t, func() bool {
		_, recs, err := p.stack.Store.Load(context.Background(), "o-cx")
		return err == nil && recs[1].State == workflow.Processing
	}, 30*time.Second, 50*time.Millisecond, "the charge never ran")
	var res operator.Cancelled
	p.json("cancel", &res, "cancel", "o-cx", "--reason", "wrong size")
	require.Equal(t, "o-cx", res.OrderID)
	require.Equal(t, workflow.Compensating, res.State, "undone from now on: nothing new starts")
	require.Contains(t, res.What, "a step is running: its outcome is awaited, then the completed steps are undone")
	p.waitEnded("o-cx")
	code, out, _ := p.ctl("", "status", "o-cx")
	require.Zero(t, code)
	require.Contains(t, out, "Order o-cx: Cancelled")
	require.Regexp(t, `cancel asked by sasctl( \(.+\))? at \S+: wrong size`, out)
	require.Regexp(t, `refund-payment\s+undo\s+Processed`, out)
	require.Regexp(t, `create-shipment\s+step\s+Skipped`, out)

	code, out, errs := p.ctl("", "cancel", "o-cx")
	require.Zero(t, code, "asking again is no error: %s", errs)
	require.Equal(t, "order o-cx: its cancellation was asked before: nothing more to do\n", out)
	p.sim.SetFaults("payment/charge-payment", remotesim.Faults{}) // a charge answered at once: o-ok ends Processed, however loaded the machine
	code, _, _ = p.ctl(orderJSON("o-ok"), "submit", "-")
	require.Zero(t, code)
	p.waitEnded("o-ok")
	code, _, errs = p.ctl("", "cancel", "o-ok")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "order o-ok cannot be cancelled: the order is Processed: there is nothing to cancel")
	code, _, errs = p.ctl("", "cancel", "o-none")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "order o-none not found")
	code, out, _ = p.ctl("", "list", "--state", "cancelled")
	require.Zero(t, code)
	require.Contains(t, out, "o-cx")
}
