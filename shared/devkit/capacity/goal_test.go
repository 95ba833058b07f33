package capacity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/capacity"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// measured is the three-step order workflow as docs/cost.md measured it
// (12 write units an order: 8 on the state table) and its handlers as
// docs/cost.md's handler benchmarks measured them, in a deployment of s.
func measured(t *testing.T, s deployment.Settings) capacity.Model {
	t.Helper()
	set, err := workflow.NewSet(workflow.MustExample(workflow.OrderWorkflow))
	require.NoError(t, err)
	return capacity.Model{Settings: capacity.FromDeployment(s, set), Handlers: capacity.Measured(),
		Workload: capacity.Happy(set.Default(), 8)}
}

// documented are docs/capacity.md's settings for 10,000 orders a second.
func documented() deployment.Settings {
	s := deployment.DefaultSettings()
	s.TargetRate, s.Topology.DeadlineShards = 12000, topology.ShardsFor(12000)
	s.SubmissionConcurrency, s.AgentConcurrency = 200, 150
	return s
}

// The goal on paper (docs/capacity.md): the defaults take 1,000 orders a
// second of the three-step workflow with no limit past half its maximum
// (a new table's instant capacity apart: it lifts by itself); the
// documented settings, with the table quota raised, take 10,000 the same
// way, and a burst of 100,000 orders at once drains with no limit past its
// maximum: no write is throttled, so no order fails.
func TestTheGoalOnPaper(t *testing.T) {
	t.Parallel()
	under := func(rep capacity.Report, most float64) {
		t.Helper()
		for _, l := range rep.Limits {
			if !l.Transient {
				require.LessOrEqual(t, l.Utilization(), most, "%s at %g orders a second", l.Name, rep.Rate)
			}
		}
	}
	rep, err := measured(t, deployment.DefaultSettings()).At(1000)
	require.NoError(t, err)
	under(rep, 0.5)
	require.Equal(t, "deadline index writes, each shard", rep.Binding.Name, "at 2,000 orders a second")

	m := measured(t, documented())
	m.Settings.TableWrites = 200000 // the quota raised
	rep, err = m.At(10000)
	require.NoError(t, err)
	under(rep, 0.5)
	b, err := m.Burst(100000, time.Second, 0)
	require.NoError(t, err)
	require.True(t, b.Drains)
	require.Equal(t, "submission concurrency, on the orders queue", b.Bottleneck, "the burst waits in the orders queue")
	require.Zero(t, b.LooksPerOrder, "not stored yet: no look, no deadline running")
	require.False(t, b.Alarmed)
	under(b.AtDrain, 1)

	m.Settings.TableWrites = capacity.TableWritesDefault
	rep, err = m.At(10000)
	require.NoError(t, err)
	require.Equal(t, "state table writes", rep.Binding.Name, "the quota not raised binds first")
}

// A deployment's settings reach the model: its concurrency (an agent's own
// from its workflow file), its shards, the Supervisor's parallelism, whose
// looks a second grow in proportion.
func TestTheModelReadsTheDeployment(t *testing.T) {
	t.Parallel()
	def := workflow.MustExample(workflow.OrderWorkflow)
	a := def.AgentSpecs["payment"]
	a.Concurrency = 5
	def.AgentSpecs["payment"] = a
	set, err := workflow.NewSet(def)
	require.NoError(t, err)
	d := deployment.DefaultSettings()
	d.SubmissionConcurrency, d.Topology.DeadlineShards, d.SupervisorParallelism = 300, 40, 32
	s := capacity.FromDeployment(d, set)
	require.Equal(t, 300, s.SubmissionConcurrency)
	require.Equal(t, 40, s.DeadlineShards)
	require.Equal(t, map[string]int{"payment": 5}, s.AgentConcurrencyOf)
	require.Equal(t, 20, s.AgentConcurrency)
	require.Equal(t, time.Minute, s.PickupTimeout)
	require.Equal(t, def.Steps[0].Timeout, s.FirstLook, "its first step's timeout comes before the pickup timeout")

	require.Equal(t, 8.0, capacity.EstimatedStateWrites(def), "docs/cost.md: 2 + 3 x 2")
	require.Equal(t, 4.0, capacity.EstimatedStateWrites(workflow.Single(workflow.Settings{})))

	m := capacity.Model{Settings: s, Handlers: handlers(0), Workload: capacity.Happy(def, 8)}
	m.Workload.Looks = 1
	rep, err := m.At(100)
	require.NoError(t, err)
	sweep := byName(t, rep, "Supervisor sweep time, each period")
	require.InDelta(t, 100*60/(250*2.0), sweep.Use, 1e-9, "twice the default parallelism: twice the looks a second")
	require.Equal(t, "context supervisorParallelism", sweep.Moves)
}
