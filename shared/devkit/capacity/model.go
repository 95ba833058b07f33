package capacity

import (
	"fmt"
	"math"

	"github.com/sas-go/sas/shared/supervisor"
)

// Model is a deployment's settings, its handlers' throughput and a workload.
type Model struct {
	Settings Settings
	Handlers Handlers
	Workload Workload
}

// Limit is what one limit carries at a rate.
type Limit struct {
	Name string  `json:"name"`
	Use  float64 `json:"use"`
	Max  float64 `json:"max"`
	Unit string  `json:"unit"`
	// Ceiling is the rate of orders at which Use reaches Max (its use grows
	// in proportion to the rate); 0 for a limit the workload does not load.
	Ceiling float64 `json:"ceilingPerSecond"`
	// Transient: a limit that lifts by itself (a new on-demand table's
	// instant capacity): not a ceiling, but what a burst meets first.
	Transient bool   `json:"transient,omitempty"`
	Moves     string `json:"moves"` // the settings, or the quota, that move it
}

// Utilization is Use over Max.
func (l Limit) Utilization() float64 { return l.Use / l.Max }

// Report is what every limit carries at a rate of orders.
type Report struct {
	Rate   float64 `json:"ratePerSecond"`
	Limits []Limit `json:"limits"`
	// Binding is the limit with the lowest ceiling (transient ones apart):
	// the first that binds as the rate grows.
	Binding Limit `json:"binding"`
}

// At says what every limit carries at rate orders a second.
func (m Model) At(rate float64) (Report, error) {
	if err := m.Settings.Validate(); err != nil {
		return Report{}, err
	}
	if rate < 0 {
		return Report{}, fmt.Errorf("capacity: a rate of %g orders a second", rate)
	}
	limits, err := m.concurrency(rate)
	if err != nil {
		return Report{}, err
	}
	sup, err := m.supervisor(rate)
	if err != nil {
		return Report{}, err
	}
	limits = append(limits, m.account(rate, limits, sup))
	limits = append(limits, m.tables(rate)...)
	limits = append(limits, sup)
	rep := Report{Rate: rate, Limits: limits}
	for _, l := range limits {
		if !l.Transient && l.Ceiling > 0 && (rep.Binding.Ceiling == 0 || l.Ceiling < rep.Binding.Ceiling) {
			rep.Binding = l
		}
	}
	return rep, nil
}

// limit is a limit whose use is perOrder × rate.
func limit(name, unit, moves string, rate, perOrder, max float64) Limit {
	l := Limit{Name: name, Use: rate * perOrder, Max: max, Unit: unit, Moves: moves}
	if perOrder > 0 {
		l.Ceiling = max / perOrder
	}
	return l
}

// concurrency is each event source mapping's concurrency (an instance
// handles perInstance messages a second), and the busiest queue's messages
// in flight (each held for its invocation).
func (m Model) concurrency(rate float64) ([]Limit, error) {
	s := m.Settings
	var out []Limit
	inFlight := Limit{Name: "SQS messages in flight, the busiest queue", Unit: "messages", Max: float64(s.QueueInFlight),
		Moves: `SQS's "Messages per queue (in flight)" (a support request)`}
	for _, f := range m.Workload.Flows {
		per, err := m.Handlers.perInstance(f.Consumer, s.BatchSize)
		if err != nil {
			return nil, err
		}
		most, moves := m.mappingCap(f)
		out = append(out, limit(fmt.Sprintf("%s concurrency, on the %s queue", f.Consumer, f.Queue), "instances", moves,
			rate, f.PerOrder/per, float64(most)))
		held := limit(inFlight.Name, inFlight.Unit, inFlight.Moves, rate, f.PerOrder*float64(s.BatchSize)/per, inFlight.Max)
		if held.Use > inFlight.Use || inFlight.Ceiling == 0 {
			inFlight = held
		}
	}
	return append(out, inFlight), nil
}

// mappingCap is a flow's mapping's MaximumConcurrency, and what moves it.
func (m Model) mappingCap(f Flow) (int, string) {
	s := m.Settings
	switch {
	case f.Consumer.Agent != "":
		return s.agentConcurrency(f.Consumer.Agent), "the agent's concurrency: in its workflow file, or context agentConcurrency; its service's latency"
	case f.Consumer == Submission:
		return s.SubmissionConcurrency, "context submissionConcurrency"
	}
	return s.SchedulerConcurrency, "context schedulerConcurrency"
}

// account is the Region's Lambda concurrency: every mapping's, and the
// Supervisor's while it sweeps.
func (m Model) account(rate float64, mappings []Limit, sup Limit) Limit {
	perOrder := 0.0
	for _, l := range mappings {
		if l.Unit == "instances" && rate > 0 {
			perOrder += l.Use / rate
		}
	}
	l := limit("Lambda concurrency, the account's", "instances", `the Lambda quota "Concurrent executions"`,
		rate, perOrder, float64(m.Settings.AccountConcurrency))
	l.Use += math.Min(sup.Use/sup.Max, 1) // the Supervisor: one instance, the part of its period it sweeps
	return l
}

// tables are the deadline index's busiest shard, and each table's writes.
func (m Model) tables(rate float64) []Limit {
	s, w := m.Settings, m.Workload
	state := w.StateWrites + w.Looks // a look is one conditional write of the state item
	return []Limit{
		limit("deadline index writes, each shard", "write units/s", "context targetRate, or deadlineShards",
			rate, (w.IndexWrites+w.Looks)/float64(s.DeadlineShards), s.PartitionWrites),
		limit("state table writes", "write units/s", `the DynamoDB quota "Table-level write throughput limit"`,
			rate, state, s.TableWrites),
		{Name: "state table writes, a new on-demand table at once", Use: rate * state, Max: s.NewTableWrites, Unit: "write units/s",
			Ceiling: s.NewTableWrites / math.Max(state, 1e-12), Transient: true,
			Moves: "time (on-demand doubles a peak within 30 minutes), or warm throughput"},
		limit("orders table writes", "write units/s", `the DynamoDB quota "Table-level write throughput limit"`,
			rate, w.OrdersWrites, s.TableWrites),
	}
}

// supervisor is the Supervisor's sweep: the seconds of each period its looks
// take, against its time budget.
func (m Model) supervisor(rate float64) (Limit, error) {
	s := m.Settings
	l := Limit{Name: "Supervisor sweep time, each period", Unit: "seconds", Max: s.SweepBudget.Seconds(),
		Moves: "context supervisorParallelism"}
	if m.Workload.Looks == 0 {
		return l, nil
	}
	f, ok := m.Handlers.Figures["supervisor"]
	if !ok || f.MsgsPerSecond <= 0 {
		return l, fmt.Errorf("capacity: no throughput measured for the supervisor handler")
	}
	looks := f.MsgsPerSecond * float64(s.SupervisorParallelism) / supervisor.ParallelDefault // measured at the default
	perOrder := m.Workload.Looks * s.SupervisorPeriod.Seconds() / looks
	return limit(l.Name, l.Unit, l.Moves, rate, perOrder, l.Max), nil
}
