package capacity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/capacity"
	"github.com/sas-go/sas/shared/devkit/costbench"
	"github.com/sas-go/sas/shared/devkit/handlerbench"
	"github.com/sas-go/sas/shared/workflow"
)

// handlers are round figures: an instance takes 200 orders a second
// (Submission), 400 requests (an agent whose service answers at once), 500
// replies (the Scheduler), and looks at 250 orders a second (the Supervisor).
func handlers(latency time.Duration) capacity.Handlers {
	h := capacity.Handlers{Figures: map[string]handlerbench.Figures{
		"submission": {MsgsPerSecond: 200}, "agent": {MsgsPerSecond: 400},
		"scheduler": {MsgsPerSecond: 500}, "supervisor": {MsgsPerSecond: 250}},
		ServiceLatency: map[string]time.Duration{}}
	for _, a := range []string{"inventory", "payment", "shipping"} {
		h.ServiceLatency[a] = latency
	}
	return h
}

// order is the three-step order workflow's happy path: 8 write units on the
// state table, 2 on the orders table, 2 index writes.
func order(latency time.Duration) capacity.Model {
	return capacity.Model{Settings: capacity.Defaults(), Handlers: handlers(latency),
		Workload: capacity.Happy(workflow.Orders(workflow.Settings{}), 8)}
}

func byName(t *testing.T, rep capacity.Report, name string) capacity.Limit {
	t.Helper()
	for _, l := range rep.Limits {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no limit %q in %v", name, rep.Limits)
	return capacity.Limit{}
}

// At 100 orders a second, by hand: Submission 100/200 = 0.5 instances of
// 50, ceiling 50 x 200 = 10,000/s; each agent 0.25 of 20, ceiling 8,000/s;
// the Scheduler on each response queue 0.2 of 50, ceiling 25,000/s; the
// account 100 x (1/200 + 3/400 + 3/500) = 1.85 of 1,000; each index shard
// 100 x 2/4 = 50 write units of 1,000, ceiling 2,000/s; the state table
// 800 of 40,000 (ceiling 5,000/s) and, new, of 4,000 (500/s, transient).
// The index binds first, at 2,000 orders a second.
func TestAtARateEachLimitsUseAndTheFirstToBind(t *testing.T) {
	t.Parallel()
	rep, err := order(0).At(100)
	require.NoError(t, err)
	for _, c := range []struct {
		name              string
		use, max, ceiling float64
	}{
		{"submission concurrency, on the orders queue", 0.5, 50, 10000},
		{"agent-inventory concurrency, on the inventory requests queue", 0.25, 20, 8000},
		{"agent-shipping concurrency, on the shipping requests queue", 0.25, 20, 8000},
		{"scheduler concurrency, on the payment responses queue", 0.2, 50, 25000},
		{"SQS messages in flight, the busiest queue", 5, 120000, 2400000},
		{"Lambda concurrency, the account's", 1.85, 1000, 1000 / 0.0185},
		{"deadline index writes, each shard", 50, 1000, 2000},
		{"state table writes", 800, 40000, 5000},
		{"state table writes, a new on-demand table at once", 800, 4000, 500},
		{"orders table writes", 200, 40000, 20000},
	} {
		l := byName(t, rep, c.name)
		require.InDelta(t, c.use, l.Use, 1e-9, c.name)
		require.InDelta(t, c.max, l.Max, 1e-9, c.name)
		require.InDelta(t, c.ceiling, l.Ceiling, 1e-6, c.name)
		require.NotEmpty(t, l.Moves, c.name)
	}
	require.Zero(t, byName(t, rep, "Supervisor sweep time, each period").Use, "no looks on the happy path")
	require.True(t, byName(t, rep, "state table writes, a new on-demand table at once").Transient)
	require.Equal(t, "deadline index writes, each shard", rep.Binding.Name)
	require.InDelta(t, 2000, rep.Binding.Ceiling, 1e-9)
	require.InDelta(t, 0.05, byName(t, rep, "deadline index writes, each shard").Utilization(), 1e-12)
}

// A service's latency is in every invocation of its agent: at 100 ms an
// instance takes 10 / (10/400 + 0.1) = 80 requests a second, so an agent's
// 20 instances take 1,600 orders a second, below the index's 2,000. More
// shards move the index; more agent concurrency the agent.
func TestTheSettingsMoveTheBindingLimit(t *testing.T) {
	t.Parallel()
	m := order(100 * time.Millisecond)
	rep, err := m.At(100)
	require.NoError(t, err)
	require.Equal(t, "agent-inventory concurrency, on the inventory requests queue", rep.Binding.Name)
	require.InDelta(t, 1600, rep.Binding.Ceiling, 1e-9)

	m.Settings.AgentConcurrency = 200
	m.Settings.DeadlineShards = 40
	rep, err = m.At(100)
	require.NoError(t, err)
	require.Equal(t, "state table writes", rep.Binding.Name, "40,000 write units / 8 a order")
	require.InDelta(t, 5000, rep.Binding.Ceiling, 1e-9)
	require.InDelta(t, 20000, byName(t, rep, "deadline index writes, each shard").Ceiling, 1e-9)

	m.Settings.AgentConcurrencyOf = map[string]int{"payment": 5}
	rep, err = m.At(100)
	require.NoError(t, err)
	require.Equal(t, "agent-payment concurrency, on the payment requests queue", rep.Binding.Name, "one agent's own cap")
	require.InDelta(t, 400, rep.Binding.Ceiling, 1e-9)
}

// A burst under the drain rate backs nothing up; one over it leaves a
// backlog that drains at the bottleneck's ceiling. By hand, agents at 100
// ms (ceiling 1,600/s): 100,000 orders over 10 s arrive at 10,000/s, leave
// 84,000 waiting, drained 52.5 s later (62.5 s from the start); the last
// order waits 84,000 / 1,600 = 52.5 s in its agent's queue. Waits spread
// evenly up to 52.5 s, so 32.5/52.5 = 61.9% of the orders pass their first
// look at 20 s, and none their pickup timeout's at 60 s: at 1,600 orders a
// second, 990 looks a second take 238 s of each minute's sweep at 250
// looks a second, far past its 20 s budget.
func TestABurstsDrainTimeQueueWaitAndLooks(t *testing.T) {
	t.Parallel()
	m := order(100 * time.Millisecond)
	calm, err := m.Burst(100000, 100*time.Second, 0) // 1,000/s
	require.NoError(t, err)
	require.Zero(t, calm.Backlog)
	require.Equal(t, 100*time.Second, calm.DrainTime)
	require.Zero(t, calm.MaxWait)
	require.InDelta(t, 1000, calm.AtDrain.Rate, 1e-9)

	b, err := m.Burst(100000, 10*time.Second, 0)
	require.NoError(t, err)
	require.InDelta(t, 10000, b.Arrival, 1e-9)
	require.InDelta(t, 1600, b.Drain, 1e-9)
	require.Equal(t, "agent-inventory concurrency, on the inventory requests queue", b.Bottleneck)
	require.InDelta(t, 84000, b.Backlog, 1e-6)
	require.True(t, b.Drains)
	require.Equal(t, 62500*time.Millisecond, b.DrainTime)
	require.Equal(t, 52500*time.Millisecond, b.MaxWait)
	require.Equal(t, 26250*time.Millisecond, b.MeanWait)
	require.Equal(t, "QueueWaitAlarm", b.Alarm)
	require.False(t, b.Alarmed, "52.5 s is under the alarm's 5 minutes")
	require.InDelta(t, 0.619, b.LooksPerOrder, 1e-9)
	sweep := byName(t, b.AtDrain, "Supervisor sweep time, each period")
	require.InDelta(t, 0.619*60*1600/250, sweep.Use, 1e-6)
	require.Greater(t, sweep.Utilization(), 1.0, "the Supervisor falls behind")
	idx := byName(t, b.AtDrain, "deadline index writes, each shard")
	require.InDelta(t, 1600*(2+0.619)/4, idx.Use, 1e-6, "each look writes the index too")
}

// A backlog in the orders queue is not in the index yet: no look, and the
// orders queue's oldest-message alarm sees it. A steady rate above the
// drain rate never drains.
func TestABacklogBeforeSubmission(t *testing.T) {
	t.Parallel()
	m := order(0)
	m.Settings.SubmissionConcurrency = 2 // 400 orders a second
	b, err := m.Burst(600000, 10*time.Second, 100)
	require.NoError(t, err)
	require.Equal(t, "submission concurrency, on the orders queue", b.Bottleneck)
	require.InDelta(t, (60100-400)*10, b.Backlog, 1e-6)
	require.Equal(t, seconds(10+597000/300.0), b.DrainTime)
	require.Zero(t, b.LooksPerOrder)
	require.Equal(t, "the orders queue's oldest-message alarm", b.Alarm)
	require.True(t, b.Alarmed)

	never, err := m.Burst(1000, time.Second, 500)
	require.NoError(t, err)
	require.False(t, never.Drains)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// A bench run's write units are the workload's: two on the orders table and
// two index writes set apart; the flows follow the workflow's steps.
func TestAWorkloadFromABenchRun(t *testing.T) {
	t.Parallel()
	w, err := capacity.FromBench(workflow.Single(workflow.Settings{}), costbench.Run{Workflow: "single",
		PerOrder: costbench.PerOrder{WriteUnits: 8}})
	require.NoError(t, err)
	require.Equal(t, 4.0, w.StateWrites)
	require.Equal(t, []capacity.Flow{{Queue: "orders", Consumer: capacity.Submission, PerOrder: 1},
		{Queue: "payment requests", Consumer: capacity.Agent("payment"), PerOrder: 1},
		{Queue: "payment responses", Consumer: capacity.Scheduler, PerOrder: 1}}, w.Flows)
	_, err = capacity.FromBench(workflow.Single(workflow.Settings{}), costbench.Run{Workflow: "order"})
	require.Error(t, err)
}

// Settings out of AWS's ranges are refused with their name.
func TestSettingsOutOfRange(t *testing.T) {
	t.Parallel()
	s := capacity.Defaults()
	require.NoError(t, s.Validate())
	s.AgentConcurrency = 1
	require.ErrorContains(t, s.Validate(), "agent concurrency")
	s = capacity.Defaults()
	s.AgentConcurrencyOf = map[string]int{"payment": 1001}
	require.ErrorContains(t, s.Validate(), "payment")
	_, err := capacity.Model{Settings: capacity.Defaults(), Handlers: capacity.Handlers{},
		Workload: capacity.Happy(workflow.Single(workflow.Settings{}), 4)}.At(1)
	require.ErrorContains(t, err, "no throughput measured")
}
