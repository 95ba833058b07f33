package statestore

import (
	"context"
	"maps"
	"slices"

	"github.com/sas-go/sas/shared/workflow"
)

// VersionCount is one version of a workflow that orders in flight run, and
// how many: what sasctl workflow versions prints and the Supervisor's
// census alerts on.
type VersionCount struct {
	Workflow string `json:"workflow"`
	Version  string `json:"version"`
	// Base, for a version of its own that moved orders run (keeping the
	// undo of the version that ran a step): the version it is a form of.
	Base   string                 `json:"base,omitempty"`
	Orders int                    `json:"orders"`
	States map[workflow.State]int `json:"states"`
	// Deployed says whether the deployment runs it, or its Base
	// (workflow.Set.Runs); nil: the deployment's workflows are not known.
	Deployed *bool `json:"deployed,omitempty"`
	// Examples are some of its orders (at most MaxVersionExamples, the
	// least ids seen), to look at (sasctl status) or move.
	Examples []string `json:"examples"`
}

// MaxVersionExamples bounds the orders a VersionCount names.
const MaxVersionExamples = 3

// Tally counts orders in flight by workflow and version: the one count
// sasctl workflow versions and the Supervisor's census make.
type Tally map[string]*VersionCount

// Add counts tasks.
func (t Tally) Add(tasks []Task) {
	for _, task := range tasks {
		k := task.Workflow + "@" + task.Version
		v := t[k]
		if v == nil {
			v = &VersionCount{Workflow: task.Workflow, Version: task.Version, States: map[workflow.State]int{}}
			t[k] = v
		}
		v.Orders++
		v.States[task.State]++
		if len(v.Examples) < MaxVersionExamples || task.OrderID < v.Examples[len(v.Examples)-1] {
			v.Examples = append(v.Examples, task.OrderID)
			slices.Sort(v.Examples)
			v.Examples = v.Examples[:min(len(v.Examples), MaxVersionExamples)]
		}
	}
}

// Orders is how many orders t counted.
func (t Tally) Orders() int {
	n := 0
	for _, v := range t {
		n += v.Orders
	}
	return n
}

// Counts are the tally's versions, by workflow then version.
func (t Tally) Counts() []VersionCount {
	out := make([]VersionCount, 0, len(t))
	for _, k := range slices.Sorted(maps.Keys(t)) {
		out = append(out, *t[k])
	}
	return out
}

// Judge fills in each version's Base (from its stored definition: an order
// it names is read if none is stored) and, when set is not zero, whether
// the deployment runs it (workflow.Set.Runs): the rule sasctl workflow
// versions and the Supervisor's census share. A definition that cannot be
// read leaves Base empty: the version is judged by itself.
func (s *Store) Judge(ctx context.Context, counts []VersionCount, set workflow.Set) {
	for i := range counts {
		v := &counts[i]
		if len(v.Examples) > 0 {
			if d, err := s.VersionDefinition(ctx, v.Examples[0], v.Workflow, v.Version); err == nil {
				v.Base = d.Base
			}
		}
		if !set.IsZero() {
			deployed := set.Runs(v.Workflow, v.Version, v.Base)
			v.Deployed = &deployed
		}
	}
}
