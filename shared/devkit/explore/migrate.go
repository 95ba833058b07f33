package explore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// An operator moves orders to another version of their workflow at random
// moments (sasctl migrate): while their steps run, wait, are undone or
// held. A third of the runs have a next version (shapes.Evolve: a timeout
// raised, an undo changed or renewed, a step added first or last, renamed,
// the last removed, kept by the orders that completed it), and move their
// orders to it and back.

// migrateStream is the stream a run's moves are decided by: the seed's
// other choices are as they were before runs moved orders.
const migrateStream = 0x316

// evolve gives p a next version, in a third of the runs (none without
// withMigrate: a regression seed found before runs moved orders replays
// the run it found).
func (p *plan) evolve(withMigrate bool, changes []string) {
	rng := rand.New(rand.NewPCG(p.seed, migrateStream))
	if !withMigrate || p.scenario != none || rng.IntN(3) != 0 {
		return
	}
	if changes == nil {
		changes = shapes.Changes
	}
	next, what, ok := shapes.EvolveBy(rng, p.def, changes)
	if !ok {
		return
	}
	p.next, p.change, p.mover = &next, what, rng
}

// defOf is the definition of version v of the run's workflow (the first
// version's by default).
func (w *World) defOf(v string) workflow.Definition {
	w.mu.Lock()
	defer w.mu.Unlock()
	if d, ok := w.versions[v]; ok {
		return d
	}
	return w.def
}

// move tries to move o to the version it does not run, as an operator
// does: the product's own move (statestore.Store.Migrate), then the
// requests of what it made ready sent (with faults, perhaps lost: the
// Supervisor finds them unclaimed). Before it, the explorer reads the order
// itself: a move made while an attempt of it could still record an
// outcome breaks an invariant.
func (w *World) move(ctx context.Context, o *order) {
	before, err := w.store.Read(ctx, o.id)
	if err != nil {
		w.note("move %s: %v", o.id, err)
		return
	}
	to := *w.next
	if v := before.Runs(); v == w.next.Version || w.defOf(v).Base == w.next.Version {
		to = w.def
	}
	res, err := w.store.Migrate(ctx, statestore.Move{OrderID: o.id, To: to, By: "explorer", Now: w.clock(),
		Kept: kept.New(w.payloads, w.sealer)})
	var nm *workflow.NotMovableError
	switch {
	case errors.As(err, &nm):
		w.note("move %s to %s: cannot: %s", o.id, to.Version, nm.Error())
		w.count("moves refused")
		return
	case err != nil:
		w.note("move %s: %v", o.id, err)
		return
	case res.Already:
		return
	}
	w.note("moved %s from %s to %s (%s): ready %v", o.id, res.From, res.To, w.change, res.Move.Ready)
	switch {
	case to.Version == w.def.Version:
		w.count("moves back")
	case len(res.Move.Kept()) > 0:
		w.count("moves keeping a step (" + w.change + ")")
	default:
		w.count("moves (" + w.change + ")")
	}
	w.mu.Lock()
	w.versions[res.To] = res.Move.Definition
	for ref, p := range res.Move.Recs {
		if p.Skipped {
			w.skipped[workflow.IdempotencyKey(o.id, workflow.RecordName(res.Move.Definition.Steps[ref.Index].Name, ref), 1)] = true
		}
	}
	for _, st := range before.Steps() {
		if st.State == workflow.Processing && !st.Accepted {
			w.movedAtWork = append(w.movedAtWork, fmt.Sprintf("%s moved while %s's attempt %d was at work", o.id, st.RecordName(), st.Attempt))
		}
	}
	w.mu.Unlock()
	if w.faulty && w.rng.IntN(4) == 0 {
		w.note("move: its starts lost")
		return
	}
	w.start(ctx, o.id, res.Move.Ready)
}

// aliasKey is the key record name of order id ran under, if a move renamed
// its step since (name's key otherwise): a step renamed keeps what it did.
func (w *World) aliasKey(id, name string, r workflow.Ref) string {
	k := workflow.IdempotencyKey(id, workflow.RecordName(name, r), 1)
	if w.next == nil || w.ledger.at(k) >= 0 {
		return k
	}
	for old, renamed := range w.next.Migrate.Rename {
		if strings.EqualFold(renamed, name) {
			if ok := workflow.IdempotencyKey(id, workflow.RecordName(old, r), 1); w.ledger.at(ok) >= 0 {
				return ok
			}
		}
	}
	return k
}
