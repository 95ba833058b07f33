package localrun_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/workflow"
)

// maxRecoveryAfterCompleteBy is the promise: an attempt whose outcome was
// lost is recovered within this long after its CompleteBy, at any steady
// load the Scheduler can carry (on AWS, within one Supervisor period more).
const maxRecoveryAfterCompleteBy = 60 * time.Second

// steadyLoad is traffic that keeps the Scheduler near its capacity: orders
// at a steady rate, each order three replies for the Scheduler.
type steadyLoad struct {
	engine     string        // the state store's engine
	perMessage time.Duration // the Scheduler's pace: its capacity is one message per perMessage
	rate       float64       // orders a second
}

// utilisation is the share of the Scheduler's capacity the load asks for.
func (l steadyLoad) utilisation() float64 {
	return l.rate * 3 * l.perMessage.Seconds()
}

// One order's first attempt takes effect at the service and its outcome is
// lost (the service's answer never comes back, as when the Agent's process
// dies after the call), while steady fault-free traffic keeps the Scheduler at
// about 90% of its capacity with the deployment's one-second batching window,
// so the agents' response queues are never empty. The attempt is recovered
// soon after its CompleteBy: no reply of it can be waiting in a queue (its
// Agent records an outcome before it replies), so the Supervisor has nothing
// to wait for. The traffic goes on until the recovery (and a few seconds
// more), or until the bound has passed: a Supervisor that waited for the
// queues to calm down would wait past it. Every order ends Processed, each
// effect applied once. On both DynamoDB engines (moto's single-threaded
// server at half the pace).
func TestLostOutcomeIsRecoveredPromptlyUnderSteadyLoad(t *testing.T) {
	for _, l := range []steadyLoad{
		{engine: "DynamoDBLocal", perMessage: 50 * time.Millisecond, rate: 6},
		{engine: "moto", perMessage: 100 * time.Millisecond, rate: 3},
	} {
		t.Run(l.engine, func(t *testing.T) { lostOutcomeUnderLoad(t, l) })
	}
}

func lostOutcomeUnderLoad(t *testing.T, l steadyLoad) {
	const lost = "lost-outcome"
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		if l.engine == "moto" {
			o.DynamoDBEndpoint = motoEndpoint
		}
		o.BatchWindow = time.Second
		o.Settings.PickupTimeout = 5 * time.Second // longer than two batching windows
		o.Settings.StepTimeout = 8 * time.Second   // its calls are not what is measured: room for a starved CPU
		o.Settings.MaxFailures = 5
		o.Throttle = map[string]time.Duration{"scheduler": l.perMessage}
	})
	e.sim.SetFaults("inventory", remotesim.Faults{LostReplyOrders: []string{lost}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu     sync.Mutex
		ids    []string
		depths []int // visible replies in the lost order's agent's response queue, sampled
	)
	traffic, stop := make(chan struct{}), make(chan struct{})
	go func() { // steady orders, the one whose outcome is lost among them
		defer close(traffic)
		tick := time.NewTicker(time.Duration(float64(time.Second) / l.rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("steady-%04d", i)
			if i == int(l.rate*5) { // after five seconds of traffic
				id = lost
			}
			if err := e.stack.SendOrders(ctx, localrun.DemoOrder(id, i).JSON()); err == nil {
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
			<-tick.C
		}
	}()
	go func() {
		q := queue.NewSender(e.stack.Deployment.Clients.SQS)
		url := e.stack.QueueURL(e.stack.Topology().AgentResponses("inventory").Name)
		for ctx.Err() == nil {
			if d, err := q.Depth(ctx, url); err == nil {
				mu.Lock()
				depths = append(depths, d.Visible)
				mu.Unlock()
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()

	// Bounded by the promise (from the lost order's send), with room for a
	// loaded machine; an exceeded bound fails below, on the measured figure.
	// The first call's answer is lost once it has taken effect; the fault
	// is cleared then, before any recovery, so that the retry's answer
	// comes back (clearing it after the recovery raced the retry).
	e.eventually("the lost outcome's call applied", 2*maxRecoveryAfterCompleteBy, func() bool {
		for _, ef := range e.sim.Ledger() {
			if ef.OrderID == lost && ef.Service == "inventory" {
				return true
			}
		}
		return false
	})
	e.sim.SetFaults("inventory", remotesim.Faults{})
	e.eventually("the lost outcome's attempt recovered", 2*maxRecoveryAfterCompleteBy, func() bool {
		return recoveryOf(e, lost) >= 0
	})
	e.eventually("its retry done, in the traffic", maxRecoveryAfterCompleteBy, func() bool {
		return e.step(lost, 0).State == workflow.Processed
	})
	close(stop)
	<-traffic
	mu.Lock()
	sent := append([]string(nil), ids...)
	mu.Unlock()
	// The traffic drains (every order it sent ends) within a generous bound:
	// what this test measures is the lost outcome's recovery, above; on a
	// starved machine (moto, -race, the other packages) the drain of 128
	// orders has taken over 90 s.
	drain, drained := context.WithTimeout(context.Background(), 4*time.Minute)
	defer drained()
	tasks, err := e.stack.WaitEnded(drain, sent, 200*time.Millisecond, nil)
	require.NoError(t, err)

	overdue := recoveryOf(e, lost)
	mu.Lock()
	busy := 0
	for _, d := range depths {
		if d > 0 {
			busy++
		}
	}
	mu.Unlock()
	deliveries := e.stack.Stats.Deliveries()
	schedulerMsgs := deliveries[e.stack.Topology().SchedulerQueue().Name]
	for _, a := range e.stack.Topology().Agents {
		schedulerMsgs += deliveries[e.stack.Topology().AgentResponses(a).Name]
	}
	t.Logf("%s: %d orders at %.0f/s (the Scheduler asked for %.0f%% of its capacity, %d messages); the lost outcome's "+
		"attempt recovered %s after its CompleteBy; the response queue held replies in %d of %d samples",
		l.engine, len(sent), l.rate, 100*l.utilisation(), schedulerMsgs, overdue, busy, len(depths))

	require.Less(t, overdue, maxRecoveryAfterCompleteBy, "recovered soon after its CompleteBy, however busy the queues")
	for _, id := range sent {
		require.Equal(t, workflow.Processed, tasks[id].State, id)
	}
	st := e.step(lost, 0)
	require.Equal(t, 1, st.FailureCount, "the attempt whose outcome was lost, and no other")
	e.requireEffectsOnce(sent)
}

// recoveryOf is how long after its CompleteBy the Supervisor recovered the
// order's attempt (from its SupervisorRecoveries line), or -1 before it has.
func recoveryOf(e *env, orderID string) time.Duration {
	for _, l := range e.stack.Tally.Lines(metrics.SupervisorRecoveries) {
		if l["OrderID"] == orderID {
			return time.Duration(l["OverdueMs"].(float64)) * time.Millisecond
		}
	}
	return -1
}
