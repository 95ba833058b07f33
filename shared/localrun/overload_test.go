package localrun_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/localrun"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/remotesim"
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
			require.Zero(t, r.FailureCount, "%s %s: waiting is not failing: %q", id, r.Name, r.Events)
			require.NotEqual(t, workflow.Error, r.State, "%s %s", id, r.Name)
		}
	}
	require.Zero(t, b.e.stack.Tally.Sum(metrics.SupervisorRecoveries), "no attempt was failed")
	require.Zero(t, b.e.stack.Tally.Sum(metrics.StepErrors))
	b.e.requireEffectsOnce(b.ids)
}

// A burst that a Scheduler at its maximum concurrency takes minutes to work
// through (here: 20 messages a second, with a one-second pickup timeout) is
// a backlog, not a fault: every order is Processed, nothing is failed, and
// the Supervisor, seeing the queues backlogged, holds back instead of adding
// messages to them. The figures are logged (messages per order, queue wait).
func TestBurstOnAThrottledSchedulerFailsNothing(t *testing.T) {
	t.Parallel()
	base := runBurst(t, nil)
	slow := runBurst(t, func(o *localrun.Options) {
		o.Settings.StepTimeout = 5 * time.Second // replies wait in the response queues longer than this
		o.Throttle = map[string]time.Duration{"scheduler": 50 * time.Millisecond}
	})
	pickup := time.Second
	wait := time.Duration(slow.e.stack.Tally.Max(metrics.QueueWait)) * time.Millisecond
	sched := slow.e.stack.Topology().SchedulerQueue().Name
	baseSched := base.e.stack.Topology().SchedulerQueue().Name
	t.Logf("scheduler-queue messages per order: %.3f with the backlog, %.3f without; longest queue wait %s "+
		"(pickup timeout %s); waits held back %v, messages re-sent %v", slow.perOrder(sched), base.perOrder(baseSched),
		wait, pickup, slow.e.stack.Tally.Sum(metrics.WaitsHeld), slow.e.stack.Tally.Sum(metrics.MessagesResent))
	require.GreaterOrEqual(t, wait, 5*pickup, "the throttle made a backlog five pickup timeouts deep")
	slow.requireWaitedNotFailed(t)
	base.requireWaitedNotFailed(t)
	require.LessOrEqual(t, slow.perOrder(sched), 1.25*base.perOrder(baseSched),
		"the backlog did not multiply the scheduler queue's messages")
	require.Positive(t, slow.e.stack.Tally.Sum(metrics.WaitsHeld), "the Supervisor saw the backlog and held back")
	require.Positive(t, slow.events("its reply may be waiting"),
		"attempts past their CompleteBy whose replies sat in a backlogged response queue were not failed")
}

// events counts the records' history lines containing what.
func (b burst) events(what string) int {
	_, records, err := b.e.stack.Store.ScanAll(context.Background())
	require.NoError(b.e.t, err)
	n := 0
	for _, recs := range records {
		for _, r := range recs {
			for _, ev := range r.Events {
				if strings.Contains(ev, what) {
					n++
				}
			}
		}
	}
	return n
}

// The same with an Agent whose remote takes one request at a time: requests
// wait in the agent's queue far longer than the step timeout. The attempt's
// clock starts at the Agent's claim, so none of that wait counts against it.
func TestBurstOnAThrottledAgentFailsNothing(t *testing.T) {
	t.Parallel()
	base := runBurst(t, nil)
	slow := runBurst(t, func(o *localrun.Options) {
		o.Settings.StepTimeout = 3 * time.Second
		o.Throttle = map[string]time.Duration{"agent-" + workflow.PaymentAgent: 50 * time.Millisecond}
	})
	wait := time.Duration(slow.e.stack.Tally.Max(metrics.QueueWait)) * time.Millisecond
	req := slow.e.stack.Topology().AgentRequests(workflow.PaymentAgent).Name
	baseReq := base.e.stack.Topology().AgentRequests(workflow.PaymentAgent).Name
	t.Logf("payment-request messages per order: %.3f with the backlog, %.3f without; longest queue wait %s "+
		"(step timeout 3s); waits held back %v, messages re-sent %v", slow.perOrder(req), base.perOrder(baseReq), wait,
		slow.e.stack.Tally.Sum(metrics.WaitsHeld), slow.e.stack.Tally.Sum(metrics.MessagesResent))
	require.Greater(t, wait, 3*time.Second, "requests waited in the agent's queue longer than the step timeout")
	slow.requireWaitedNotFailed(t)
	require.LessOrEqual(t, slow.perOrder(req), 1.25*base.perOrder(baseReq),
		"the backlog did not multiply the agent queue's messages")
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
	e.sim.SetFaults(workflow.InventoryAgent, remotesim.Faults{StallFirst: 1})
	ids := e.orders(3)
	tasks := e.waitEnded(ids)
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State)
		st := e.step(id, 0)
		require.Equal(t, 1, st.FailureCount, "the hung attempt failed")
		require.Equal(t, 2, st.Attempt)
		claimed, recovered := eventTime(t, st.Events, "claimed by"), eventTime(t, st.Events, "recovered by the supervisor")
		late := recovered.Sub(claimed.Add(timeout))
		t.Logf("%s: recovered %s after its CompleteBy (supervisor every 200ms, pickup timeout 10m)", id, late)
		require.GreaterOrEqual(t, late, time.Duration(0))
		require.Less(t, late, 10*time.Second, "found at CompleteBy, not at the pickup deadline 10 minutes out")
	}
	e.requireEffectsOnce(ids)
}

// eventTime is the time of the first event of a record's history containing what.
func eventTime(t *testing.T, events []string, what string) time.Time {
	t.Helper()
	i := slices.IndexFunc(events, func(ev string) bool { return strings.Contains(ev, what) })
	require.GreaterOrEqual(t, i, 0, "no %q in %q", what, events)
	at, err := time.Parse(time.RFC3339Nano, strings.SplitN(events[i], " ", 2)[0])
	require.NoError(t, err)
	return at
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
		o.Settings.OrderDeadline = 6 * time.Second
		o.Stopped = []string{"agent-" + workflow.PaymentAgent}
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
		resends := 0
		for _, ev := range charge.Events {
			if strings.Contains(ev, "its message sent again") {
				resends++
			}
		}
		require.GreaterOrEqual(t, resends, 2, "looked at, and its message re-sent, more than once: %q", charge.Events)
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
