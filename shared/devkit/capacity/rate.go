package capacity

import (
	"fmt"
	"math"
	"time"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/workflow"
)

// StoreLatencyDefault is a conditional write's round trip to the state
// table a model assumes (DynamoDB's, in the same Region: 5-10 ms).
const StoreLatencyDefault = 10 * time.Millisecond

// AgentRate is what rate an agent with a rate limit can be given: the
// least of its limit, what its instances can call at, and what its leases
// of turns hand out at the store's write latency (flow.Gate: a lease of
// several turns a conditional write, at most flow.MaxLeaseSpan of them).
type AgentRate struct {
	Agent   string  `json:"agent"`
	Limit   string  `json:"limit"`
	Meaning string  `json:"meaning"` // at most 3 calls in any second
	Rate    float64 `json:"limitPerSecond"`
	// Instances call at up to Callers a second: each its batch at once,
	// its handler's time and its service's latency a batch.
	Instances int     `json:"instances"`
	Callers   float64 `json:"callersPerSecond"`
	// StoreLatency is the write's round trip assumed; MaxLease the most
	// turns a lease holds; Store the turns a second the leases hand out at
	// most (MaxLease a write's round trip), OneAWrite what one turn a write
	// would (as before leases).
	StoreLatency time.Duration `json:"storeLatencyNanos"`
	MaxLease     int           `json:"maxLeaseTurns"`
	Store        float64       `json:"storePerSecond"`
	OneAWrite    float64       `json:"oneTurnAWritePerSecond"`
	// Given is the least of the three, and BoundBy which it is.
	Given   float64 `json:"givenPerSecond"`
	BoundBy string  `json:"boundBy"`
	// Lease is the turns an instance's lease settles at (its own pace over
	// a lease's span, at least one, at most MaxLease), Leases the leases a
	// second at the given rate: one write each, and one more for each other
	// instance that races for the same turns (up to Instances).
	Lease  int     `json:"leaseTurns"`
	Leases float64 `json:"leasesPerSecond"`
}

// Writes are the conditional writes a second the leases take: one a lease;
// while its rate limit binds (its instances ask for more turns than it
// gives), each instance waiting races for the next lease, up to one write
// each (BenchmarkRateDelivered: 4 instances, about 5 writes a lease).
func (r AgentRate) Writes() (least, most float64) {
	if r.BoundBy != boundByLimit {
		return r.Leases, r.Leases
	}
	return r.Leases, r.Leases * float64(r.Instances)
}

// What binds an agent's rate (AgentRate.BoundBy).
const (
	boundByLimit     = "its rate limit"
	boundByInstances = "its instances: their concurrency and its service's latency"
	boundByStore     = "the store's write latency"
)

// AgentRates are the rates the workload's rate-limited agents can be given
// at a store write latency of store.
func (m Model) AgentRates(store time.Duration) ([]AgentRate, error) {
	if store <= 0 {
		return nil, fmt.Errorf("capacity: a store latency of %s", store)
	}
	var out []AgentRate
	for _, a := range m.Workload.agents() {
		limit := m.Settings.RateLimits[a]
		if limit.Calls == 0 {
			continue
		}
		per, err := m.Handlers.perInstance(Agent(a), m.Settings.BatchSize)
		if err != nil {
			return nil, err
		}
		out = append(out, agentRate(a, limit, m.Settings.agentConcurrency(a), per, store))
	}
	return out, nil
}

// agentRate is agent a's rate at limit, with n instances of per calls a
// second each, at a store write latency of store.
func agentRate(a string, limit workflow.Rate, n int, per float64, store time.Duration) AgentRate {
	r := AgentRate{Agent: a, Limit: limit.String(), Meaning: limit.Meaning(), Rate: float64(limit.Calls) / limit.Per.Seconds(),
		Instances: n, Callers: float64(n) * per, StoreLatency: store, MaxLease: int(max(1, limit.Turns(flow.MaxLeaseSpan))),
		OneAWrite: 1 / store.Seconds()}
	r.Store = float64(r.MaxLease) / store.Seconds()
	r.Given, r.BoundBy = r.Rate, boundByLimit
	if r.Callers < r.Given {
		r.Given, r.BoundBy = r.Callers, boundByInstances
	}
	if r.Store < r.Given {
		r.Given, r.BoundBy = r.Store, boundByStore
	}
	pace := math.Min(per, r.Given) * flow.MaxLeaseSpan.Seconds()
	r.Lease = int(math.Min(math.Max(1, math.Floor(pace)), float64(r.MaxLease)))
	r.Leases = r.Given / float64(r.Lease)
	return r
}
