package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	deploy "github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/sastest"
	"github.com/sas-go/sas/shared/workflow"
)

// What workflow show says the engine undoes after each step's refusal is
// what the engine does: every example workflow, the pivot workflow and
// generated shapes (lines, branches, joins, a step per item), each step
// refused in turn in an order run by the product's rules (sastest) with
// every other call answered at once. A wait is kept for its event.
func TestWorkflowShowUndoIsTheEngines(t *testing.T) {
	t.Parallel()
	compared, ends := 0, map[string]int{}
	for _, d := range comparedWorkflows(t) {
		v := newShowView(d)
		require.NotEmpty(t, v.Refusals, d.Name)
		for _, want := range v.Refusals {
			got := runRefused(t, d, want.Step)
			require.Equal(t, want, got, "workflow %s (%s), step %s refused", d.Name, d.Version, want.Step)
			compared++
			ends[want.Ends]++
		}
	}
	require.Positive(t, ends[string(workflow.CompensationFailed)], "some refusal stops at a step that cannot be undone")
	t.Logf("%d refusals compared; the order ended %v", compared, ends)
}

// comparedWorkflows are the example workflows, the pivot workflow and a
// few generated shapes of agent calls (no timer, whose time passing lets
// other branches run first, and no async call, answered by a callback).
func comparedWorkflows(t *testing.T) []workflow.Definition {
	t.Helper()
	var out []workflow.Definition
	for _, name := range workflow.Examples() {
		out = append(out, workflow.MustExample(name))
	}
	pivot, err := workflow.ParseFile("pivot.yaml", []byte(pivotFlow), workflow.Options{})
	require.NoError(t, err)
	o := shapes.Defaults()
	o.MaxSteps, o.Waits, o.Timers, o.Async = 7, false, false, false
	out = append(out, pivot, shapes.Branches(o))
	rng := rand.New(rand.NewPCG(3, 5))
	for n := range 24 {
		out = append(out, shapes.Random(rng, fmt.Sprintf("shape-%d", n), o))
	}
	return out
}

// runRefused runs an order of d whose step named step is refused for good
// by its service, every other call answered at once, and says what the
// engine did as workflow show says it: the undo actions done, in order, and
// the order's end (held, then undone, if the step holds on failure).
func runRefused(t *testing.T, d workflow.Definition, step string) refusalView {
	t.Helper()
	k := sastest.NewOf(t, d)
	for _, agent := range d.Agents() {
		k.Handle(agent, func(c sastest.Call) sastest.Answer {
			if name, _, _ := strings.Cut(c.Step, "#"); !c.Undo && name == step {
				return sastest.Refuse("refused by the test")
			}
			return sastest.OK(nil)
		})
	}
	o := k.Submit(`{"orderId":"o-1","customerId":"c-1","items":[{"sku":"A","quantity":1,"unitPriceCents":100}]}`)
	for _, st := range d.Steps {
		if st.Wait != nil {
			var from []sastest.SignalOption
			if len(st.Wait.Senders) > 0 { // a wait that takes its event from named senders only
				from = append(from, sastest.From(st.Wait.Senders[0]))
			}
			require.NoError(t, k.Signal("o-1", st.Wait.Event, map[string]any{"amountCents": 100, "by": "ana"}, from...), "kept for its wait")
		}
	}
	k.Run()
	got := refusalView{Step: step, Undo: []string{}}
	if o.State() == workflow.Held {
		got.HeldFor = deploy.ShortDuration(d.Steps[d.Index(step)].HoldFor)
		require.NoError(t, k.Undo("o-1"))
		k.Run()
	}
	for _, u := range o.Undone() {
		got.Undo = append(got.Undo, undoName(u))
	}
	got.Ends = string(o.State())
	if o.State() == workflow.CompensationFailed {
		got.Pivot = pivotOf(d, k, o)
	}
	return got
}

// undoName is an undo record's name as workflow show prints it: an item's
// (unpack-item#1) stands for every item (unpack-item (each item)).
func undoName(record string) string {
	if name, item, _ := strings.Cut(record, "#"); item != "" {
		return name + " (each item)"
	}
	return record
}

// pivotOf is the step the undoing of o stopped at: of the steps done and
// not undone, the one done last (the engine undoes the latest first; each
// call is answered at once, so the calls are in the order they were done).
func pivotOf(d workflow.Definition, k *sastest.Kit, o *sastest.Order) string {
	pivot := ""
	for _, c := range k.Calls("") {
		name, item, _ := strings.Cut(c.Step, "#")
		s, _ := o.Step(c.Step)
		if c.Undo || s.State != workflow.Processed {
			continue
		}
		if u := d.Steps[d.Index(name)].Undo; u == nil || !slices.Contains(o.Undone(), strings.TrimSuffix(u.Name+"#"+item, "#")) {
			pivot = name
		}
	}
	return pivot
}
