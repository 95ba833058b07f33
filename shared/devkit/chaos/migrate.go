package chaos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// MigrationFigures are what the run's migrator did: an operator moving
// orders in flight to their workflow's second version (Plan.Migrate), at
// random moments, by the product's own path (operator.MigrateOrder), and
// some back.
type MigrationFigures struct {
	Orders    int `json:"orders"`    // orders the operator set out to move
	Tried     int `json:"tried"`     // moves tried, forward and back, tries again included
	TriedBack int `json:"triedBack"` // of those, moves back
	Moved     int `json:"moved"`     // orders moved to their workflow's second version
	MovedBack int `json:"movedBack"` // of those, moved back to the first
	// Unstored counts the tries made before Submission stored the order
	// (its moment came while it waited in the orders queue): tried again
	// a moment later, not counted in Tried.
	Unstored int `json:"unstored"`
	// Refused counts the refused tries by their first reason (names and
	// numbers left out): a refusal is the rules saying not now (an attempt
	// at work, an order undone or ended), or not this order.
	Refused map[string]int `json:"refused"`
	// Errors counts the tries that failed otherwise, by their error.
	Errors map[string]int `json:"errors,omitempty"`
	// ByKind counts the moves (either way) by the mutation that made the
	// version moved to or from.
	ByKind map[string]int `json:"byKind"`
	// Skipped are the new steps moved orders recorded skipped (past them);
	// KeptUndo the moves after which the order keeps the undo of the
	// version that ran a step (a version of its own).
	Skipped  int `json:"skipped"`
	KeptUndo int `json:"keptUndo"`
	// Versions says, by workflow, how its second version differs.
	Versions map[string]string `json:"versions"`
}

// migrateTries is how often the migrator tries a move that was refused,
// a moment apart, before it leaves the order be.
const migrateTries = 6

// maxUnstored bounds the tries of a move made before its order is stored:
// a minute and more, for an orders queue backlogged at the run's start.
const maxUnstored = 60

// moveBackShare is the share of the orders moved that the migrator moves
// back to their first version later.
const moveBackShare = 0.3

// moveWindow is when a move was made: between its try's start and its end.
type moveWindow struct{ From, To time.Time }

// migrator moves the plan's share of the orders to their workflow's second
// version, each at its random moment, and some back later.
type migrator struct {
	plan     Plan
	op       *operator.Operator
	versions map[string]version
	wg       sync.WaitGroup
	mu       sync.Mutex
	fig      MigrationFigures
	moves    map[string][]moveWindow // order → when it moved, either way
}

// newMigrator is the migrator of a run on stack: an operator over the
// stack's endpoint, as sasctl migrate makes one (the plan's pickup timeout
// its pickup, as the stack's).
func newMigrator(stack *localrun.Stack, p Plan) *migrator {
	op := operator.New(stack.Deployment.Clients, stack.Topology()).WithRetention(stack.Deployment.Config.Retention())
	if p.Settings.PickupTimeout > 0 {
		op.PickupTimeout = p.Settings.PickupTimeout
	}
	m := &migrator{plan: p, op: op, versions: p.versions(), moves: map[string][]moveWindow{},
		fig: MigrationFigures{Refused: map[string]int{}, Errors: map[string]int{}, ByKind: map[string]int{}, Versions: map[string]string{}}}
	for name, v := range m.versions {
		m.fig.Versions[name] = v.Kind + ": " + v.What
	}
	return m
}

// schedule moves, for the plan's share of the orders (none at the limits,
// which run their 16 MB through untouched), the order at a random point up
// to MigrateWithin after now, tried again a few times if refused; some of
// those moved go back later.
func (m *migrator) schedule(ctx context.Context, ids []string) {
	p := m.plan
	for _, id := range ids {
		if remotesim.Mix(p.Seed, "migrate", id) >= p.Migrate || p.limits[id] {
			continue
		}
		v, ok := m.versions[p.workflowOf(id)]
		if !ok {
			continue
		}
		m.mu.Lock()
		m.fig.Orders++
		m.mu.Unlock()
		at := time.Duration(remotesim.Mix(p.Seed, "migrate-at", id) * float64(p.MigrateWithin))
		back := remotesim.Mix(p.Seed, "migrate-back", id) < moveBackShare
		m.wg.Go(func() {
			if !sleepCtx(ctx, at) || !m.move(ctx, id, v, false) || !back {
				return
			}
			if sleepCtx(ctx, m.pause(id, "back", 0)+time.Duration(remotesim.Mix(p.Seed, "migrate-back-at", id)*float64(p.MigrateWithin)/2)) {
				m.move(ctx, id, v, true)
			}
		})
	}
}

// pause is a moment between two tries: 0.3 to 1.3 s.
func (m *migrator) pause(id, way string, try int) time.Duration {
	return 300*time.Millisecond + time.Duration(remotesim.Mix(m.plan.Seed, "migrate-pause", id, way, fmt.Sprint(try))*float64(time.Second))
}

// move moves order id to v's second version (back: to its first), trying
// again a moment later while the rules refuse it for now; it reports
// whether the order moved.
func (m *migrator) move(ctx context.Context, id string, v version, back bool) bool {
	to, way := v.Second, "forward"
	if back {
		to, way = v.Back, "back"
	}
	var failed time.Time // when a try that failed began: its write may have been made, its answer lost
	for try, early := 0, 0; try < migrateTries; {
		pause := m.pause(id, way, try+early)
		if early > 0 {
			pause += time.Second // waiting in a backlogged orders queue: no hurry
		}
		if try+early > 0 && !sleepCtx(ctx, pause) {
			return false
		}
		from := time.Now()
		res, err := m.op.MigrateOrder(ctx, id, to, "chaos", false)
		moved := moveWindow{From: from, To: time.Now()}
		if err != nil && ctx.Err() != nil {
			return false // the run is over
		}
		m.mu.Lock()
		if errors.Is(err, statestore.ErrNotFound) && early < maxUnstored {
			m.fig.Unstored++
			m.mu.Unlock()
			early++ // not stored yet: the same try, a moment later
			continue
		}
		try++
		m.fig.Tried++
		if back {
			m.fig.TriedBack++
		}
		switch {
		case err != nil:
			m.fig.Errors[reasonShape(err.Error())]++
			m.mu.Unlock()
			if failed.IsZero() {
				failed = moved.From
			}
			continue
		case res.Already && failed.IsZero():
			m.mu.Unlock()
			return true // moved by an earlier move: nothing written now
		case res.Moves || res.Already:
			if res.Already { // a try that failed made it: sometime since it began
				moved.From = failed
			}
			if back {
				m.fig.MovedBack++
			} else {
				m.fig.Moved++
			}
			m.fig.ByKind[v.Kind]++
			m.fig.Skipped += len(res.Skipped)
			if res.Base != "" {
				m.fig.KeptUndo++
			}
			m.moves[id] = append(m.moves[id], moved)
			m.mu.Unlock()
			return true
		}
		why := firstReason(res.Why)
		m.fig.Refused[refusalShape(why)]++
		m.mu.Unlock()
		if strings.HasPrefix(why, "it is ") || strings.HasPrefix(why, "it runs workflow") {
			return false // undone, ended or being cancelled: it will not move
		}
	}
	return false
}

func (m *migrator) wait() { m.wg.Wait() }

// figures are the migrator's figures so far.
func (m *migrator) figures() *MigrationFigures {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.fig
	f.Refused, f.Errors, f.ByKind, f.Versions = maps.Clone(f.Refused), maps.Clone(f.Errors), maps.Clone(f.ByKind), maps.Clone(f.Versions)
	return &f
}

// windows are the moves of each order moved, when they were made.
func (m *migrator) windows() map[string][]moveWindow {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]moveWindow, len(m.moves))
	for id, w := range m.moves {
		out[id] = slices.Clone(w)
	}
	return out
}

// firstReason is a refusal's first reason (workflow.NotMovableError joins
// them with "; ").
func firstReason(why string) string {
	first, _, _ := strings.Cut(why, "; ")
	return first
}

// refusalNames are the names in a refusal's reason: of steps and versions,
// and numbers (attempts, counts).
var (
	refusalSteps   = regexp.MustCompile(`\bsteps [^ ]+ and [^ ]+ both become [^ ]+`)
	refusalNames   = regexp.MustCompile(`\b(step|needs|version) [^ ,;:']+`)
	refusalNumbers = regexp.MustCompile(`\b[0-9]+\b`)
)

// refusalShape is a refusal's reason with its names and numbers left out,
// so that refusals of one kind count together.
func refusalShape(why string) string {
	why = refusalSteps.ReplaceAllString(why, "steps … and … both become …")
	why = refusalNames.ReplaceAllStringFunc(why, func(s string) string {
		word, name, _ := strings.Cut(s, " ")
		if name == "this" || name == "…" { // "a step this order started"
			return s
		}
		return word + " …"
	})
	return refusalNumbers.ReplaceAllString(why, "…")
}

// print prints the migrator's figures.
func (f *MigrationFigures) print(row func(string, any)) {
	if f == nil {
		return
	}
	row("orders an operator set out to move to another version", f.Orders)
	row("  moves tried (forward and back, tries again included)", f.Tried)
	row("  of them back to the first version", f.TriedBack)
	row("  tries before the order was stored (tried again, not counted)", f.Unstored)
	row("  orders moved to their workflow's second version", f.Moved)
	row("  orders moved back to the first", f.MovedBack)
	for _, kind := range slices.Sorted(maps.Keys(f.ByKind)) {
		row("  moves whose versions differ by: "+kind, f.ByKind[kind])
	}
	kinds := map[string]int{}
	for _, what := range f.Versions {
		kind, _, _ := strings.Cut(what, ": ")
		kinds[kind]++
	}
	for _, kind := range slices.Sorted(maps.Keys(kinds)) {
		row("  workflows whose second version is: "+kind, kinds[kind])
	}
	row("  new steps moved orders recorded skipped", f.Skipped)
	row("  moves keeping the undo of the version that ran a step", f.KeptUndo)
	for _, why := range slices.Sorted(maps.Keys(f.Refused)) {
		row("  refused: "+clip(why, 90), f.Refused[why])
	}
	for _, why := range slices.Sorted(maps.Keys(f.Errors)) {
		row("  failed: "+clip(why, 90), f.Errors[why])
	}
}

// workflowOf is the workflow the plan runs order id on.
func (p Plan) workflowOf(id string) string {
	switch {
	case p.waits(id):
		return WaitsWorkflow
	case p.flowOrder(id):
		return p.flowShape(id)
	case p.limits[id]:
		return LimitWorkflow
	case p.large(id):
		return LargeWorkflow
	case p.Shapes > 0 && remotesim.Mix(p.Seed, "generated", id) < p.Generated:
		return fmt.Sprintf("shape%d", int(remotesim.Mix(p.Seed, "shape", id)*float64(p.Shapes)))
	case remotesim.Mix(p.Seed, "parallel", id) < p.Parallel:
		return workflow.ParallelWorkflow
	}
	return workflow.OrderWorkflow
}
