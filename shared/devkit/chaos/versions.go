package chaos

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// The mutations that make a workflow's second version, as a team edits its
// file: a step given more time, an undo replaced by another action of the
// same service, a step added (before steps an order may have started, then
// listed under migrate.skip), a step renamed (under migrate.rename), a step
// removed (kept by the orders that completed it, under migrate.keep), a
// step given more time with the orders' data rewritten as they move, and
// a result their steps kept (under migrate.transform).
const (
	mutateTimeout = "timeout raised"
	mutateUndo    = "undo changed"
	mutateAdd     = "step added"
	mutateRename  = "step renamed"
	mutateRemove  = "step removed"
	mutateRewrite = "data rewritten"
)

// mutations are every kind, in the order a seed's permutation picks from.
var mutations = []string{mutateTimeout, mutateUndo, mutateAdd, mutateRename, mutateRemove, mutateRewrite}

// version is a second version of one of the run's workflows, which the
// run's migrator moves orders to, and some back from.
type version struct {
	Kind string // one of mutations
	What string // what changed, in words
	// First is the workflow as the stack runs it (the plan's Settings
	// applied); Second the mutated one as the stack would run it, with its
	// plan forward (Second.Migrate); Back is First with the plan back (the
	// renames reversed): the version an order moved back runs.
	First, Second, Back workflow.Definition
	// aliases pairs the names one action has in either version (a renamed
	// step's, a changed undo's): its effects, in the remote ledger, are
	// under one or the other.
	aliases map[string]string
}

// names are the names action name may have, in either version.
func (v version) names(name string) []string {
	if a, ok := v.aliases[name]; ok {
		return []string{name, a}
	}
	return []string{name}
}

// versions are the second versions of the run's workflows, by workflow:
// every one but the limit workflow (whose orders run their 16 MB through
// untouched, as the cancels leave them). The seed chooses each one's
// mutation (in turn from a kind it chooses, the kinds used least so far
// first, so that a run's workflows have every kind; the next if one does
// not apply) and how it mutates it.
func (p Plan) versions() map[string]version {
	out := map[string]version{}
	turn := int(p.Seed % uint64(len(mutations)))
	used := map[string]int{}
	for _, d := range p.workflows().Definitions() {
		if d.Name == LimitWorkflow {
			continue
		}
		rng := rand.New(rand.NewPCG(p.Seed, nameHash(d.Name)^0x5ec0d))
		// The kinds in turn, the least used so far first: a kind that did
		// not apply to the workflows whose turn it was comes first after.
		kinds := make([]string, len(mutations))
		for k := range mutations {
			kinds[k] = mutations[(turn+k)%len(mutations)]
		}
		slices.SortStableFunc(kinds, func(a, b string) int { return used[a] - used[b] })
		for _, kind := range kinds {
			if v, ok := newVersion(rng, d, p.Settings, kind); ok {
				out[d.Name] = v
				used[kind]++
				break
			}
		}
		turn++
	}
	return out
}

func nameHash(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// newVersion makes the second version of file (a workflow as its file says,
// before a deployment's overrides) by mutation kind, both versions with the
// overrides s applied as the stack applies them (Plan.stackWorkflows); false
// if the mutation does not apply to it (no undo to change, no step whose
// timeout s leaves alone, nothing to rename).
func newVersion(rng *rand.Rand, file workflow.Definition, s workflow.Settings, kind string) (version, bool) {
	d := cloneDefinition(file)
	v := version{Kind: kind, aliases: map[string]string{}}
	var ok bool
	switch kind {
	case mutateTimeout:
		ok = raiseTimeout(rng, &d, s, &v)
	case mutateUndo:
		ok = changeUndo(rng, &d, &v)
	case mutateAdd:
		ok = addStep(rng, &d, &v)
	case mutateRename:
		ok = renameStep(rng, &d, &v)
	case mutateRemove:
		ok = removeStep(rng, &d, &v)
	case mutateRewrite:
		ok = rewriteData(rng, &d, &v)
	}
	if !ok {
		return version{}, false
	}
	v.First = file.With(s)
	// The version is a hash of what the definition runs (Definition.With
	// recomputes it: an override that changes nothing, the pickup timeout
	// it has, makes it recompute it whatever s is).
	second := d.With(s)
	second = second.With(workflow.Settings{PickupTimeout: second.PickupTimeout})
	second.Migrate = d.Migrate
	if err := second.Compile(); err != nil || second.Version == v.First.Version {
		return version{}, false
	}
	v.Second = second
	v.Back = v.First
	v.Back.Migrate = workflow.Migration{}
	if len(d.Migrate.Rename) > 0 {
		v.Back.Migrate.Rename = map[string]string{}
		for from, to := range d.Migrate.Rename {
			v.Back.Migrate.Rename[to] = from
		}
	}
	return v, true
}

// cloneDefinition is d with steps of its own, safe to change.
func cloneDefinition(d workflow.Definition) workflow.Definition {
	d.Steps = slices.Clone(d.Steps)
	for i := range d.Steps {
		st := &d.Steps[i]
		if st.Undo != nil {
			u := *st.Undo
			st.Undo = &u
		}
		if st.Wait != nil {
			w := *st.Wait
			st.Wait = &w
		}
		if st.Sleep != nil {
			sl := *st.Sleep
			st.Sleep = &sl
		}
		st.Needs = slices.Clone(st.Needs)
	}
	d.AgentSpecs = maps.Clone(d.AgentSpecs)
	d.Migrate = workflow.Migration{}
	return d
}

// raiseTimeout gives a step half as long again: a call's timeout that the
// overrides s leave alone (an async call's, or any with no StepTimeout), a
// wait's, or a timer's time.
func raiseTimeout(rng *rand.Rand, d *workflow.Definition, s workflow.Settings, v *version) bool {
	var cands []int
	for i, st := range d.Steps {
		switch st.Kind() {
		case workflow.KindAgent:
			if s.StepTimeout == 0 || st.Async {
				cands = append(cands, i)
			}
		case workflow.KindEvent:
			if st.Wait.Timeout > 0 {
				cands = append(cands, i)
			}
		case workflow.KindTimer:
			if st.Sleep.For > 0 {
				cands = append(cands, i)
			}
		}
	}
	if len(cands) == 0 {
		return false
	}
	st := &d.Steps[cands[rng.IntN(len(cands))]]
	raise := func(t time.Duration) time.Duration { return t + max(t/2, time.Second) }
	switch {
	case st.Wait != nil:
		v.What = fmt.Sprintf("%s waits %s, not %s", st.Name, raise(st.Wait.Timeout), st.Wait.Timeout)
		st.Wait.Timeout = raise(st.Wait.Timeout)
		return true
	case st.Sleep != nil:
		v.What = fmt.Sprintf("%s sleeps %s, not %s", st.Name, raise(st.Sleep.For), st.Sleep.For)
		st.Sleep.For = raise(st.Sleep.For)
		return true
	}
	v.What = fmt.Sprintf("%s's timeout %s, not %s", st.Name, raise(st.Timeout), st.Timeout)
	st.Timeout = raise(st.Timeout)
	return true
}

// changeUndo replaces a step's undo with another action of the same agent,
// under another name; half the time the plan gives it to the orders that
// ran the step already (migrate.newUndo), else they keep theirs.
func changeUndo(rng *rand.Rand, d *workflow.Definition, v *version) bool {
	var cands []int
	for i, st := range d.Steps {
		if st.Undo != nil {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return false
	}
	st := &d.Steps[cands[rng.IntN(len(cands))]]
	old := *st.Undo
	u := old
	u.Name = uniqueName(*d, old.Name+"-v2")
	u.Do = old.DoName() + "-v2"
	st.Undo = &u
	v.aliases[old.Name], v.aliases[u.Name] = u.Name, old.Name
	v.What = fmt.Sprintf("%s undone by %s (%s/%s), not %s", st.Name, u.Name, u.Agent, u.Do, old.Name)
	if rng.IntN(2) == 0 {
		d.Migrate.NewUndo = []string{st.Name}
		v.What += ", for the orders that ran it too"
	}
	return true
}

// addStep adds a step calling one of the workflow's agents (its queue
// exists), with undo: none or an undo, anywhere: before the last step it is
// listed under migrate.skip, for the orders past it.
func addStep(rng *rand.Rand, d *workflow.Definition, v *version) bool {
	agents := d.Agents()
	if len(agents) == 0 {
		return false
	}
	agent := agents[rng.IntN(len(agents))]
	a := workflow.Action{Agent: agent, Timeout: 3 * time.Second, MaxFailures: 3, RetryBackoff: 500 * time.Millisecond}
	for _, st := range d.Steps { // its settings as a call of the workflow's has them
		if st.Kind() == workflow.KindAgent && !st.Async {
			a.Timeout, a.MaxFailures, a.RetryBackoff = st.Timeout, st.MaxFailures, st.RetryBackoff
			break
		}
	}
	a.Name = uniqueName(*d, "added-check")
	st := workflow.Step{Action: a}
	what := "undo: none"
	if rng.IntN(2) == 0 {
		st.NoUndo = true
	} else {
		u := a
		u.Name = uniqueName(*d, "undo-added-check")
		st.Undo = &u
		what = "undone by " + u.Name
	}
	at := rng.IntN(len(d.Steps) + 1)
	d.Steps = slices.Insert(d.Steps, at, st)
	v.What = fmt.Sprintf("%s (%s, %s) added at step %d of %d", a.Name, agent, what, at+1, len(d.Steps))
	if at < len(d.Steps)-1 {
		d.Migrate.Skip = []string{a.Name}
		v.What += ", skipped by the orders past it"
	}
	return true
}

// namedBy reports whether an expression of d names name (an input reading
// its result, say).
func namedBy(d workflow.Definition, name string) bool {
	var exprs []string
	for _, st := range d.Steps {
		exprs = append(exprs, st.Input, st.ForEach)
		if st.Undo != nil {
			exprs = append(exprs, st.Undo.Input)
		}
		if st.Sleep != nil {
			exprs = append(exprs, st.Sleep.Until)
		}
	}
	return strings.Contains(strings.Join(exprs, "\n"), name)
}

// renameStep renames a step that calls an agent (its service's action kept)
// and that no expression of the workflow names (an input reading its
// result), under migrate.rename.
func renameStep(rng *rand.Rand, d *workflow.Definition, v *version) bool {
	var cands []int
	for i, st := range d.Steps {
		if st.Kind() == workflow.KindAgent && !namedBy(*d, st.Name) {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return false
	}
	st := &d.Steps[cands[rng.IntN(len(cands))]]
	old := st.Name
	st.Do, st.Name = st.DoName(), uniqueName(*d, old+"-renamed")
	for i := range d.Steps {
		for k, n := range d.Steps[i].Needs {
			if n == old {
				d.Steps[i].Needs[k] = st.Name
			}
		}
	}
	d.Migrate.Rename = map[string]string{old: st.Name}
	v.aliases[old], v.aliases[st.Name] = st.Name, old
	v.What = fmt.Sprintf("%s renamed %s", old, st.Name)
	return true
}

// uniqueName is base, or base with a number, not the name of any step or
// undo action of d.
func uniqueName(d workflow.Definition, base string) string {
	taken := map[string]bool{}
	for _, st := range d.Steps {
		taken[st.Name] = true
		if st.Undo != nil {
			taken[st.Undo.Name] = true
		}
	}
	name := base
	for n := 2; taken[name]; n++ {
		name = fmt.Sprintf("%s-%d", base, n)
	}
	return name
}

// removeStep removes a step that calls an agent, has an undo and that no
// expression names (one that others need, if any: an order at them has
// completed it), the steps that needed it needing what it needed: an order
// that completed it keeps it, for its undo (migrate.keep); one that had
// not started it leaves it.
func removeStep(rng *rand.Rand, d *workflow.Definition, v *version) bool {
	var cands, needed []int
	for i, st := range d.Steps {
		if st.Kind() == workflow.KindAgent && st.Undo != nil && st.ForEach == "" && !namedBy(*d, st.Name) {
			cands = append(cands, i)
			if len(d.Dependents(i)) > 0 {
				needed = append(needed, i)
			}
		}
	}
	if len(needed) > 0 {
		cands = needed
	}
	if len(cands) == 0 || len(d.Steps) < 2 {
		return false
	}
	i := cands[rng.IntN(len(cands))]
	name := d.Steps[i].Name
	for _, j := range d.Dependents(i) {
		var needs []string
		for _, n := range append(d.Needs(j), d.Needs(i)...) {
			if n != i && !slices.Contains(needs, d.Steps[n].Name) {
				needs = append(needs, d.Steps[n].Name)
			}
		}
		d.Steps[j].Needs, d.Steps[j].NoNeeds = needs, len(needs) == 0
	}
	d.Steps = slices.Delete(d.Steps, i, i+1)
	d.Migrate.Keep = []string{name}
	v.What = fmt.Sprintf("%s removed, kept by the orders that completed it", name)
	return true
}

// rewriteData raises the workflow's result limit by 1 KiB (a version of
// its own whatever its steps: the overrides leave it alone), and the plan
// rewrites the data of the orders it moves (their items, as JSON again:
// the same values, other bytes, so that a resend of an order as first
// accepted is a duplicate still) and the result of a call no expression
// reads and nothing undoes (wrapped), each kept again as it was: sealed,
// in the bucket if large.
func rewriteData(rng *rand.Rand, d *workflow.Definition, v *version) bool {
	if d.Limit()+1024 > workflow.MaxResultLimit {
		return false
	}
	d.ResultLimit = d.Limit() + 1024
	d.Migrate.Transform.Order = `if has("items") then .items |= map(.) else . end`
	v.What = fmt.Sprintf("a result limit of %d bytes, the orders' data rewritten", d.ResultLimit)
	var cands []string
	for _, st := range d.Steps {
		if st.Kind() == workflow.KindAgent && st.Undo == nil && st.ForEach == "" && !namedBy(*d, st.Name) {
			cands = append(cands, st.Name)
		}
	}
	if len(cands) > 0 {
		name := cands[rng.IntN(len(cands))]
		d.Migrate.Transform.Results = map[string]string{name: `{was: .}`}
		v.What += " and " + name + "'s result"
	}
	return true
}
