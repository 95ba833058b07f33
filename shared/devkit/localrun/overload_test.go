package localrun_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/devkit/sqsmem"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/workflow"
)

// burstOrders is the size of the fault-free bursts below: enough that a
// throttled function's queue holds a backlog many times the pickup timeout.
const burstOrders = 150

// burst is a fault-free burst of orders through one environment.
type burst struct {
	e          *env
	ids        []string
	deliveries map[string]int // by queue name
}

// runBurst sends burstOrders orders at once, with a pickup timeout of one
// second, and waits (bounded) for every order to end.
func runBurst(t *testing.T, tweak func(*localrun.Options)) burst {
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		o.Settings.PickupTimeout = time.Second
		patient(o)
		if tweak != nil {
			tweak(o)
		}
	})
	ids := e.orders(burstOrders)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, err := e.stack.WaitEnded(ctx, ids, 250*time.Millisecond, nil)
	require.NoError(t, err)
	e.stop() // every invocation ended: its metrics are written
	return burst{e: e, ids: ids, deliveries: e.stack.Stats.Deliveries()}
}

// perOrder is the queue's deliveries per order.
func (b burst) perOrder(queue string) float64 {
	return float64(b.deliveries[queue]) / float64(len(b.ids))
}

// requireWaitedNotFailed asserts every order was Processed, with no record
// in Error and no failure counted, its effects applied once each.
func (b burst) requireWaitedNotFailed(t *testing.T) {
	t.Helper()
	tasks, records, err := b.e.stack.Store.ScanAll(context.Background())
	require.NoError(t, err)
	for _, id := range b.ids {
		require.Equal(t, workflow.Processed, tasks[id].State, id)
		for _, r := range records[id] {
			require.Zero(t, r.FailureCount, "%s %s: waiting is not failing: %+v", id, r.Name, r.Incidents)
			require.NotEqual(t, workflow.Error, r.State, "%s %s", id, r.Name)
		}
	}
	require.Zero(t, b.e.stack.Tally.Sum(metrics.SupervisorRecoveries), "no attempt was failed")
	require.Zero(t, b.e.stack.Tally.Sum(metrics.StepErrors))
	b.e.requireEffectsOnce(b.ids)
}

// A burst that a Scheduler at its maximum concurrency takes half a minute to
// work through (here: 20 messages a second, with a one-second pickup timeout)
// is a backlog, not a fault: the Agents' replies wait in the response queues
// many pickup timeouts, past their attempts' CompleteBy; every order is
// Processed, nothing is failed, and the Supervisor, seeing the queues
// backlogged, holds back instead of adding messages to them. The figures are
// logged (messages per order, the waits).
func TestBurstOnAThrottledSchedulerFailsNothing(t *testing.T) {
	t.Parallel()
	base := runBurst(t, nil)
	slow := runBurst(t, func(o *localrun.Options) {
		o.Settings.StepTimeout = 5 * time.Second // replies wait in the response queues longer than this
		o.Throttle = map[string]time.Duration{"scheduler": 50 * time.Millisecond}
	})
	pickup := time.Second
	wait := time.Duration(slow.e.stack.Tally.Max(metrics.ReplyWait)) * time.Millisecond
	t.Logf("messages per order on the work queues: %.3f with the backlog, %.3f without; longest reply wait %s "+
		"(pickup timeout %s, step timeout 5s); waits held back %v, messages re-sent %v", slow.workMessages(), base.workMessages(),
		wait, pickup, slow.e.stack.Tally.Sum(metrics.WaitsHeld), slow.e.stack.Tally.Sum(metrics.MessagesResent))
	require.GreaterOrEqual(t, wait, 5*pickup, "the throttle made a backlog five pickup timeouts deep")
	slow.requireWaitedNotFailed(t)
	base.requireWaitedNotFailed(t)
	require.LessOrEqual(t, slow.workMessages(), 1.25*base.workMessages(), "the backlog did not multiply the messages")
	require.Positive(t, slow.e.stack.Tally.Sum(metrics.WaitsHeld), "the Supervisor saw the backlog and held back")
}

// workMessages are the messages delivered per order from the queues a
// step's work goes through (every queue but the orders queue): what a
// Supervisor re-sending into a backlog would multiply.
func (b burst) workMessages() float64 {
	orders := b.e.stack.Topology().OrdersQueue().Name
	n := 0
	for q, d := range b.deliveries {
		if q != orders {
			n += d
		}
	}
	return float64(n) / float64(len(b.ids))
}

// The same with an Agent whose remote takes one request at a time: requests
// wait in the agent's queue far longer than the step timeout. The attempt's
// clock starts at the Agent's claim, so none of that wait counts against it.
func TestBurstOnAThrottledAgentFailsNothing(t *testing.T) {
	t.Parallel()
	base := runBurst(t, nil)
	// The throttle makes the queue wait (about 20 s for the burst, whatever
	// the machine's speed); the step timeout leaves a starved machine's
	// call room (a CI run under a load of 16 saw a call pass 3 s).
	const stepTimeout = 8 * time.Second
	slow := runBurst(t, func(o *localrun.Options) {
		o.Settings.StepTimeout = stepTimeout
		o.Throttle = map[string]time.Duration{"agent-" + "payment": 100 * time.Millisecond}
	})
	wait := time.Duration(slow.e.stack.Tally.Max(metrics.QueueWait)) * time.Millisecond
	req := slow.e.stack.Topology().AgentRequests("payment").Name
	baseReq := base.e.stack.Topology().AgentRequests("payment").Name
	t.Logf("payment-request messages per order: %.3f with the backlog, %.3f without; longest queue wait %s "+
		"(step timeout %s); waits held back %v, messages re-sent %v", slow.perOrder(req), base.perOrder(baseReq), wait,
		stepTimeout, slow.e.stack.Tally.Sum(metrics.WaitsHeld), slow.e.stack.Tally.Sum(metrics.MessagesResent))
	require.Greater(t, wait, stepTimeout, "requests waited in the agent's queue longer than the step timeout")
	slow.requireWaitedNotFailed(t)
	require.LessOrEqual(t, slow.perOrder(req), 1.25*base.perOrder(baseReq),
		"the backlog did not multiply the agent queue's messages")
}

// An attempt's reply that waits in a backlogged response queue past the
// attempt's CompleteBy is no failure: the Agent recorded the outcome before
// it replied, so the step is done at once, and the next step, made ready in
// the same write, waits for the reply that starts it. The Supervisor, finding
// that step unclaimed past its pickup deadline, sees the response queue that
// carries its start backlogged and holds back rather than re-send. The
// backlog is a hundred stale replies that land ahead of the reply (sent once
// the step is claimed, while its remote call takes half a second), on a
// Scheduler that takes ten messages a second: more than the in-process
// queues reorder among (sqsmem.DefaultReorderWindow), so that the reply
// waits behind a part of them however they are reordered.
func TestAReplyWaitingBehindABacklogIsNotAFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		o.Settings.StepTimeout = 2 * time.Second
		o.Settings.PickupTimeout = 500 * time.Millisecond
		o.Throttle = map[string]time.Duration{"scheduler": 100 * time.Millisecond}
	})
	e.sim.SetFaults("inventory", remotesim.Faults{Latency: 500 * time.Millisecond})
	ids := e.orders(1)
	e.eventually("the first step claimed", 30*time.Second, func() bool {
		_, recs, err := e.stack.Store.Load(context.Background(), ids[0])
		return err == nil && recs[0].Attempt == 1
	})
	var junk []string
	for i := range sqsmem.DefaultReorderWindow + 36 {
		junk = append(junk, fmt.Sprintf(`{"kind":"reply","orderId":"gone-%d","step":0,"stepName":"reserve-inventory","attempt":1,"ok":true}`, i))
	}
	e.send(e.stack.Topology().AgentResponses("inventory").Name, junk...)
	tasks := e.waitEnded(ids)
	require.Equal(t, workflow.Processed, tasks[ids[0]].State)
	first, second := e.step(ids[0], 0), e.step(ids[0], 1)
	require.Zero(t, first.FailureCount, "the attempt's reply waited: no failure")
	require.Equal(t, 1, first.Attempt)
	require.Less(t, first.DoneAt.Sub(first.ClaimedAt), 2*time.Second, "recorded by its Agent before its CompleteBy")
	require.Equal(t, 1, second.Attempt, "one attempt: a re-sent start costs only a refused claim")
	require.Zero(t, second.FailureCount, "its wait is queue wait, never a failure")
	// While the backlog is deep it is held; once it drains below the
	// backlog depth (the reply may then be among the last few), a look may
	// re-send its start once.
	require.LessOrEqual(t, second.Resent, 1, "not re-sent into the backlog")
	wait := second.ClaimedAt.Sub(second.ReadyAt)
	require.Greater(t, wait, 2*time.Second, "its start waited behind the backlog, past the pickup timeout")
	held := 0
	for _, l := range e.stack.Tally.Lines(metrics.WaitsHeld) {
		if l["OrderID"] == ids[0] {
			require.Equal(t, string(workflow.Pending), l["State"], "only a ready step is held for a backlog")
			held++
		}
	}
	require.Positive(t, held, "held while the response queue that carries its start was backlogged")
	require.Zero(t, e.stack.Tally.Sum(metrics.SupervisorRecoveries))
	t.Logf("the second step waited %s for its start (pickup timeout 500ms), held back %d times", wait, held)
}

// An attempt that hangs is recovered at its CompleteBy plus a supervisor
// period, however long the pickup timeout: the claim's CompleteBy is the
// attempt's clock, not the pickup deadline.
func TestHungAttemptIsRecoveredAtItsCompleteBy(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		o.Settings.PickupTimeout = 10 * time.Minute
		o.Settings.StepTimeout = timeout
	})
	e.sim.SetFaults("inventory", remotesim.Faults{StallFirst: 1})
	ids := e.orders(3)
	tasks := e.waitEnded(ids)
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State)
		st := e.step(id, 0)
		require.GreaterOrEqual(t, st.FailureCount, 1, "the hung attempt failed")
		require.GreaterOrEqual(t, st.Attempt, 2)
	}
	// Each hung attempt's recovery (a starved machine may time out another
	// 2 s call too: it is recovered the same way, and not what is measured).
	var lines []map[string]any
	for _, l := range e.stack.Tally.Lines(metrics.SupervisorRecoveries) {
		if l["Step"] == "reserve-inventory" && l["FailureCount"] == float64(1) {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, len(ids), "one recovery of each hung attempt")
	for _, l := range lines {
		late := time.Duration(l["OverdueMs"].(float64)) * time.Millisecond
		t.Logf("%s: recovered %s after its CompleteBy (supervisor every 200ms, pickup timeout 10m)", l["OrderID"], late)
		require.GreaterOrEqual(t, late, time.Duration(0))
		require.Less(t, late, 10*time.Second, "found at CompleteBy, not at the pickup deadline 10 minutes out")
	}
	e.requireEffectsOnce(ids)
}

// The order's deadline is the one clock that fails an order with no fault
// seen: with the payment Agent stopped, the charge can never be claimed; the
// Supervisor re-sends it at growing intervals and never counts a failure, and
// at the deadline the order fails for good: Error, an alert that says why,
// and the reserved inventory released.
func TestOrderDeadlineFailsAnOrderThatCanNeverBeClaimed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		o.Settings.PickupTimeout = 500 * time.Millisecond
		// Room for two looks after a first step that takes seconds, and
		// sweeps that take seconds, on a loaded machine.
		o.Settings.OrderDeadline = 12 * time.Second
		o.Stopped = []string{"agent-" + "payment"}
	})
	ids := e.orders(3)
	tasks := e.waitEnded(ids)
	for _, id := range ids {
		require.Equal(t, workflow.Failed, tasks[id].State, "its work undone")
		charge := e.step(id, 1)
		require.Equal(t, workflow.Error, charge.State)
		require.Equal(t, workflow.Expired, charge.Cause)
		require.Zero(t, charge.FailureCount, "no failure was ever seen")
		require.Zero(t, charge.Attempt, "never claimed")
		require.Contains(t, charge.LastError, "order deadline")
		require.GreaterOrEqual(t, charge.Resent, 2, "looked at, and its message re-sent, more than once")
		require.True(t, charge.Alerted)
		e.requireLedger(id, "reserve-inventory", "release-inventory")
	}
	alerts := e.alerts(len(ids))
	for _, a := range alerts {
		require.Equal(t, "charge-payment", a.StepName)
		require.Contains(t, a.LastError, "order deadline")
	}
	require.EqualValues(t, len(ids), e.stack.Tally.Sum(metrics.DeadlinesPassed))
	require.Zero(t, e.stack.Tally.Sum(metrics.SupervisorRecoveries))
	resent := e.stack.Tally.Sum(metrics.MessagesResent)
	require.Less(t, resent, float64(len(ids)*6), fmt.Sprintf("re-sends back off: %v in 6s at a 500ms pickup", resent))
}
