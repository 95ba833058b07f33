package workflow_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// loanV1 is a loan workflow: documents read, a credit check, an
// underwriter's approval, a disbursement with a claw-back.
const loanV1 = `
name: loan
deadline: 240h
defaults: {timeout: 10s}
agents:
  docs: {endpoint: http://127.0.0.1:1/docs}
  bureau: {endpoint: http://127.0.0.1:1/bureau}
  bank: {endpoint: http://127.0.0.1:1/bank}
steps:
  - {name: validate, agent: docs, undo: none}
  - {name: ocr, agent: docs, undo: {name: drop-ocr}}
  - {name: credit, agent: bureau, undo: none}
  - name: approval
    wait: {event: approved, timeout: 72h}
  - {name: disburse, agent: bank, undo: {name: claw-back}}
`

// loanV2 adds a fraud check before the approval and waits 96 h for it.
const loanV2 = `
name: loan
deadline: 240h
defaults: {timeout: 10s}
agents:
  docs: {endpoint: http://127.0.0.1:1/docs}
  bureau: {endpoint: http://127.0.0.1:1/bureau}
  bank: {endpoint: http://127.0.0.1:1/bank}
steps:
  - {name: validate, agent: docs, undo: none}
  - {name: ocr, agent: docs, undo: {name: drop-ocr}}
  - {name: credit, agent: bureau, undo: none}
  - {name: fraud, agent: bureau, undo: none}
  - name: approval
    wait: {event: approved, timeout: 96h}
  - {name: disburse, agent: bank, undo: {name: claw-back}}
`

func parse(t *testing.T, yaml string) workflow.Definition {
	t.Helper()
	d, err := workflow.ParseFile("loan.yaml", []byte(yaml), workflow.Options{})
	require.NoError(t, err)
	return d
}

// orderAt is a new order of d with the named steps done, and the next one
// as state says: "ready", "armed" (a wait), "claimed", "given-back",
// "accepted" (an async call), "error" (the order held).
func orderAt(d workflow.Definition, done []string, next, state string) workflow.Order {
	o := d.Start(nil)
	set := func(name string, f func(*workflow.Rec)) {
		ref := workflow.Ref{Index: d.Index(name)}
		r := o.Recs[ref]
		f(&r)
		o.Recs[ref] = r
	}
	for _, name := range done {
		set(name, func(r *workflow.Rec) { r.State, r.Ready, r.Attempt = workflow.Processed, false, 1 })
	}
	for i := range d.Steps {
		if d.Steps[i].Name != next {
			set(d.Steps[i].Name, func(r *workflow.Rec) { r.Ready = false })
		}
	}
	if next == "" {
		return o
	}
	set(next, func(r *workflow.Rec) {
		r.Ready = true
		switch state {
		case "claimed":
			r.State, r.Ready, r.Attempt = workflow.Processing, false, 1
		case "accepted":
			r.State, r.Ready, r.Attempt, r.Accepted = workflow.Processing, false, 1, true
		case "given-back":
			r.Attempt, r.Ran, r.FailureCount = 1, true, 1
		case "error":
			r.State, r.Ready, r.Attempt, r.Cause = workflow.Error, false, 1, workflow.Refused
			o.State = workflow.Held
		}
	})
	return o
}

func TestAnOrderWaitingForItsApprovalMovesAndRunsTheNewStepFirst(t *testing.T) {
	t.Parallel()
	v1, v2 := parse(t, loanV1), parse(t, loanV2)
	o := orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed")
	moved, err := workflow.Moving{From: v1, To: v2}.Move(o)
	require.NoError(t, err)
	require.Equal(t, v2.Version, moved.Definition.Version, "nothing it ran changed its undo: it runs the new version itself")
	for _, name := range []string{"validate", "ocr", "credit"} {
		p := moved.Recs[workflow.Ref{Index: v2.Index(name)}]
		require.True(t, p.Carried, name)
		require.Equal(t, workflow.Ref{Index: v1.Index(name)}, p.From, name)
	}
	fraud := workflow.Ref{Index: v2.Index("fraud")}
	require.Equal(t, workflow.Placed{New: true, Ready: true}, moved.Recs[fraud], "the new step runs next")
	require.Equal(t, []workflow.Ref{fraud}, moved.Ready)
	approval := moved.Recs[workflow.Ref{Index: v2.Index("approval")}]
	require.False(t, approval.Carried, "the wait is armed again after the fraud check, with the new timeout")
	require.False(t, approval.Ready)
	require.Equal(t, workflow.Ref{Index: v1.Index("approval")}, approval.From)
	ocrUndo := moved.Recs[workflow.UndoOf(workflow.Ref{Index: v2.Index("ocr")})]
	require.Equal(t, workflow.Placed{Carried: true, From: workflow.UndoOf(workflow.Ref{Index: v1.Index("ocr")})}, ocrUndo)
	require.Contains(t, moved.Recs, workflow.UndoOf(workflow.Ref{Index: v2.Index("disburse")}))
}

func TestAWaitWhoseNeedsAreDoneKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	v2 := parse(t, strings.Replace(loanV1, "timeout: 72h", "timeout: 96h", 1))
	require.NotEqual(t, v1.Version, v2.Version)
	o := orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed")
	moved, err := workflow.Moving{From: v1, To: v2}.Move(o)
	require.NoError(t, err)
	approval := workflow.Ref{Index: 3}
	require.Equal(t, workflow.Placed{Carried: true, From: approval, Ready: true}, moved.Recs[approval])
	require.Empty(t, moved.Ready, "a wait armed needs no request")
}

func TestAnOrderPastANewStepMovesOnlyIfThePlanSkipsIt(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	early := strings.Replace(loanV2, "  - {name: fraud, agent: bureau, undo: none}\n", "", 1)
	early = strings.Replace(early, "  - {name: ocr,", "  - {name: fraud, agent: bureau, undo: none}\n  - {name: ocr,", 1)
	v2 := parse(t, early)
	o := orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed")
	_, err := workflow.Moving{From: v1, To: v2}.Move(o)
	var nm *workflow.NotMovableError
	require.ErrorAs(t, err, &nm)
	require.Contains(t, err.Error(), "step fraud comes before a step this order started")

	v2 = parse(t, early+"migrate:\n  skip: [fraud]\n")
	moved, err := workflow.Moving{From: v1, To: v2}.Move(o)
	require.NoError(t, err)
	require.Equal(t, workflow.Placed{New: true, Skipped: true}, moved.Recs[workflow.Ref{Index: v2.Index("fraud")}])
	require.NotContains(t, moved.Recs, workflow.UndoOf(workflow.Ref{Index: v2.Index("fraud")}))

	fresh := orderAt(v1, nil, "validate", "ready")
	moved, err = workflow.Moving{From: v1, To: v2}.Move(fresh)
	require.NoError(t, err)
	require.Equal(t, workflow.Placed{New: true}, moved.Recs[workflow.Ref{Index: v2.Index("fraud")}], "an order not past it runs it")
}

func TestAnOrderMovesOnlyAtASafePoint(t *testing.T) {
	t.Parallel()
	v1, v2 := parse(t, loanV1), parse(t, loanV2)
	for state, why := range map[string]string{
		"claimed":    "step credit's attempt 1 is at work",
		"given-back": "step credit's attempt 1 was given back and its answer may still come",
		"accepted":   "step credit's async call is accepted and at work",
	} {
		o := orderAt(v1, []string{"validate", "ocr"}, "credit", state)
		_, err := workflow.Moving{From: v1, To: v2}.Move(o)
		require.ErrorContains(t, err, why, state)
	}
	o := orderAt(v1, []string{"validate", "ocr"}, "credit", "ready")
	for _, s := range []workflow.State{workflow.Compensating, workflow.Failed, workflow.Processed, workflow.Cancelled} {
		o.State = s
		_, err := workflow.Moving{From: v1, To: v2}.Move(o)
		require.ErrorContains(t, err, "only an order running forward or held moves", s)
	}
	o.State, o.Cancelled = workflow.Pending, true
	_, err := workflow.Moving{From: v1, To: v2}.Move(o)
	require.ErrorContains(t, err, "being cancelled")

	held := orderAt(v1, []string{"validate", "ocr"}, "credit", "error")
	moved, err := workflow.Moving{From: v1, To: v2}.Move(held)
	require.NoError(t, err, "a held order moves: its operator retries the step under the new version")
	require.True(t, moved.Recs[workflow.Ref{Index: 2}].Carried)
	require.Empty(t, moved.Ready, "a held order starts nothing")
}

func TestAnAsyncCallAtWorkKeepsItsPlaceOrTheOrderWaits(t *testing.T) {
	t.Parallel()
	async := strings.Replace(loanV1, "{name: credit, agent: bureau, undo: none}", "{name: credit, agent: bureau, async: true, undo: none}", 1)
	v1 := parse(t, async)
	v2 := parse(t, strings.Replace(async, "timeout: 72h", "timeout: 96h", 1))
	o := orderAt(v1, []string{"validate", "ocr"}, "credit", "accepted")
	moved, err := workflow.Moving{From: v1, To: v2}.Move(o)
	require.NoError(t, err)
	require.Equal(t, workflow.Placed{Carried: true, From: workflow.Ref{Index: 2}}, moved.Recs[workflow.Ref{Index: 2}])

	shifted := parse(t, strings.Replace(async, "  - {name: ocr,", "  - {name: lookup, agent: docs, undo: none}\n  - {name: ocr,", 1)+
		"migrate:\n  skip: [lookup]\n")
	_, err = workflow.Moving{From: v1, To: shifted}.Move(o)
	require.ErrorContains(t, err, "its step must keep its place")
}

func TestAStepThatRanKeepsTheUndoOfItsVersion(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	changed := strings.Replace(loanV1, "undo: {name: drop-ocr}", "undo: {name: purge-ocr}", 1)
	v2 := parse(t, changed)
	o := orderAt(v1, []string{"validate", "ocr"}, "credit", "ready")
	moved, err := workflow.Moving{From: v1, To: v2}.Move(o)
	require.NoError(t, err)
	d := moved.Definition
	require.NotEqual(t, v2.Version, d.Version, "a version of its own")
	require.Equal(t, v2.Version, d.Base)
	require.Equal(t, "drop-ocr", d.Steps[1].Undo.Name, "the undo of the version that ran it")
	require.Equal(t, "claw-back", d.Steps[4].Undo.Name)
	require.Equal(t, []workflow.Ref{{Index: 2}}, moved.Ready, "its ready step is sent again under the version it now runs")

	fresh := orderAt(v1, []string{"validate"}, "ocr", "ready")
	moved, err = workflow.Moving{From: v1, To: v2}.Move(fresh)
	require.NoError(t, err)
	require.Equal(t, v2.Version, moved.Definition.Version, "ocr has not run: it gets the new undo")

	renewed := parse(t, changed+"migrate:\n  newUndo: [ocr]\n")
	moved, err = workflow.Moving{From: v1, To: renewed}.Move(o)
	require.NoError(t, err)
	require.Equal(t, renewed.Version, moved.Definition.Version)
	require.Equal(t, workflow.Placed{From: workflow.UndoOf(workflow.Ref{Index: 1})}, moved.Recs[workflow.UndoOf(workflow.Ref{Index: 1})], "the new undo, a record of its own")
}

func TestAStepThatRanMustExistInTheNewVersion(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	removed := strings.Replace(loanV1, "  - {name: ocr, agent: docs, undo: {name: drop-ocr}}\n", "", 1)
	o := orderAt(v1, []string{"validate", "ocr"}, "credit", "ready")
	_, err := workflow.Moving{From: v1, To: parse(t, removed)}.Move(o)
	require.ErrorContains(t, err, "step ocr ran and version")

	renamed := parse(t, strings.Replace(loanV1, "{name: ocr,", "{name: extract,", 1)+"migrate:\n  rename: {ocr: extract}\n")
	moved, err := workflow.Moving{From: v1, To: renamed}.Move(o)
	require.NoError(t, err)
	require.Equal(t, workflow.Placed{Carried: true, From: workflow.Ref{Index: 1}}, moved.Recs[workflow.Ref{Index: 1}])

	// a step that ran with nothing to undo may go
	lookup := strings.Replace(loanV1, "  - {name: validate, agent: docs, undo: none}\n", "", 1)
	moved, err = workflow.Moving{From: v1, To: parse(t, lookup)}.Move(o)
	require.NoError(t, err)
	require.Equal(t, []string{"validate"}, moved.Dropped)
}

func TestAPlanNamesStepsOfItsVersion(t *testing.T) {
	t.Parallel()
	_, err := workflow.ParseFile("loan.yaml", []byte(loanV1+"migrate:\n  rename: {ocr: nowhere}\n  skip: [gone]\n  newUndo: [missing]\n"),
		workflow.Options{})
	require.ErrorContains(t, err, `migrate.rename.ocr: "nowhere" is not a step`)
	require.ErrorContains(t, err, `migrate.skip[0]: "gone" is not a step`)
	require.ErrorContains(t, err, `migrate.newUndo[0]: "missing" is not a step`)
	d := parse(t, loanV1+"migrate:\n  rename: {extract: ocr}\n")
	require.Equal(t, parse(t, loanV1).Version, d.Version, "a plan is not part of the version")
}

// An order whose steps left in the new version are all done is not moved:
// it would have nothing left to run, and no write would end it (found by
// the explorer: the last step removed while it was ready).
func TestAnOrderWithNothingLeftToRunIsNotMoved(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	short := strings.Replace(loanV1, "  - {name: disburse, agent: bank, undo: {name: claw-back}}\n", "", 1)
	short = strings.Replace(short, "  bank: {endpoint: http://127.0.0.1:1/bank}\n", "", 1)
	o := orderAt(v1, []string{"validate", "ocr", "credit", "approval"}, "disburse", "ready")
	_, err := workflow.Moving{From: v1, To: parse(t, short)}.Move(o)
	require.ErrorContains(t, err, "it would have nothing left to run")
}

// A step's idempotency key is its record's name: a record that may have
// taken effect and may run again (held after its attempts timed out, or an
// async call accepted and at work) keeps its name, or a retry under the new
// one is a new effect at its service. Such an order moves once the record
// is done; a step done, or refused for good, may be renamed.
func TestARenameWaitsForARecordThatMayRunAgain(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	renamed := parse(t, strings.Replace(loanV1, "{name: credit,", "{name: score,", 1)+"migrate:\n  rename: {credit: score}\n")

	held := orderAt(v1, []string{"validate", "ocr"}, "credit", "error")
	r := held.Recs[workflow.Ref{Index: 2}]
	r.Cause, r.Ran, r.FailureCount = workflow.TimedOut, true, 3 // given up on after its attempts timed out: it may have taken effect
	held.Recs[workflow.Ref{Index: 2}] = r
	_, err := workflow.Moving{From: v1, To: renamed}.Move(held)
	require.ErrorContains(t, err, "step credit may have taken effect and may run again: its name is its idempotency key")

	refused := orderAt(v1, []string{"validate", "ocr"}, "credit", "error") // refused by its service: nothing took effect
	_, err = workflow.Moving{From: v1, To: renamed}.Move(refused)
	require.NoError(t, err)

	async := strings.Replace(loanV1, "{name: credit, agent: bureau, undo: none}", "{name: credit, action: credit, agent: bureau, async: true, undo: none}", 1)
	a1 := parse(t, async)
	a2 := parse(t, strings.Replace(async, "{name: credit,", "{name: score,", 1)+"migrate:\n  rename: {credit: score}\n")
	accepted := orderAt(a1, []string{"validate", "ocr"}, "credit", "accepted")
	_, err = workflow.Moving{From: a1, To: a2}.Move(accepted)
	require.ErrorContains(t, err, "step credit may have taken effect and may run again")

	done := orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed")
	_, err = workflow.Moving{From: v1, To: renamed}.Move(done)
	require.NoError(t, err, "a step done runs no more")
}

// A new step an order moved past is recorded skipped: done, with nothing
// to undo. Moved back to a version without it, the order leaves it behind,
// as a step done with nothing to undo, whatever undo its step declares.
func TestAStepSkippedByAMoveIsLeftBehindByAMoveBack(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	early := strings.Replace(loanV1, "  - {name: ocr,", "  - {name: fraud, agent: bureau, undo: {name: clear-fraud}}\n  - {name: ocr,", 1)
	v2 := parse(t, early+"migrate:\n  skip: [fraud]\n")
	o := orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed")
	moved, err := workflow.Moving{From: v1, To: v2}.Move(o)
	require.NoError(t, err)
	fraud := workflow.Ref{Index: v2.Index("fraud")}
	require.Equal(t, workflow.Placed{New: true, Skipped: true}, moved.Recs[fraud])

	// The order as the move left it (statestore.Store.Migrate): the skipped
	// record done, with nothing to undo.
	in2 := orderAt(v2, []string{"validate", "ocr", "credit"}, "approval", "armed")
	r := in2.Recs[fraud]
	r.State, r.Ready, r.Attempt, r.HasUndo, r.NothingToUndo = workflow.Processed, false, 0, false, true
	in2.Recs[fraud] = r
	delete(in2.Recs, workflow.UndoOf(fraud))
	back, err := workflow.Moving{From: v2, To: v1}.Move(in2)
	require.NoError(t, err, "moved back, it leaves the step it skipped behind")
	require.Equal(t, []string{"fraud"}, back.Dropped)

	ran := orderAt(v2, []string{"validate", "fraud", "ocr", "credit"}, "approval", "armed")
	_, err = workflow.Moving{From: v2, To: v1}.Move(ran)
	require.ErrorContains(t, err, "step fraud ran and version", "one that ran, with an undo, is not left behind")
}
