package chaos

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// itemsOf are two items for each forEach step of d: an order's records at
// its start.
func itemsOf(d workflow.Definition) map[int]int {
	items := map[int]int{}
	for i, st := range d.Steps {
		if st.ForEach != "" {
			items[i] = 2
		}
	}
	return items
}

// Every mutation makes, of every workflow of a run it applies to (the
// generated shapes, the flow shapes, the examples, waits and large), a
// valid version the stack can run beside the first: a new version, every
// step's needs a step of it, no cycle, its agents the run's (their queues
// exist), its plan naming its steps. An order at its start moves to it, and
// back, by the product's rule (workflow.Moving).
func TestEveryMutationMakesAVersionAnOrderAtItsStartMovesTo(t *testing.T) {
	plans := []Plan{DefaultPlan(20261121, 200), flowPlan()}
	for seed := range uint64(20) { // the shapes of other seeds
		plans = append(plans, DefaultPlan(seed, 200))
	}
	unset := DefaultPlan(3, 200) // no overrides: every call's timeout may be raised
	unset.Settings = workflow.Settings{}
	for _, p := range append(plans, unset) {
		stack := p.stackWorkflows()
		agents := stack.Agents()
		applied := map[string]int{}
		for _, file := range p.workflows().Definitions() {
			if file.Name == LimitWorkflow {
				continue
			}
			for _, kind := range mutations {
				rng := rand.New(rand.NewPCG(p.Seed, nameHash(file.Name+kind)))
				v, ok := newVersion(rng, file, p.Settings, kind)
				if !ok {
					continue
				}
				applied[kind]++
				what := file.Name + ", " + kind + ": " + v.What
				first, second := v.First, v.Second
				want, _ := stack.Get(file.Name)
				require.Equal(t, want.Version, first.Version, "the first version is the one the stack runs: %s", what)
				require.Equal(t, first.Name, second.Name, what)
				require.NotEqual(t, first.Version, second.Version, what)
				require.NoError(t, second.Validate(agents), what)
				for _, a := range second.Agents() {
					require.Contains(t, agents, a, "%s: its agent's queue exists", what)
				}
				placed := 0
				for _, level := range second.Levels() {
					placed += len(level)
				}
				require.Equal(t, len(second.Steps), placed, "%s: no cycle", what)
				for _, st := range second.Steps {
					for _, n := range st.Needs {
						require.GreaterOrEqual(t, second.Index(n), 0, "%s: %s needs %s", what, st.Name, n)
					}
				}
				for from, to := range second.Migrate.Rename {
					require.GreaterOrEqual(t, first.Index(from), 0, what)
					require.GreaterOrEqual(t, second.Index(to), 0, what)
					require.Equal(t, first.Steps[first.Index(from)].DoName(), second.Steps[second.Index(to)].DoName(),
						"%s: a renamed step calls the same action", what)
				}
				for _, name := range append(slices.Clone(second.Migrate.Skip), second.Migrate.NewUndo...) {
					require.GreaterOrEqual(t, second.Index(name), 0, what)
				}
				others := slices.DeleteFunc(stack.Definitions(), func(d workflow.Definition) bool { return d.Name == file.Name })
				_, err := workflow.NewSet(append(others, second)...)
				require.NoError(t, err, "%s: it deploys with the others", what)
				// As the store keeps it (JSON) and reads it back.
				b, err := json.Marshal(second)
				require.NoError(t, err)
				var stored workflow.Definition
				require.NoError(t, json.Unmarshal(b, &stored))
				require.NoError(t, stored.Compile(), what)

				items := itemsOf(first)
				moved, err := workflow.Moving{From: first, To: second}.Move(first.Start(items))
				require.NoError(t, err, "%s: an order at its start moves", what)
				require.True(t, slices.ContainsFunc(slices.Collect(maps.Values(moved.Recs)), func(p workflow.Placed) bool { return p.Ready }),
					"%s: and goes on", what)
				require.Equal(t, second.Version, moved.Definition.Version, what)
				_, err = workflow.Moving{From: second, To: v.Back}.Move(second.Start(itemsOf(second)))
				require.NoError(t, err, "%s: and back", what)

				requireMutation(t, kind, what, v)
			}
		}
		for _, kind := range mutations {
			require.Positive(t, applied[kind], "%s applies to some workflow of the run", kind)
		}
	}
}

// requireMutation checks what mutation kind made of v's first version.
func requireMutation(t *testing.T, kind, what string, v version) {
	first, second := v.First, v.Second
	switch kind {
	case mutateRename:
		require.Len(t, second.Migrate.Rename, 1, what)
	case mutateUndo:
		require.Len(t, v.aliases, 2, "%s: the old undo and the new one", what)
	case mutateAdd:
		require.Len(t, second.Steps, len(first.Steps)+1, what)
	case mutateRemove:
		require.Len(t, second.Steps, len(first.Steps)-1, what)
		require.Len(t, second.Migrate.Keep, 1, what)
		kept := second.Migrate.Keep[0]
		require.GreaterOrEqual(t, first.Index(kept), 0, what)
		require.Less(t, second.Index(kept), 0, what)
		moving := workflow.Moving{From: first, To: second}
		require.Empty(t, moving.Problems(), what)
		keeps := slices.ContainsFunc(moving.Kinds(), func(k workflow.MoveKind) bool {
			return k.Err == nil && slices.Contains(k.Moved.Kept(), kept)
		})
		if len(first.Dependents(first.Index(kept))) > 0 {
			require.True(t, keeps, "%s: an order past the removed step moves, keeping it", what)
		}
	case mutateRewrite:
		require.NotEmpty(t, second.Migrate.Transform.Order, what)
		data := json.RawMessage(`{"orderId":"c-1","customerId":"customer-1","items":[{"sku":"SKU-1","quantity":1,"unitPriceCents":100},` +
			`{"sku":"SKU-2","quantity":2,"unitPriceCents":200}]}`)
		moved, err := workflow.Moving{From: first, To: second, Data: data}.Move(first.Start(itemsOf(first)))
		require.NoError(t, err, what)
		require.JSONEq(t, string(data), string(moved.Data), "%s: the same values, written again", what)
		for step, expr := range second.Migrate.Transform.Results {
			st := second.Steps[second.Index(step)]
			require.Nil(t, st.Undo, "%s: a result nothing undoes", what)
			require.False(t, namedBy(second, step), "%s: a result no expression reads", what)
			out, ok, err := workflow.Moving{From: first, To: second}.TransformResult(step, json.RawMessage(`{"id":1}`))
			require.NoError(t, err, "%s: %s", what, expr)
			require.True(t, ok)
			require.JSONEq(t, `{"was":{"id":1}}`, string(out), what)
		}
	}
}

// A run's second versions are its seed's, each workflow's but the limit
// one's by one mutation, and every kind among them; the simulator knows the
// changed undo actions (the plan's undo failures strike them too).
func TestARunsVersionsAreItsSeedsAndOfEveryKind(t *testing.T) {
	p := DefaultPlan(20261121, 200)
	vs := p.versions()
	again := p.versions()
	kinds := map[string]int{}
	for name, v := range vs {
		require.Equal(t, v.What, again[name].What)
		require.Equal(t, v.Second.Version, again[name].Second.Version)
		kinds[v.Kind]++
	}
	require.Len(t, vs, len(p.workflows().Definitions())-1, "every workflow but the limit one")
	require.NotContains(t, vs, LimitWorkflow)
	for _, kind := range mutations {
		require.Positive(t, kinds[kind], kind)
	}
	faults := p.faults(time.Now())
	for _, v := range vs {
		if v.Kind != mutateUndo {
			continue
		}
		for _, st := range v.Second.Steps {
			if st.Undo != nil && strings.HasSuffix(st.Undo.Name, "-v2") {
				f, ok := faults[st.Undo.Agent+"/"+st.Undo.DoName()]
				require.True(t, ok, st.Undo.Name)
				require.Equal(t, p.UndoFailure, f.PermanentRate)
			}
		}
	}
}
