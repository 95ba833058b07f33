package workflow_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

func TestStepsWithoutNeedsRunInLine(t *testing.T) {
	t.Parallel()
	d := workflow.MustExample(workflow.OrderWorkflow)
	require.True(t, d.Linear())
	require.Empty(t, d.Needs(0))
	require.Equal(t, []int{0}, d.Needs(1))
	require.Equal(t, []int{1}, d.Needs(2))
	require.Equal(t, [][]int{{0}, {1}, {2}}, d.Levels())
	require.Equal(t, []int{1}, d.Dependents(0))
}

func TestParallelExampleRunsIndependentStepsAtOnce(t *testing.T) {
	t.Parallel()
	d := workflow.MustExample("parallel")
	require.False(t, d.Linear())
	require.Equal(t, []int{0, 1, 2}, d.Needs(3), "the charge needs both reservations and the authorization")
	require.Empty(t, d.Needs(1), "needs: [] starts with the order")
	require.Equal(t, []int{3}, d.Needs(4), "no needs: the step before it")
	require.Equal(t, [][]int{{0, 1, 2}, {3}, {4}, {5}}, d.Levels())
	require.Equal(t, "items", d.Steps[4].ForEach)
	require.Equal(t, []int{3}, d.Dependents(2))
}

func TestNeedsAreCheckedWithTheirLines(t *testing.T) {
	t.Parallel()
	head := "name: g\nagents: {a: {endpoint: 'http://a'}}\ndefaults: {timeout: 1s}\nsteps:\n"
	for name, c := range map[string]struct{ steps, want string }{
		"unknown": {"  - {name: s, agent: a}\n  - {name: t, agent: a, needs: [s, nope]}\n",
			`g.yaml:6: steps[1].needs[1]: unknown step "nope": needs names steps of this workflow`},
		"itself": {"  - {name: s, agent: a, needs: [s]}\n", `g.yaml:5: steps[0].needs[0]: step "s" needs itself`},
		"twice":  {"  - {name: s, agent: a}\n  - {name: t, agent: a, needs: [s, s]}\n", `g.yaml:6: steps[1].needs[1]: step "s" is named twice`},
		"cycle": {"  - {name: s, agent: a, needs: [u]}\n  - {name: t, agent: a, needs: [s]}\n  - {name: u, agent: a, needs: [t]}\n",
			`g.yaml:5: steps[0].needs: steps s → t → u → s need each other in a cycle: none of them could ever start`},
		"unreachable": {"  - {name: s, agent: a, needs: [t]}\n  - {name: t, agent: a, needs: [s]}\n  - {name: u, agent: a}\n",
			`g.yaml:7: steps[2].needs: step "u" needs a step that can never run (a cycle): it is unreachable`},
		"forEach on a wait": {"  - {name: s, agent: a}\n  - {name: w, wait: {event: e}, forEach: items}\n",
			`g.yaml:6: steps[1].forEach: step "w" waits or sleeps: only a step that calls an agent runs per item`},
		"forEach not a field": {"  - {name: s, agent: a, forEach: '.items[]'}\n", `g.yaml:5: steps[0].forEach: ".items[]": name an array field of the order (items), or give a jq path to one (.booking.passengers, .legs[0].seats)`},
	} {
		_, err := workflow.ParseFile("g.yaml", []byte(head+c.steps), workflow.Options{})
		require.Contains(t, problems(err), c.want, name)
	}
	many := head
	for i := range workflow.MaxSteps + 1 {
		many += "  - {name: s" + strings.Repeat("x", i) + ", agent: a}\n"
	}
	_, err := workflow.ParseFile("g.yaml", []byte(many), workflow.Options{})
	require.Contains(t, problems(err), "g.yaml:4: steps: 51 steps: a workflow has at most 50")
	records := head
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		records += "  - {name: " + n + ", agent: a, forEach: items, undo: {name: u" + n + "}}\n"
	}
	_, err = workflow.ParseFile("g.yaml", []byte(records), workflow.Options{})
	require.Contains(t, problems(err), "g.yaml:4: steps: up to 1000 records (steps, items and undo actions): an order has at most 400")
}

// A file without needs keeps its version: the new fields are left out of
// what the version hashes when unset.
func TestNeedsLeaveALinearWorkflowsVersionAlone(t *testing.T) {
	t.Parallel()
	b, err := workflow.ExampleFile(workflow.OrderWorkflow)
	require.NoError(t, err)
	plain, err := workflow.ParseFile("o.yaml", b, workflow.Options{})
	require.NoError(t, err)
	explicit, err := workflow.ParseFile("o.yaml", []byte(strings.Replace(string(b), "  - name: charge-payment\n",
		"  - name: charge-payment\n    needs: [reserve-inventory]\n", 1)), workflow.Options{})
	require.NoError(t, err)
	require.True(t, explicit.Linear(), "needing the step before is the default made explicit")
	require.NotEqual(t, plain.Version, explicit.Version, "but the file says something else, so its version differs")
	require.Equal(t, plain.Version, workflow.MustExample(workflow.OrderWorkflow).Version)
}

// An order a forEach step cannot run over is refused with the reason: not
// an object, its field missing or not an array, no items, or more than
// MaxForEachItems; an order of 1 to MaxForEachItems items counts them.
func TestItemsRefusesAnOrderAForEachCannotRun(t *testing.T) {
	t.Parallel()
	d := workflow.MustExample(workflow.ParallelWorkflow)
	many := "[" + strings.TrimSuffix(strings.Repeat(`{"sku":"A"},`, workflow.MaxForEachItems+1), ",") + "]"
	for order, want := range map[string]string{
		`[1,2]`:                  "the order is not a JSON object",
		`{"orderId":"o-1"}`:      `runs once per item of the order's "items", which is not an array`,
		`{"items":{"sku":"A"}}`:  `runs once per item of the order's "items", which is not an array`,
		`{"items":[]}`:           `"items": 0 items, want 1 to 100`,
		`{"items":` + many + `}`: `"items": 101 items, want 1 to 100`,
	} {
		_, err := d.Items([]byte(order))
		require.ErrorContains(t, err, want, order)
	}
	n, err := d.Items([]byte(`{"items":[{"sku":"A"},{"sku":"B"}]}`))
	require.NoError(t, err)
	for i, st := range d.Steps {
		if st.ForEach != "" {
			require.Equal(t, 2, n[i], st.Name)
		}
	}
	require.Len(t, n, 1, "one forEach step")
	item, err := d.Item([]byte(`{"items":[{"sku":"A"}]}`), 4, 1)
	require.NoError(t, err)
	require.JSONEq(t, `{"sku":"A"}`, string(item))
	_, err = d.Item([]byte(`{"items":[{"sku":"A"}]}`), 4, 2)
	require.ErrorContains(t, err, `step pack-item: the order has no item 2 in "items"`)
}

// Two steps that run per item, both ready when the charge is done: however
// many records one completion makes ready, the order is taken (the write
// names its records whole when naming their fields would pass 4 KB:
// statestore's TestLimits runs two steps of 100 items made ready at once).
func TestItemsTakesAnyNumberOfRecordsReadyAtOnce(t *testing.T) {
	t.Parallel()
	d := workflow.MustExample(workflow.ParallelWorkflow)
	label := d.Steps[4]
	label.Name, label.Undo, label.Needs = "label-item", nil, []string{"charge-payment"}
	d.Steps = append(d.Steps[:5:5], label, d.Steps[5])
	d.Steps[6].Needs = []string{"pack-item", "label-item"}
	order := []byte(`{"items":[` + strings.TrimSuffix(strings.Repeat(`{"sku":"A"},`, workflow.MaxForEachItems), ",") + `]}`)
	items, err := d.Items(order)
	require.NoError(t, err, "two steps of 100 items each, ready at once")
	require.Equal(t, map[int]int{4: workflow.MaxForEachItems, 5: workflow.MaxForEachItems}, items)
}
