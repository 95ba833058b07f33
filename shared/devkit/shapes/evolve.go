package shapes

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Changes are the ways Evolve makes a workflow's next version, as a team
// changes a workflow in flight: a timeout raised, an undo action changed
// (for the orders that already ran its step too, or not), a step added
// (before the others, declared skipped for the orders past it, or at the
// end), a step renamed, the last step removed (kept by the orders that
// completed it: migrate.keep), a step per item added, the order's data
// rewritten, a branch added (a step that needs nothing and nothing needs).
var Changes = append(slices.Clip(FirstChanges), "step added per item", "data rewritten", "branch added")

// FirstChanges are the changes Evolve made before it added steps per item
// and rewrote data: a regression seed found then replays with them.
var FirstChanges = []string{"timeout raised", "undo changed", "undo renewed", "step added first", "step added last", "step renamed",
	"last step removed"}

// Evolve is d's next version by one of Changes at random (what says which),
// with the migrate: plan it needs; its new steps call the agents d calls.
// ok is false when the change chosen does not apply to d (no undo to
// change, one step only to remove).
func Evolve(rng *rand.Rand, d workflow.Definition) (next workflow.Definition, what string, ok bool) {
	return EvolveBy(rng, d, Changes)
}

// EvolveBy is Evolve by one of changes.
func EvolveBy(rng *rand.Rand, d workflow.Definition, changes []string) (next workflow.Definition, what string, ok bool) {
	what = changes[rng.IntN(len(changes))]
	next = d
	next.Steps = slices.Clone(d.Steps)
	next.Migrate = workflow.Migration{}
	agents := d.Agents()
	calls := []int{}
	undos := []int{}
	for i, st := range d.Steps {
		if st.Kind() == workflow.KindAgent && !st.Async {
			calls = append(calls, i)
		}
		if st.Undo != nil {
			undos = append(undos, i)
		}
	}
	switch what {
	case "timeout raised":
		if len(calls) == 0 {
			return next, what, false
		}
		i := calls[rng.IntN(len(calls))]
		next.Steps[i].Timeout *= 2
	case "undo changed", "undo renewed":
		if len(undos) == 0 {
			return next, what, false
		}
		i := undos[rng.IntN(len(undos))]
		u := *d.Steps[i].Undo
		u.Name += "-v2"
		next.Steps[i].Undo = &u
		if what == "undo renewed" {
			next.Migrate.NewUndo = []string{d.Steps[i].Name}
		}
	case "step added first", "step added last":
		if len(agents) == 0 {
			return next, what, false
		}
		st := workflow.Step{Action: workflow.Action{Name: "added", Agent: agents[rng.IntN(len(agents))], Timeout: d.Steps[0].Timeout,
			MaxFailures: 2, RetryBackoff: d.Steps[0].RetryBackoff}, NoUndo: true}
		if st.Timeout == 0 {
			st.Timeout = workflow.DefaultAgentTimeout
		}
		if what == "step added last" {
			next.Steps = append(next.Steps, st)
			break
		}
		// First, needing nothing: the step that was first now needs it
		// (the step before it), and an order past it skips it.
		st.NoNeeds = true
		next.Steps = append([]workflow.Step{st}, next.Steps...)
		next.Migrate.Skip = []string{"added"}
	case "step renamed":
		i := rng.IntN(len(d.Steps))
		old, renamed := d.Steps[i].Name, d.Steps[i].Name+"-renamed"
		next.Steps[i].Name = renamed
		for j := range next.Steps {
			if slices.Contains(next.Steps[j].Needs, old) {
				needs := slices.Clone(next.Steps[j].Needs)
				needs[slices.Index(needs, old)] = renamed
				next.Steps[j].Needs = needs
			}
		}
		next.Migrate.Rename = map[string]string{old: renamed}
	case "last step removed":
		if len(d.Steps) < 2 {
			return next, what, false
		}
		// An order that completed it (one branch of several ended) keeps
		// it, for its undo.
		next.Steps = next.Steps[:len(next.Steps)-1]
		next.Migrate.Keep = []string{d.Steps[len(d.Steps)-1].Name}
	case "step added per item":
		if len(agents) == 0 || slices.ContainsFunc(d.Steps, func(s workflow.Step) bool { return s.ForEach != "" }) {
			return next, what, false
		}
		// At the end, once per item of the order's items: a move counts
		// them from the order's data.
		next.Steps = append(next.Steps, workflow.Step{Action: workflow.Action{Name: "added-per-item", Agent: agents[rng.IntN(len(agents))],
			Timeout: cmp.Or(d.Steps[0].Timeout, workflow.DefaultAgentTimeout), MaxFailures: 2, RetryBackoff: d.Steps[0].RetryBackoff},
			NoUndo: true, ForEach: "items"})
	case "branch added":
		if len(agents) == 0 {
			return next, what, false
		}
		// Beside the others from the start: an order moved runs it at once,
		// whatever it did.
		next.Steps = append(next.Steps, workflow.Step{Action: workflow.Action{Name: "branch", Agent: agents[rng.IntN(len(agents))],
			Timeout: cmp.Or(d.Steps[0].Timeout, workflow.DefaultAgentTimeout), MaxFailures: 2, RetryBackoff: d.Steps[0].RetryBackoff},
			NoUndo: true, NoNeeds: true})
	case "data rewritten":
		// The order's data gains a member, and the result of a call its
		// steps kept is wrapped: the steps after the move, and the undo of
		// that call, read them rewritten.
		last := &next.Steps[len(next.Steps)-1]
		last.Timeout = cmp.Or(last.Timeout, workflow.DefaultAgentTimeout) + time.Second // a version of its own
		next.Migrate.Transform.Order = `.rewritten = true`
		if len(calls) > 0 {
			next.Migrate.Transform.Results = map[string]string{d.Steps[calls[rng.IntN(len(calls))]].Name: `{was: .}`}
		}
	}
	next.Version = version(next)
	if err := next.Compile(); err != nil {
		panic(fmt.Sprintf("shapes: %s of %s: %v", what, d.Name, err)) // a defect of the generator's
	}
	return next, what, true
}

// version is d's version, as Random gives one: a hash of what it runs.
func version(d workflow.Definition) string {
	b, _ := json.Marshal(struct {
		Name  string
		Steps []workflow.Step
	}{d.Name, d.Steps})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
