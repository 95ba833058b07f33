// Package capacity is a model of a deployment's throughput ceilings. From what
// an order asks of it (its messages, writes and the Supervisor's looks, as
// sasctl bench measures them), how long each handler takes a message (the
// handler benchmarks on the local engines), and the deployment's settings, it
// says what each limit carries at a rate of orders and over a burst, the
// first limit that binds, and the settings that move it.
//
// It is operator tooling: it does no I/O and no Lambda imports it. Its
// figures are as good as its inputs: handler times measured against the
// local emulators are slower than AWS's, so the concurrency it computes is
// an upper bound, and the ceilings a floor.
package capacity

import (
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/handlerbench"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// The defaults of a deployment's settings: the stack's values today, and
// AWS's default quotas (the quotas' AWS pages are cited in each field's
// comment of Settings).
const (
	SubmissionConcurrencyDefault = deployment.SubmissionConcurrencyDefault
	SchedulerConcurrencyDefault  = deployment.SchedulerConcurrencyDefault
	AgentConcurrencyDefault      = deployment.AgentConcurrencyDefault
	DeadlineShardsDefault        = 4
	PartitionWritesDefault       = topology.PartitionWritesPerSecond
	TableWritesDefault           = 40000
	NewTableWritesDefault        = 4000
	AccountConcurrencyDefault    = 1000
	QueueInFlightDefault         = 120000
	BatchSizeDefault             = 10
	SupervisorPeriodDefault      = time.Minute
	FirstLookDefault             = 20 * time.Second
	PickupTimeoutDefault         = time.Minute
	QueueWaitAlarmDefault        = 5 * time.Minute
)

// Settings are what bounds a deployment's throughput.
type Settings struct {
	// MaximumConcurrency of each SQS event source mapping (Lambda takes 2 to
	// 1,000; each mapping of a function has its own): Submission's on the
	// orders queue, the Scheduler's on the scheduler queue and on each
	// agent's response queue, each agent's on its request queue (by agent;
	// absent: AgentConcurrency).
	SubmissionConcurrency int
	SchedulerConcurrency  int
	AgentConcurrency      int
	AgentConcurrencyOf    map[string]int
	// RateLimits are the agents' rate limits (by agent; absent: none).
	RateLimits map[string]workflow.Rate
	// DeadlineShards are the partition keys of the deadline index; a
	// partition takes about PartitionWrites write units a second ("Each
	// partition on the table can serve up to 3,000 read request units or
	// 1,000 write request units"), and a throttled index throttles the base
	// table's writes that touch it.
	DeadlineShards  int
	PartitionWrites float64
	// TableWrites is an on-demand table's write quota (40,000 write request
	// units a second by default); NewTableWrites what a new on-demand table
	// takes at once (4,000; it doubles each new peak within 30 minutes).
	TableWrites    float64
	NewTableWrites float64
	// AccountConcurrency is the Region's Lambda concurrency quota (1,000).
	AccountConcurrency int
	// QueueInFlight is a standard queue's in-flight messages (about 120,000).
	QueueInFlight int
	BatchSize     int // messages per invocation, at a rate that fills the batches
	// SupervisorParallelism is the orders the Supervisor handles at once;
	// its looks a second are the measured figure (at ParallelDefault) in
	// proportion.
	SupervisorParallelism int
	// The Supervisor: its schedule, its sweep's time budget, and when it
	// first looks at an order (the earlier of its first step's pickup
	// timeout and step timeout), then again at a ready step's pickup
	// timeout, twice it, four times…
	SupervisorPeriod time.Duration
	SweepBudget      time.Duration
	FirstLook        time.Duration
	PickupTimeout    time.Duration
	QueueWaitAlarm   time.Duration
}

// Defaults are today's settings and AWS's default quotas.
func Defaults() Settings {
	return Settings{SubmissionConcurrency: SubmissionConcurrencyDefault, SchedulerConcurrency: SchedulerConcurrencyDefault,
		AgentConcurrency: AgentConcurrencyDefault, DeadlineShards: DeadlineShardsDefault, PartitionWrites: PartitionWritesDefault,
		TableWrites: TableWritesDefault, NewTableWrites: NewTableWritesDefault, AccountConcurrency: AccountConcurrencyDefault,
		QueueInFlight: QueueInFlightDefault, BatchSize: BatchSizeDefault, SupervisorPeriod: SupervisorPeriodDefault,
		SweepBudget: supervisor.TimeBudgetDefault, FirstLook: FirstLookDefault, PickupTimeout: PickupTimeoutDefault,
		QueueWaitAlarm: QueueWaitAlarmDefault, SupervisorParallelism: supervisor.ParallelDefault}
}

// FromDeployment are a deployment's settings, with AWS's default quotas,
// for its workflows: each agent's own concurrency and rate limit, and the Supervisor's
// first look at the default workflow's earlier of its first step's timeout
// and its pickup timeout.
func FromDeployment(d deployment.Settings, set workflow.Set) Settings {
	s := Defaults()
	s.SubmissionConcurrency, s.SchedulerConcurrency, s.AgentConcurrency = d.SubmissionConcurrency, d.SchedulerConcurrency, d.AgentConcurrency
	s.DeadlineShards, s.SupervisorParallelism = d.Topology.DeadlineShards, d.SupervisorParallelism
	s.SupervisorPeriod, s.QueueWaitAlarm = d.SupervisorRate, d.QueueWaitAlarm
	s.AgentConcurrencyOf, s.RateLimits = map[string]int{}, map[string]workflow.Rate{}
	for _, a := range set.Agents() {
		spec, ok := set.Agent(a)
		if ok && spec.Concurrency > 0 {
			s.AgentConcurrencyOf[a] = spec.Concurrency
		}
		if ok && spec.RateLimit.Calls > 0 {
			s.RateLimits[a] = spec.RateLimit
		}
	}
	if def := set.Default(); len(def.Steps) > 0 {
		s.PickupTimeout, s.FirstLook = def.PickupTimeout, def.PickupTimeout
		if t := def.Steps[0].Timeout; t > 0 {
			s.FirstLook = min(t, def.PickupTimeout)
		}
	}
	return s
}

// Measured are the handlers' throughput per instance that docs/cost.md
// reports (`go test -run '^$' -bench Throughput -benchtime 20x
// ./shared/devkit/handlerbench` on the project's 2-core machine against the
// local engines: floors), for a model with no figures of its own.
func Measured() Handlers {
	return Handlers{Figures: map[string]handlerbench.Figures{
		"submission": {MsgsPerSecond: 108.5, MsPerMsg: 9.2, GBSecondsPerMsg: 0.0023},
		"agent":      {MsgsPerSecond: 149.4, MsPerMsg: 6.7, GBSecondsPerMsg: 0.00084},
		"scheduler":  {MsgsPerSecond: 563, MsPerMsg: 1.8, GBSecondsPerMsg: 0.00044},
		"supervisor": {MsgsPerSecond: 55, MsPerMsg: 18.1, GBSecondsPerMsg: 0.0045},
	}, ServiceLatency: map[string]time.Duration{}}
}

// agentConcurrency is agent a's mapping's MaximumConcurrency.
func (s Settings) agentConcurrency(a string) int {
	if n, ok := s.AgentConcurrencyOf[a]; ok {
		return n
	}
	return s.AgentConcurrency
}

// Validate says which setting cannot be.
func (s Settings) Validate() error {
	for name, n := range map[string]int{"submission concurrency": s.SubmissionConcurrency,
		"scheduler concurrency": s.SchedulerConcurrency, "agent concurrency": s.AgentConcurrency} {
		if n < 2 || n > 1000 {
			return fmt.Errorf("capacity: %s must be 2 to 1,000 (an event source mapping's MaximumConcurrency), not %d", name, n)
		}
	}
	for a, n := range s.AgentConcurrencyOf {
		if n < 2 || n > 1000 {
			return fmt.Errorf("capacity: agent %s's concurrency must be 2 to 1,000, not %d", a, n)
		}
	}
	switch {
	case s.DeadlineShards < 1, s.PartitionWrites <= 0, s.TableWrites <= 0, s.NewTableWrites <= 0,
		s.AccountConcurrency < 1, s.QueueInFlight < 1:
		return fmt.Errorf("capacity: shards, partition and table writes, account concurrency and in-flight messages must be positive")
	case s.SupervisorParallelism < 1:
		return fmt.Errorf("capacity: the Supervisor's parallelism must be at least 1, not %d", s.SupervisorParallelism)
	case s.BatchSize < 1 || s.BatchSize > 10:
		return fmt.Errorf("capacity: batch size must be 1 to 10, not %d", s.BatchSize)
	case s.SupervisorPeriod <= 0 || s.SweepBudget <= 0 || s.FirstLook <= 0 || s.PickupTimeout <= 0 || s.QueueWaitAlarm <= 0:
		return fmt.Errorf("capacity: the Supervisor's period, budget, first look, pickup timeout and queue-wait alarm must be positive")
	}
	return nil
}

// Handlers are each handler's throughput per instance, by handler
// ("submission", "scheduler", "agent", "supervisor"; the Supervisor's is in
// orders looked at), as handlerbench.ReadFigures reads them; an agent's
// service adds its latency to every invocation (by agent).
type Handlers struct {
	Figures        map[string]handlerbench.Figures
	ServiceLatency map[string]time.Duration
}

// perInstance is how many messages one instance of the consumer handles a
// second with full batches of batch: for an agent, its service's latency is
// added to each invocation (the batch's calls run at once).
func (h Handlers) perInstance(c Consumer, batch int) (float64, error) {
	f, ok := h.Figures[c.Handler]
	if !ok || f.MsgsPerSecond <= 0 {
		return 0, fmt.Errorf("capacity: no throughput measured for the %s handler", c.Handler)
	}
	if c.Agent == "" {
		return f.MsgsPerSecond, nil
	}
	invocation := float64(batch)/f.MsgsPerSecond + h.ServiceLatency[c.Agent].Seconds()
	return float64(batch) / invocation, nil
}
