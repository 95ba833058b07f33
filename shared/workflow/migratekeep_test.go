package workflow_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// loanUndone is loanV1 with a credit check that has an undo of its own
// (a hold on the credit line released), so that two steps done have one.
var loanUndone = strings.Replace(loanV1, "{name: credit, agent: bureau, undo: none}", "{name: credit, agent: bureau, undo: {name: release-credit}}", 1)

// withoutOCR is loanUndone without its ocr step, with plan.
func withoutOCR(t *testing.T, plan string) workflow.Definition {
	t.Helper()
	return parse(t, strings.Replace(loanUndone, "  - {name: ocr, agent: docs, undo: {name: drop-ocr}}\n", "", 1)+plan)
}

// doneInTurn is o with its done records done a second apart, in the order
// of names.
func doneInTurn(d workflow.Definition, o workflow.Order, names ...string) workflow.Order {
	for k, name := range names {
		ref := workflow.Ref{Index: d.Index(name)}
		r := o.Recs[ref]
		r.DoneAt = time.Unix(int64(1000+k), 0)
		o.Recs[ref] = r
	}
	return o
}

// asMoved is order o as a move leaves it (statestore.Store.Migrate): each
// record carried with its state, or new in the definition it runs.
func asMoved(o workflow.Order, mv workflow.Moved) workflow.Order {
	fresh := mv.Definition.Start(nil)
	out := workflow.Order{State: o.State, Recs: workflow.Records{}}
	for ref, p := range mv.Recs {
		r := fresh.Recs[ref]
		if p.Carried {
			r = o.Recs[p.From]
			r.Ref = ref
		}
		r.Ready = p.Ready || (p.Carried && o.Recs[p.From].Ready)
		if p.Skipped {
			r.State, r.Ready, r.NothingToUndo = workflow.Processed, false, true
		}
		out.Recs[ref] = r
	}
	return out
}

// A step the new version has not, which the order completed and the plan
// keeps, goes with the order: appended to its own definition, done, with
// the undo of the version that ran it, undone in its turn (by when it was
// done) if the order fails later.
func TestAKeptStepMovesWithTheUndoOfTheVersionThatRanIt(t *testing.T) {
	t.Parallel()
	v1, v2 := parse(t, loanUndone), withoutOCR(t, "migrate:\n  keep: [ocr]\n")
	o := doneInTurn(v1, orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed"), "validate", "ocr", "credit")
	_, err := workflow.Moving{From: v1, To: withoutOCR(t, "")}.Move(o)
	require.ErrorContains(t, err, "step ocr ran and version")
	require.ErrorContains(t, err, "keep it under migrate.keep")

	moved, err := workflow.Moving{From: v1, To: v2}.Move(o)
	require.NoError(t, err)
	d := moved.Definition
	require.Equal(t, v2.Version, d.Base, "a version of its own, a form of the one moved to")
	require.NotEqual(t, v2.Version, d.Version)
	require.Len(t, d.Steps, len(v2.Steps)+1, "appended after the new version's steps, whose indices stay")
	kept := d.Steps[len(v2.Steps)]
	require.Equal(t, "ocr", kept.Name)
	require.Equal(t, v1.Version, kept.Kept, "kept from the version that ran it")
	require.Equal(t, "drop-ocr", kept.Undo.Name, "with its undo")
	require.Empty(t, d.Needs(len(v2.Steps)), "it needs nothing")
	for i := range v2.Steps {
		require.NotContains(t, d.Needs(i), len(v2.Steps), "nothing needs it")
	}
	at := workflow.Ref{Index: len(v2.Steps)}
	require.Equal(t, workflow.Placed{Carried: true, From: workflow.Ref{Index: 1}}, moved.Recs[at])
	require.Equal(t, workflow.Placed{Carried: true, From: workflow.UndoOf(workflow.Ref{Index: 1})}, moved.Recs[workflow.UndoOf(at)])
	require.Empty(t, moved.Dropped)
	require.Equal(t, []string{"release-credit", "drop-ocr"}, moved.Undoes(), "the latest done first: credit ran after ocr")

	// Failed later, the order undoes credit, then the kept ocr, with the
	// undo of the version that ran it.
	after := asMoved(o, moved)
	require.True(t, after.Recs[at].HasUndo)
	m := after.Fail(workflow.Ref{Index: d.Index("approval")}, workflow.TimedOut, false, time.Unix(2000, 0))
	require.Equal(t, []workflow.Ref{workflow.UndoOf(workflow.Ref{Index: d.Index("credit")})}, m.Ready)
	after = after.After(m)
	m = d.Complete(after, workflow.UndoOf(workflow.Ref{Index: d.Index("credit")}), time.Unix(2001, 0))
	require.Equal(t, []workflow.Ref{workflow.UndoOf(at)}, m.Ready, "then the kept step's")
}

// A kept step never runs again: a round of the order ends without it (one
// a resubmission left it Pending in too), and going on after a hold never
// makes it ready.
func TestAKeptStepNeverRunsAgain(t *testing.T) {
	t.Parallel()
	v1, v2 := parse(t, loanUndone), withoutOCR(t, "migrate:\n  keep: [ocr]\n")
	o := orderAt(v1, []string{"validate", "ocr", "credit", "approval"}, "disburse", "ready")
	moved, err := workflow.Moving{From: v1, To: v2}.Move(o)
	require.NoError(t, err)
	d, after := moved.Definition, asMoved(o, moved)
	require.NotContains(t, d.Starts(nil), workflow.Ref{Index: len(v2.Steps)}, "no round starts with it")
	disburse := workflow.Ref{Index: d.Index("disburse")}
	require.Equal(t, workflow.Processed, d.Complete(after, disburse, time.Unix(3000, 0)).State)

	kept := workflow.Ref{Index: len(v2.Steps)}
	r := after.Recs[kept]
	r.State, r.DoneAt = workflow.Pending, time.Time{} // as a new round leaves it
	after.Recs[kept] = r
	require.Equal(t, workflow.Processed, d.Complete(after, disburse, time.Unix(3000, 0)).State, "the order ends without it")

	h := after.Recs[disburse]
	h.State, h.Ready, h.Cause = workflow.Error, false, workflow.Refused
	after.Recs[disburse], after.State = h, workflow.Held
	m, err := d.SkipHeld(after, disburse, time.Unix(3000, 0))
	require.NoError(t, err)
	require.Equal(t, workflow.Processed, m.State, "skipped, the held step was the last: the order ends")
	require.Empty(t, m.Ready)
}

// Only a step the order completed is kept: one held (failed, its order
// held for the operator) is refused with the reason; one not run is left
// behind, as one that ran with nothing to undo.
func TestOnlyACompletedStepIsKept(t *testing.T) {
	t.Parallel()
	v1, v2 := parse(t, loanUndone), withoutOCR(t, "migrate:\n  keep: [ocr]\n")
	held := orderAt(v1, []string{"validate"}, "ocr", "error")
	_, err := workflow.Moving{From: v1, To: v2}.Move(held)
	require.ErrorContains(t, err, "step ocr is kept under migrate.keep and has not completed")

	fresh := orderAt(v1, nil, "validate", "ready")
	v3 := parse(t, strings.Replace(loanUndone, "  - {name: ocr, agent: docs, undo: {name: drop-ocr}}\n", "", 1)+"migrate:\n  keep: [ocr]\n")
	moved, err := workflow.Moving{From: v1, To: v3}.Move(fresh)
	require.NoError(t, err)
	require.Equal(t, []string{"ocr"}, moved.Dropped, "not run: left behind")
	require.Equal(t, v3.Version, moved.Definition.Version, "it runs the new version itself")

	noUndo := parse(t, strings.Replace(loanUndone, "  - {name: validate, agent: docs, undo: none}\n", "", 1)+"migrate:\n  keep: [validate]\n")
	o := orderAt(v1, []string{"validate", "ocr"}, "credit", "ready")
	moved, err = workflow.Moving{From: v1, To: noUndo}.Move(o)
	require.NoError(t, err)
	require.Equal(t, []string{"validate"}, moved.Dropped, "nothing to undo: left behind")
	require.Len(t, moved.Definition.Steps, len(noUndo.Steps))
}

// Moved back to a version that has the kept step, the order finds it by
// name and carries its record there; moved on to another version without
// it that keeps it too, it stays kept, from the version that ran it.
func TestAKeptStepIsFoundByAMoveBack(t *testing.T) {
	t.Parallel()
	v1, v2 := parse(t, loanUndone), withoutOCR(t, "migrate:\n  keep: [ocr]\n")
	o := orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed")
	moved, err := workflow.Moving{From: v1, To: v2}.Move(o)
	require.NoError(t, err)
	in2 := asMoved(o, moved)
	kept := workflow.Ref{Index: len(v2.Steps)}

	back, err := workflow.Moving{From: moved.Definition, To: v1}.Move(in2)
	require.NoError(t, err)
	require.Equal(t, v1.Version, back.Definition.Version, "its step and its undo are the version's own")
	require.Equal(t, workflow.Placed{Carried: true, From: kept}, back.Recs[workflow.Ref{Index: 1}])
	require.Equal(t, workflow.Placed{Carried: true, From: workflow.UndoOf(kept)}, back.Recs[workflow.UndoOf(workflow.Ref{Index: 1})])
	require.Equal(t, []string{"release-credit", "drop-ocr"}, back.Undoes())

	v3 := parse(t, strings.Replace(loanUndone, "  - {name: ocr, agent: docs, undo: {name: drop-ocr}}\n", "", 1)+
		"  - {name: notify, agent: docs, undo: none}\nmigrate:\n  keep: [ocr]\n")
	on, err := workflow.Moving{From: moved.Definition, To: v3}.Move(in2)
	require.NoError(t, err)
	require.Equal(t, workflow.Placed{Carried: true, From: kept}, on.Recs[workflow.Ref{Index: len(v3.Steps)}])
	require.Equal(t, v1.Version, on.Definition.Steps[len(v3.Steps)].Kept, "kept from the version that ran it")
}

// A plan keeps steps of an earlier version: not one of its own, not one it
// renames, and, checked against the earlier version (sasctl workflow
// validate --from), one that version has.
func TestAPlanKeepsStepsOfTheEarlierVersionOnly(t *testing.T) {
	t.Parallel()
	_, err := workflow.ParseFile("loan.yaml", []byte(loanV1+"migrate:\n  rename: {scan: ocr}\n  keep: [credit, scan]\n"), workflow.Options{})
	require.ErrorContains(t, err, `migrate.keep[0]: "credit" is a step of this workflow`)
	require.ErrorContains(t, err, `migrate.keep[1]: "scan" is renamed under migrate.rename`)

	v1, v2 := parse(t, loanUndone), withoutOCR(t, "migrate:\n  keep: [ocr, scan]\n")
	ps := workflow.Moving{From: v1, To: v2}.Problems()
	require.Len(t, ps, 1)
	require.Equal(t, "migrate.keep[1]", ps[0].Field)
	require.Contains(t, ps[0].What, `"scan" is not a step of version `+v1.Version)
	require.Positive(t, ps[0].Line)
}
