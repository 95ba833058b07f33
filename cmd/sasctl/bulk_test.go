package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
)

// Held orders are retried, undone and resubmitted by a query or by ids:
// a dry run lists what it would touch and writes nothing, each action ends
// with its report, a query the action refuses says why, and the order's
// status names the bulk action.
func TestAnOperatorActsOnHeldOrdersByAQuery(t *testing.T) {
	t.Parallel()
	ids := []string{"o-b1", "o-b2", "o-b3", "o-b4"}
	p := heldPipeline(t, ids...) // the bank refuses them

	var rep operator.BulkReport
	p.json("bulk", &rep, "retry", "--state", "held", "--workflow", "order", "--dry-run")
	require.Equal(t, 4, rep.Done)
	require.True(t, rep.DryRun)
	code, out, _ := p.ctl("", "retry", "--state", "held", "--id-prefix", "o-b", "--dry-run")
	require.Zero(t, code)
	require.Contains(t, out, "o-b1: would retry\n")
	require.Contains(t, out, "retry: 4 listed, 4 would retry, 0 done already, 0 refused, 0 changed since listed, 0 left")
	var page listPage
	p.json("list", &page, "list", "--state", "held")
	require.Len(t, page.Orders, 4, "a dry run changes nothing")

	code, out, errs := p.ctl("", "undo", "o-b1", "o-b2", "o-none", "--rate", "0")
	require.Zero(t, code, errs)
	require.Contains(t, out, "o-b1: being undone; it is Compensating\n")
	require.Contains(t, out, "o-none: not: not found\n")
	require.Contains(t, out, "undo: 3 listed, 2 done, 0 done already, 1 refused, 0 changed since listed, 0 left")
	require.Contains(t, errs, "undo: 3 orders listed; each one's history names \"sasctl")

	p.sim.SetFaults("payment", remotesim.Faults{}) // the bank answers again
	rep = operator.BulkReport{}
	p.json("bulk", &rep, "retry", "--state", "held", "--rate", "0")
	require.Equal(t, 2, rep.Done, "%+v", rep.Orders)
	require.Contains(t, rep.By, " retry (bulk ")
	require.Contains(t, rep.By, ", 2 orders)")
	p.waitEnded(ids...)
	code, out, _ = p.ctl("", "status", "o-b3")
	require.Zero(t, code)
	require.Contains(t, out, "retried by "+rep.By)

	var resubmit operator.BulkReport
	p.json("bulk", &resubmit, "resubmit", "--id-prefix", "o-b", "--dry-run")
	require.Equal(t, []operator.BulkResult{{OrderID: "o-b1", Outcome: operator.BulkWould}, {OrderID: "o-b2", Outcome: operator.BulkWould}},
		sortedResults(resubmit.Orders), "the Failed ones, by default")
	code, out, _ = p.ctl("", "cancel", "--state", "processed", "--id-prefix", "o-b", "--dry-run")
	require.Zero(t, code)
	require.Contains(t, out, "cancel: 2 listed, 0 would cancel, 0 done already, 2 refused, 0 changed since listed, 0 left")
	require.Contains(t, out, "      2  it ended Processed\n")

	code, _, errs = p.ctl("", "retry")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "need exactly one ORDER id, or a query")
	code, _, errs = p.ctl("", "retry", "o-b1", "--state", "held")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "not both")
}

// sortedResults are results in order of their ids.
func sortedResults(rs []operator.BulkResult) []operator.BulkResult {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b operator.BulkResult) int { return strings.Compare(a.OrderID, b.OrderID) })
	return out
}

// redrive --dry-run lists the messages it would move and moves none; a
// paced redrive waits between two messages (counted, not timed), and
// stopped, leaves those not moved in the DLQ, visible at once. (Good
// orders set aside by hand: moved back, they are taken, never set aside
// again, so the DLQ holds exactly what the test put there.)
func TestARedriveIsListedFirstAndPaced(t *testing.T) {
	t.Parallel()
	p, op := withDeadOrders(t, "o-rd0", "o-rd1", "o-rd2")
	ctx := context.Background()
	// The DLQ's orders, once it shows want of them (depths are approximate,
	// a message may be delivered twice: distinct orders are counted).
	dlqOrders := func(want int, what string) map[string]bool {
		t.Helper()
		var got map[string]bool
		deadline := time.Now().Add(10 * time.Second)
		for len(got) != want {
			require.True(t, time.Now().Before(deadline), "%s: %d orders in the DLQ, not %d", what, len(got), want)
			c, err := op.DLQMessages(ctx, "orders", operator.DLQReadMax)
			require.NoError(t, err)
			got = orderIDs(c.Messages)
		}
		return got
	}
	dlqOrders(3, "sent")

	var dry operator.DLQRedriven
	p.json("dlqRedrive", &dry, "redrive", "--queue", "orders", "--dry-run")
	require.True(t, dry.DryRun)
	require.Zero(t, dry.Moved)
	require.Len(t, orderIDs(dry.Messages), 3)
	dlqOrders(3, "nothing moved")

	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	var waits []int
	res, err := op.RedrivePaced(stopCtx, "orders", 1000, operator.BulkOptions{Rate: 10,
		Sleep: func(ctx context.Context, d time.Duration) error {
			require.Equal(t, 100*time.Millisecond, d, "10 a second")
			if waits = append(waits, len(waits)+1); len(waits) == 2 {
				stop() // Ctrl-C after two messages
				return ctx.Err()
			}
			return nil
		}})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 2, res.Moved, "one message, a wait, one more, a wait: stopped")
	moved := orderIDs(res.Messages)
	left := dlqOrders(3-len(moved), "those not moved are visible in the DLQ again at once (not after five minutes)")
	for id := range moved {
		require.False(t, left[id])
		p.waitEnded(id) // moved back: taken
	}
}

// orderIDs are the orders messages name.
func orderIDs(msgs []operator.DLQMessage) map[string]bool {
	out := map[string]bool{}
	for _, m := range msgs {
		out[m.OrderID] = true
	}
	return out
}

// A redrive by a query moves the messages it keeps only: a dry run lists
// them and says how many others it left; the redrive of one order moves
// its message, and the others are visible in the DLQ again at once, not
// after five minutes.
func TestARedriveMovesTheMessagesItsQueryKeeps(t *testing.T) {
	t.Parallel()
	p, op := withDeadOrders(t, "o-q1", "o-q2", "o-x1")
	ctx := context.Background()
	inDLQ := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := op.DLQMessages(ctx, "orders", operator.DLQReadMax)
			require.NoError(t, err)
			got := orderIDs(c.Messages)
			if len(got) == len(want) {
				for _, id := range want {
					require.True(t, got[id], "%s is in the DLQ", id)
				}
				return
			}
			require.True(t, time.Now().Before(deadline), "%d orders in the DLQ, not %d", len(got), len(want))
		}
	}
	inDLQ("o-q1", "o-q2", "o-x1")

	var dry operator.DLQRedriven
	p.json("dlqRedrive", &dry, "redrive", "--queue", "orders", "--dry-run", "--id-prefix", "o-q")
	require.Equal(t, map[string]bool{"o-q1": true, "o-q2": true}, orderIDs(dry.Messages))
	require.Equal(t, 1, dry.Left)
	code, out, errs := p.ctl("", "redrive", "--queue", "orders", "--reason", "no such reason")
	require.Zero(t, code, errs)
	require.Contains(t, out, "moved 0 messages")
	require.Contains(t, out, "3 other messages left in")
	inDLQ("o-q1", "o-q2", "o-x1")

	var moved operator.Redriven
	p.json("redrive", &moved, "redrive", "--queue", "orders", "--order", "o-x1")
	require.Equal(t, 1, moved.Moved)
	require.Equal(t, 2, moved.Left)
	inDLQ("o-q1", "o-q2") // at once: the redrive made them visible again
	p.waitEnded("o-x1")
}

// withDeadOrders is a pipeline whose orders DLQ holds the orders ids, set
// aside by hand, and an operator of it.
func withDeadOrders(t *testing.T, ids ...string) (*pipeline, *operator.Operator) {
	t.Helper()
	p := newPipeline(t)
	op := operator.New(p.stack.Deployment.Clients, p.stack.Topology())
	ctx := context.Background()
	dlq, err := op.QueueURL(ctx, p.stack.Topology().OrdersQueue().DLQName)
	require.NoError(t, err)
	for _, id := range ids {
		_, err := p.stack.Deployment.Clients.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &dlq,
			MessageBody: aws.String(orderJSON(id))})
		require.NoError(t, err)
	}
	return p, op
}
