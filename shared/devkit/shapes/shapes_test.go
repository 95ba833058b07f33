package shapes_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/workflow"
)

// Without Flow a seed gives the shapes it gave before Flow was: the
// explorer's and the chaos run's seeds replay.
func TestWithoutFlowASeedGivesTheSameShapes(t *testing.T) {
	var versions []string
	for k := range 5 {
		d := shapes.Random(rand.New(rand.NewPCG(7, uint64(k))), fmt.Sprintf("shape%d", k), shapes.Defaults())
		versions = append(versions, d.Version)
	}
	require.Equal(t, []string{"fa709292583f", "078d3a64fa5e", "e351b3b10d90", "7afa273e7e7b", "90864c91ccf1"}, versions)
}

// With Flow, generated workflows call the flow-controlled agents and hold
// on failure; each is valid, and together they make one deployment's set:
// an agent several of them call is declared alike in each.
func TestFlowShapesCallFlowControlledAgentsAndHold(t *testing.T) {
	o := shapes.Defaults()
	o.Waits = false
	o.Endpoint = func(a string) string { return "${SAS_REMOTE_BASE_URL}/v1/services/" + a }
	rate := workflow.Rate{Calls: 4, Per: time.Second, Burst: 2}
	o.Flow = &shapes.Flow{Agents: shapes.FlowAgents(rate, 2), Share: 0.6, Hold: 0.3, HoldFor: 6 * time.Second}
	var defs []workflow.Definition
	calls, holds := map[string]int{}, 0
	for k := range 40 {
		d := shapes.Random(rand.New(rand.NewPCG(11, uint64(k))), fmt.Sprintf("flow%d", k), o)
		require.NoError(t, d.Validate(d.Agents()), d.Name)
		for _, st := range d.Steps {
			if st.Kind() != workflow.KindAgent {
				require.Zero(t, st.HoldFor, "only a step that calls an agent holds")
				continue
			}
			calls[st.Agent]++
			if st.HoldFor > 0 {
				require.Equal(t, 6*time.Second, st.HoldFor)
				holds++
			}
		}
		defs = append(defs, d)
	}
	set, err := workflow.NewSet(defs...)
	require.NoError(t, err, "every workflow declares a flow agent alike")
	for _, name := range []string{"rated", "keyed", "metered", "alpha"} {
		require.Positive(t, calls[name], "some steps call %s", name)
	}
	require.Positive(t, holds)
	rated, ok := set.Agent("rated")
	require.True(t, ok)
	require.Equal(t, rate, rated.RateLimit)
	require.Nil(t, rated.PerKey)
	keyed, _ := set.Agent("keyed")
	require.Equal(t, &workflow.PerKey{Key: shapes.PerCustomer, InFlight: 2}, keyed.PerKey)
	require.Zero(t, keyed.RateLimit)
	metered, _ := set.Agent("metered")
	require.Equal(t, rate, metered.RateLimit)
	require.NotNil(t, metered.PerKey)
	key, err := metered.PerKey.KeyFor(workflow.Document{Order: []byte(`{"orderId":"o-1","customerId":"c-7"}`)})
	require.NoError(t, err)
	require.Equal(t, "c-7", key)
}

// Every change Evolve makes gives a valid next version that an order at
// its start moves to.
func TestEveryChangeGivesAVersionAnOrderMovesTo(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		d := shapes.Random(rng, fmt.Sprintf("shape%d", seed), shapes.Defaults())
		next, what, ok := shapes.Evolve(rng, d)
		if !ok {
			continue
		}
		seen[what]++
		require.NotEqual(t, d.Version, next.Version, what)
		_, err := workflow.Moving{From: d, To: next}.Move(d.Start(map[int]int{}))
		if err != nil {
			require.Contains(t, err.Error(), "runs per item", "%s of %s: only a new forEach step may refuse a fresh order", what, d.Name)
		}
		_, err = workflow.Moving{From: next, To: d}.Move(next.Start(map[int]int{}))
		if err != nil {
			require.Contains(t, err.Error(), "runs per item", "back from %s of %s", what, d.Name)
		}
	}
	for _, what := range shapes.Changes {
		require.Positive(t, seen[what], what)
	}
}
