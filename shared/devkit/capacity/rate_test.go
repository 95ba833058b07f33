package capacity_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/capacity"
	"github.com/sas-go/sas/shared/workflow"
)

// What a rate-limited agent can be given, by hand: payment's 20 instances
// each take a batch of 10 in 25 ms (400 calls a second, 8,000 between
// them); at a 10 ms write a lease holds up to 400 turns (200 ms of
// 2,000/s), 40,000 turns a second, where one turn a write gave 100. So
// 2,000/s is given whole, in leases of 80 turns (an instance's 400 a
// second over 200 ms): 25 leases, 25 to 500 writes a second (every
// instance racing for each lease). A service
// answering in a second leaves its instances 195 calls a second; a store
// answering in 300 ms hands out 1,333; at 3/s a lease is one turn.
func TestWhatRateAnAgentCanBeGiven(t *testing.T) {
	t.Parallel()
	rate := func(limit workflow.Rate, service, store time.Duration) capacity.AgentRate {
		m := order(service)
		m.Settings.RateLimits = map[string]workflow.Rate{"payment": limit}
		rs, err := m.AgentRates(store)
		require.NoError(t, err)
		require.Len(t, rs, 1, "payment alone has a rate limit")
		return rs[0]
	}
	r := rate(workflow.Rate{Calls: 2000, Per: time.Second}, 0, 10*time.Millisecond)
	require.Equal(t, capacity.AgentRate{Agent: "payment", Limit: "2000/s", Meaning: "at most 2000 calls in any second", Rate: 2000,
		Instances: 20, Callers: 8000, StoreLatency: 10 * time.Millisecond, MaxLease: 400, Store: 40000, OneAWrite: 100,
		Given: 2000, BoundBy: "its rate limit", Lease: 80, Leases: 25}, r)
	least, most := r.Writes()
	require.Equal(t, []float64{25, 500}, []float64{least, most})

	slow := rate(workflow.Rate{Calls: 2000, Per: time.Second}, time.Second, 10*time.Millisecond)
	require.InDelta(t, 195.1, slow.Given, 0.1)
	require.Equal(t, "its instances: their concurrency and its service's latency", slow.BoundBy)
	require.Equal(t, 1, slow.Lease)
	least, most = slow.Writes()
	require.Equal(t, least, most, "no instance waits for another's turns")

	far := rate(workflow.Rate{Calls: 2000, Per: time.Second}, 0, 300*time.Millisecond)
	require.InDelta(t, 1333.3, far.Given, 0.1)
	require.Equal(t, "the store's write latency", far.BoundBy)

	three := rate(workflow.Rate{Calls: 3, Per: time.Second}, 0, 10*time.Millisecond)
	require.Equal(t, []any{1, 100.0, 3.0, 1, 3.0}, []any{three.MaxLease, three.Store, three.Given, three.Lease, three.Leases})

	_, err := order(0).AgentRates(0)
	require.Error(t, err)
}
