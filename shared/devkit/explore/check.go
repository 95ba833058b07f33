package explore

import (
	"context"
	"fmt"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// check says which of the invariants the run broke, if any, from the order
// as the store has it at its end, what the services applied, the claims and
// the alerts.
func (w *World) check(ctx context.Context, task statestore.Task) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	if !task.State.Ended() {
		fail("no lost order: it is %s", task.State)
	}
	_, recs, err := w.store.Load(ctx, w.id)
	if err != nil {
		return append(bad, err.Error())
	}
	byRef := map[workflow.Ref]statestore.Step{}
	for _, r := range recs {
		byRef[r.Ref()] = r
	}
	last := map[workflow.Ref]int{}
	for _, c := range w.claims {
		if !c.needsMet {
			fail("nothing starts before its needs: %v claimed (attempt %d) before every step it needs was done", c.ref, c.attempt)
		}
		if c.attempt <= last[c.ref] {
			fail("exclusive claim: %v attempt %d claimed after attempt %d", c.ref, c.attempt, last[c.ref])
		}
		last[c.ref] = c.attempt
	}
	for _, r := range recs {
		if r.FailureCount > r.MaxFailures {
			fail("bounded retries: %s failed %d times, over its %d", r.RecordName(), r.FailureCount, r.MaxFailures)
		}
		if r.State == workflow.Error && !r.Alerted {
			fail("every failure alerted: %s is in Error, not alerted", r.RecordName())
		}
	}
	applied := func(r statestore.Step) bool { return w.ledger.at(w.key(r)) >= 0 }
	for _, r := range recs {
		if r.Undo || r.Kind != workflow.KindAgent {
			continue
		}
		u, hasUndo := byRef[workflow.UndoOf(r.Ref())]
		switch {
		case task.State == workflow.Processed && !applied(r) && !w.skipped[w.key(r)]:
			fail("a Processed order has every effect: %s's was never applied", r.RecordName())
		case task.State == workflow.Processed && hasUndo && applied(u):
			fail("a Processed order undid nothing: %s was undone", r.RecordName())
		case (task.State == workflow.Failed || task.State == workflow.Cancelled) && applied(r) && !(hasUndo && applied(u)):
			fail("everything done is undone after a failure: %s took effect and was not undone (the order is %s)", r.RecordName(), task.State)
		case hasUndo && applied(u) && applied(r) && w.ledger.at(w.key(u)) < w.ledger.at(w.key(r)):
			fail("an effect comes before its undo: %s was applied after its undo", r.RecordName())
		}
	}
	bad = append(bad, w.undoOrder(recs, byRef)...)
	if task.State == workflow.CompensationFailed && len(w.alerts) == 0 {
		fail("CompensationFailed is alerted: no alert was published")
	}
	undone := false
	for _, r := range recs {
		undone = undone || (r.Undo && w.ledger.at(w.key(r)) >= 0)
	}
	for _, a := range w.alerts {
		if a.OrderState == workflow.Failed && undone && !a.Undo {
			fail("alerts say what the failure decided: %s's alert says %q, and undo actions ran", a.StepName, a.Compensation)
		}
	}
	if !w.faults && task.State != workflow.Processed && !w.timedOutWait(recs) {
		fail("waiting is not failing: with no fault, the order ended %s", task.State)
	}
	return bad
}

// undoOrder checks that undo actions ran after the undo actions of the
// records that ran after their own (a step's undo before those of the steps
// it needs, whatever the shape).
func (w *World) undoOrder(recs []statestore.Step, byRef map[workflow.Ref]statestore.Step) []string {
	var bad []string
	for _, r := range recs {
		if r.Undo || w.ledger.at(w.key(byRef[workflow.UndoOf(r.Ref())])) < 0 {
			continue
		}
		for _, q := range recs {
			if q.Undo || !w.needsOf(r.Index)[q.Index] {
				continue
			}
			ur, uq := w.ledger.at(w.key(byRef[workflow.UndoOf(r.Ref())])), w.ledger.at(w.key(byRef[workflow.UndoOf(q.Ref())]))
			if uq >= 0 && uq < ur {
				bad = append(bad, fmt.Sprintf("undo order: %s was undone before %s, which needs it", q.RecordName(), r.RecordName()))
			}
		}
	}
	return bad
}

// needsOf are the steps step i needs, directly or not.
func (w *World) needsOf(i int) map[int]bool {
	out := map[int]bool{}
	var walk func(int)
	walk = func(j int) {
		for _, n := range w.def.Needs(j) {
			if !out[n] {
				out[n] = true
				walk(n)
			}
		}
	}
	walk(i)
	return out
}

// key is record r's idempotency key (round 1: the explorer resubmits
// nothing).
func (w *World) key(r statestore.Step) string {
	if r.OrderID == "" {
		return ""
	}
	return workflow.IdempotencyKey(r.OrderID, r.RecordName(), 1)
}

// timedOutWait reports whether a wait of the order timed out: a deadline the
// workflow set, no fault.
func (w *World) timedOutWait(recs []statestore.Step) bool {
	for _, r := range recs {
		if r.Kind == workflow.KindEvent && r.State == workflow.Error {
			return true
		}
	}
	return false
}
