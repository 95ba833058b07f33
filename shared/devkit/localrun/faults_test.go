package localrun_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/devkit/runner"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/workflow"
)

func TestTransientRemoteErrorsAbsorbedByAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{TransientRate: 0.3}, func(o *localrun.Options) {
		o.Settings.StepTimeout = 15 * time.Second // room for the agent's retries on a loaded machine
	})
	ids := e.orders(20)
	tasks := e.waitEnded(ids)
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State)
		for i := range forward {
			require.Zero(t, e.step(id, i).FailureCount, "the agent, not the supervisor, absorbed the errors")
		}
	}
	require.Positive(t, e.sim.Stats().Transient)
	e.stop() // every invocation ended: its metrics are written
	// Every transient error was retried; AgentRetries also counts the waits
	// while the circuit breaker is open (five failures in a row open it, which
	// a 30% error rate does now and then).
	require.GreaterOrEqual(t, e.stack.Tally.Sum(metrics.AgentRetries), float64(e.sim.Stats().Transient), "a retry per transient error")
	require.Zero(t, e.stack.Tally.Sum(metrics.SupervisorRecoveries))
	e.requireEffectsOnce(ids)
}

// A request that meets its Agent's circuit breaker open waits before its
// claim (an attempt that meets it after its claim, before any request went,
// is given back), no failure counted, and comes back when the breaker may
// let a call through. It waited out the breaker before: its
// time ran out without a call, a failure was counted, and in a 10,000-order
// chaos run steps failed for good (and their undos, CompensationFailed)
// with their service never called.
func TestAnAttemptHeldByAnOpenBreakerIsGivenBackNotFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, nil)
	e.sim.SetFaults("inventory", remotesim.Faults{TransientRate: 1}) // every call a 503: five in a row open the breaker
	first := localrun.DemoOrder("o-brk-first", 0)
	require.NoError(t, e.stack.SendOrders(context.Background(), first.JSON()))
	e.eventually("the breaker opened", 30*time.Second, func() bool { return e.sim.Stats().Transient >= 5 })
	calls := e.sim.Stats().Calls
	second := localrun.DemoOrder("o-brk-second", 1)
	require.NoError(t, e.stack.SendOrders(context.Background(), second.JSON()))
	e.eventually("the second order's request held back", 30*time.Second, func() bool {
		return slices.ContainsFunc(e.stack.Tally.Lines(metrics.FlowWaits), func(l map[string]any) bool {
			return l["OrderID"] == second.OrderID
		})
	})
	e.sim.SetFaults("inventory", remotesim.Faults{}) // the service is back before the request comes back
	st := e.step(second.OrderID, 0)
	require.Zero(t, st.Attempt, "held before its claim: no attempt")
	require.Zero(t, st.FailureCount, "no call went: no failure")
	tasks := e.waitEnded([]string{first.OrderID, second.OrderID})
	require.Equal(t, workflow.Processed, tasks[second.OrderID].State)
	require.Zero(t, e.step(second.OrderID, 0).FailureCount, "its one call, once the service was back, succeeded")
	require.Equal(t, workflow.Processed, tasks[first.OrderID].State, "the first order's failures (its calls) under the threshold")
	require.Greater(t, e.sim.Stats().Calls, calls)
	e.requireEffectsOnce([]string{first.OrderID, second.OrderID})
}

func TestAgentNeverRepliesSupervisorRetries(t *testing.T) {
	t.Parallel()
	// Every reservation's first call hangs: the agent gives up at CompleteBy
	// and sends nothing; the supervisor must notice and retry.
	e := newEnv(t, remotesim.Faults{}, nil)
	e.sim.SetFaults("inventory", remotesim.Faults{StallFirst: 1})
	ids := e.orders(5)
	tasks := e.waitEnded(ids)
	failures := 0
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State)
		st := e.step(id, 0)
		// At least the stalled first attempt failed; the stalls may also
		// open the agent's circuit breaker long enough to expire a second.
		require.GreaterOrEqual(t, st.FailureCount, 1)
		require.GreaterOrEqual(t, st.Attempt, 2)
		require.LessOrEqual(t, st.Attempt, st.FailureCount+1+st.FlowWaits, "no attempt without a recovery or a give-back")
		failures += st.FailureCount
	}
	require.EqualValues(t, failures, e.stack.Tally.Sum(metrics.SupervisorRecoveries))
	require.GreaterOrEqual(t, e.stack.Tally.Sum(metrics.AgentDeadlineExpired), 5.0)
	e.requireEffectsOnce(ids)
}

func TestLateReplyOfOldAttemptIgnored(t *testing.T) {
	t.Parallel()
	// The first two calls hang, so attempt 2 is in flight when attempt 1's
	// late replies (a success and a failure) arrive.
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) { o.Settings.MaxFailures = 5 })
	e.sim.SetFaults("inventory", remotesim.Faults{StallFirst: 2})
	ids := e.orders(1)
	id := ids[0]
	e.eventually("attempt 2 in flight", 30*time.Second, func() bool {
		_, steps, err := e.stack.Store.Load(context.Background(), id)
		return err == nil && steps[0].Attempt == 2 && steps[0].State == workflow.Processing
	})
	send := queue.NewSender(e.stack.Deployment.Clients.SQS)
	replies := e.stack.QueueURL(e.stack.Topology().AgentResponses("inventory").Name)
	ctx := context.Background()
	late := message.AgentReply{Kind: message.KindReply, OrderID: id, Step: 0, StepName: "reserve-inventory", Attempt: 1}
	ok, failed := late, late
	ok.OK = true
	failed.Error = "late permanent failure"
	require.NoError(t, send.SendJSON(ctx, replies, ok, 0))
	require.NoError(t, send.SendJSON(ctx, replies, failed, 0))
	e.eventually("both late replies fenced off", 30*time.Second, func() bool {
		return e.stack.Tally.Sum(metrics.StaleReplies) >= 2
	})
	tasks := e.waitEnded(ids)
	require.Equal(t, workflow.Processed, tasks[id].State, "the late failure did not fail the order")
	st := e.step(id, 0)
	require.Equal(t, 3, st.Attempt, "completed by its own third attempt")
	require.Zero(t, e.stack.Tally.Sum(metrics.StepErrors))
	e.requireEffectsOnce(ids)
}

func TestEveryMessageDeliveredTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		o.Faults = func(string, types.Message) runner.Action { return runner.Duplicate }
	})
	ids := e.orders(15)
	tasks := e.waitEnded(ids)
	attempts := 0
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State)
		for i := range forward {
			st := e.step(id, i)
			attempts += st.Attempt
			// Only a supervisor recovery (a slow machine can cause one) may
			// add an attempt; a duplicate message never does.
			require.LessOrEqual(t, st.Attempt, st.FailureCount+1, "a duplicate schedule message never claims again")
		}
	}
	e.requireEffectsOnce(ids)
	e.stop() // every invocation ended: its metrics are written
	require.EqualValues(t, 15, e.stack.Tally.Sum(metrics.OrdersAccepted))
	require.EqualValues(t, attempts, e.stack.Tally.Sum(metrics.StepsClaimed), "one claim per attempt")
	require.EqualValues(t, 15, e.stack.Tally.Sum(metrics.OrdersProcessed))
	stats := e.stack.Stats.Snapshot()
	for _, fn := range []string{"submission", "scheduler", "agent-inventory", "agent-payment", "agent-shipping"} {
		require.Positive(t, stats[fn].FaultsInjected["duplicated"], fn)
	}
}

func TestThresholdReachedErrorMetricAndAlert(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) { o.Settings.MaxFailures = 2 })
	e.sim.SetFaults("inventory"+"/reserve-inventory", remotesim.Faults{StallOrders: []string{"order-000"}})
	ids := e.orders(3)
	tasks := e.waitEnded(ids)
	require.Equal(t, workflow.Failed, tasks["order-000"].State)
	require.Equal(t, workflow.Processed, tasks["order-001"].State)
	st := e.step("order-000", 0)
	require.Equal(t, workflow.Error, st.State)
	require.Equal(t, 2, st.FailureCount, "FailureCount stops at the threshold")
	require.Contains(t, st.LastError, "failure threshold 2 reached")
	e.eventually("the alert is recorded as sent", 10*time.Second, func() bool { return e.step("order-000", 0).Alerted })

	lines := e.stack.Tally.Lines(metrics.StepErrors)
	require.Len(t, lines, 1)
	require.Equal(t, "order-000", lines[0]["OrderID"])
	alerts := e.alerts(1)
	require.Equal(t, "order-000", alerts[0].OrderID)
	require.Equal(t, "reserve-inventory", alerts[0].StepName)
	require.Equal(t, "supervisor", alerts[0].DetectedBy)
	require.Contains(t, alerts[0].LastError, "threshold")
	require.Contains(t, alerts[0].Compensation, "started", "a timed-out step may have taken effect")
	e.requireEffectsOnce([]string{"order-001", "order-002"})
	// The reservation's outcome is unknown, so it is released (idempotently:
	// a release of nothing is a no-op for the remote).
	e.requireLedger("order-000", "release-inventory")
}

func TestPermanentFaultRepliedAsError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, nil)
	e.sim.SetFaults("inventory", remotesim.Faults{PermanentOrders: []string{"order-001"}})
	ids := e.orders(3)
	tasks := e.waitEnded(ids)
	require.Equal(t, workflow.Failed, tasks["order-001"].State)
	st := e.step("order-001", 0)
	require.Equal(t, 1, st.Attempt, "not retried")
	require.Zero(t, st.FailureCount)
	require.Contains(t, st.LastError, "HTTP 422")
	alerts := e.alerts(1)
	require.Equal(t, "order-001", alerts[0].OrderID)
	require.Equal(t, "scheduler", alerts[0].DetectedBy)
	require.EqualValues(t, 1, e.stack.Tally.Sum(metrics.StepErrors))
	e.requireEffectsOnce([]string{"order-000", "order-002"})
	e.requireLedger("order-001")
}

// alerts waits for n failure events in the alert inbox and checks no more come.
func (e *env) alerts(n int) []alert.Failure {
	e.t.Helper()
	var got []alert.Failure
	e.eventually("alerts in the inbox", 20*time.Second, func() bool {
		a, err := e.stack.Alerts(context.Background())
		require.NoError(e.t, err)
		got = append(got, a...)
		return len(got) >= n
	})
	require.Len(e.t, got, n)
	return got
}

func TestDuplicateOrderID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, patient)
	body := localrun.DemoOrder("order-dup", 1).JSON()
	ctx := context.Background()
	require.NoError(t, e.stack.SendOrders(ctx, body, body))
	e.waitEnded([]string{"order-dup"})
	require.NoError(t, e.stack.SendOrders(ctx, body)) // again after it ended
	e.eventually("three submissions handled", 20*time.Second, func() bool {
		return e.stack.Tally.Sum(metrics.OrdersAccepted)+e.stack.Tally.Sum(metrics.DuplicateOrders) == 3
	})
	require.EqualValues(t, 1, e.stack.Tally.Sum(metrics.OrdersAccepted))
	require.EqualValues(t, 2, e.stack.Tally.Sum(metrics.DuplicateOrders))
	tasks := e.waitEnded([]string{"order-dup"})
	require.Equal(t, workflow.Processed, tasks["order-dup"].State)
	require.Equal(t, 1, e.step("order-dup", 0).Attempt)
	e.requireEffectsOnce([]string{"order-dup"})
	dlq, err := e.stack.Peek(ctx, e.stack.QueueURL(e.stack.Topology().OrdersQueue().DLQName))
	require.NoError(t, err)
	require.Empty(t, dlq, "a duplicate is a success, not a rejection")
}

func TestMalformedOrdersRejectedGoodOnesProceed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, nil)
	bad := []struct{ body, reason string }{
		{`{"orderId": "bad-json",`, "bad JSON"},
		{`{"orderId":"bad-missing","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`, "customerId"},
		{`{"orderId":"bad-type","customerId":"c","items":[{"sku":"A","quantity":"two","unitPriceCents":1}]}`, "items[0].quantity: got string, want integer"},
		{`{"orderId":"bad-unknown","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":1}],"x":1}`, "additional properties 'x' not allowed"},
		{e.pointer(tooLarge("bad-big")), "over the 16777216-byte limit"}, // by SQS Extended Client pointer: over SQS's 256 KB
	}
	var good, bodies []string
	reasons := map[string]string{}
	for i, b := range bad { // good and bad interleaved, so they share batches
		id := "good-" + string(rune('a'+i))
		good = append(good, id)
		bodies = append(bodies, localrun.DemoOrder(id, i).JSON(), b.body)
		reasons[b.body] = b.reason
	}
	ctx := context.Background()
	require.NoError(t, e.stack.SendOrders(ctx, bodies...))
	tasks := e.waitEnded(good)
	for _, id := range good {
		require.Equal(t, workflow.Processed, tasks[id].State)
	}
	dlqURL := e.stack.QueueURL(e.stack.Topology().OrdersQueue().DLQName)
	// SQS delivers at least once (moto, like SQS, can hand one message to two
	// pollers), so a bad order may be rejected twice: count distinct bodies.
	rejected := map[string]string{}
	e.eventually("every rejected order in the DLQ", e.rejectionWait(), func() bool {
		m, err := e.stack.Peek(ctx, dlqURL)
		require.NoError(t, err)
		for _, msg := range m {
			rejected[aws.ToString(msg.Body)] = aws.ToString(msg.MessageAttributes["RejectReason"].StringValue)
		}
		return len(rejected) >= len(bad)
	})
	require.Len(t, rejected, len(bad))
	for body, reason := range rejected {
		want, ok := reasons[body]
		require.True(t, ok, "the DLQ holds the bad bodies as sent, and only them")
		require.Contains(t, reason, want)
	}
	require.GreaterOrEqual(t, e.stack.Tally.Sum(metrics.MalformedMessages), float64(len(bad)))
	require.Contains(t, e.logs.Tail(1<<20), "message rejected to the DLQ")
	got, err := e.stack.Store.Tasks(ctx, []string{"bad-missing", "bad-type", "bad-unknown"})
	require.NoError(t, err)
	require.Empty(t, got, "no task for a rejected order")
}

// The first step's request, which Submission sends after its transaction, is
// lost for every order (as when SQS moves a request that kept failing to the
// DLQ): the Supervisor finds the step ready and unclaimed at its pickup
// deadline, with no backlog to explain it, and sends its message again.
func TestLostFirstRequestSupervisorRepairs(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	dropped := map[string]string{} // by order: its first request's MessageId
	// An order SQS delivers twice is submitted twice, and the second
	// submission sends its first request again (as it must): that order's
	// request is not lost, and needs no repair.
	orderSeen, twice := map[string]bool{}, map[string]bool{}
	agent := "agent-" + "inventory"
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		// Room for the re-sent message to be claimed in time on a loaded machine.
		o.Settings.PickupTimeout = 5 * time.Second
		o.Faults = func(fn string, m types.Message) runner.Action {
			if fn == "submission" {
				var ord struct {
					OrderID string `json:"orderId"`
				}
				if json.Unmarshal([]byte(aws.ToString(m.Body)), &ord) == nil {
					mu.Lock()
					twice[ord.OrderID] = twice[ord.OrderID] || orderSeen[aws.ToString(m.MessageId)]
					orderSeen[aws.ToString(m.MessageId)] = true
					mu.Unlock()
				}
				return runner.Deliver
			}
			var r message.AgentRequest
			if fn != agent || json.Unmarshal([]byte(aws.ToString(m.Body)), &r) != nil || r.Step != 0 || r.Undo {
				return runner.Deliver
			}
			mu.Lock()
			defer mu.Unlock()
			id, seen := dropped[r.OrderID]
			switch {
			case !seen:
				dropped[r.OrderID] = aws.ToString(m.MessageId)
				return runner.Drop
			case id == aws.ToString(m.MessageId):
				return runner.Drop // SQS delivered the lost message twice: lost again
			}
			return runner.Deliver
		}
	})
	ids := e.orders(5)
	tasks := e.waitEnded(ids)
	repaired := 0
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State)
		st := e.step(id, 0)
		require.Zero(t, st.FailureCount, "a lost message is repaired, not counted as a failure")
		require.Empty(t, st.LastError)
		mu.Lock()
		delivered := twice[id]
		mu.Unlock()
		if !delivered {
			require.Positive(t, st.Resent, "its message was sent again")
			repaired++
		}
	}
	require.Positive(t, repaired, "SQS delivered every order twice: no request was lost")
	require.GreaterOrEqual(t, e.stack.Stats.Snapshot()[agent].FaultsInjected["dropped"], 5)
	require.GreaterOrEqual(t, e.stack.Tally.Sum(metrics.MessagesResent), float64(repaired))
	require.Zero(t, e.stack.Tally.Sum(metrics.SupervisorRecoveries), "no attempt failed")
	e.requireEffectsOnce(ids)
}
