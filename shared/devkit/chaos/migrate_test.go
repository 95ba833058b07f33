package chaos

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The migrator moves an order on the workflow it was sent on.
func TestWorkflowOfIsTheWorkflowAnOrderIsSentOn(t *testing.T) {
	for _, p := range []Plan{DefaultPlan(20261121, 300), flowPlan()} {
		p.limits, p.hostiles = p.limitOrders(), p.hostileOrders()
		seen := map[string]bool{}
		for i := range p.Orders {
			id := p.orderID(i)
			var o struct {
				Workflow string `json:"workflow"`
			}
			require.NoError(t, json.Unmarshal([]byte(p.orderBody(id, i)), &o))
			require.Equal(t, cmp.Or(o.Workflow, workflow.OrderWorkflow), p.workflowOf(id), id)
			seen[p.workflowOf(id)] = true
		}
		require.Greater(t, len(seen), 5)
	}
}

// The odd generated shapes name their orders' id applicationId, and their
// orders are sent so: each body is an order of the run's workflows, its id
// the order's.
func TestGeneratedShapesNameTheirOrdersByApplicationID(t *testing.T) {
	p := DefaultPlan(20261121, 300)
	p.limits, p.hostiles = p.limitOrders(), p.hostileOrders()
	set := p.workflows()
	byApplication := 0
	for i := range p.Orders {
		id := p.orderID(i)
		wf := p.workflowOf(id)
		if !strings.HasPrefix(wf, "shape") {
			continue
		}
		d, ok := set.Get(wf)
		require.True(t, ok, wf)
		o, err := message.DecodeOrder(p.orderBody(id, i), set)
		require.NoError(t, err, id)
		require.Equal(t, id, o.OrderID)
		require.Equal(t, d.IDMember(), o.IDField, wf)
		if o.IDField == shapes.ApplicationID {
			byApplication++
		}
	}
	require.Positive(t, byApplication, "orders of the shapes that name their id applicationId")
}

// Refusals of one kind count together: their steps, versions and numbers
// left out.
func TestRefusalsCountByTheirShape(t *testing.T) {
	for why, shape := range map[string]string{
		"step s1's attempt 2 is at work: move it once it is done":                       "step …'s attempt … is at work: move it once it is done",
		"step pack-item#2's attempt 1 was given back and its answer may still come":     "step …'s attempt … was given back and its answer may still come",
		"it is Compensating: only an order running forward or held moves":               "it is Compensating: only an order running forward or held moves",
		"step added-check ran and version 0a1b2c3d has no step added-check (rename it)": "step … ran and version … has no step … (rename it)",
		"step s2 comes before a step this order started, in version 0a1b2c3d: list it":  "step … comes before a step this order started, in version …: list it",
		"step s3 ran and needs s1, which this order has not done, in version 0a1b2c3d":  "step … ran and needs …, which this order has not done, in version …",
		"steps a and b both become c in version 0a1b2c3d":                               "steps … and … both become … in version …",
	} {
		require.Equal(t, shape, refusalShape(why))
	}
	require.Equal(t, "it is being cancelled", firstReason("it is being cancelled; step s1's attempt 2 is at work"))
}

// An order that moved is judged by the version it runs now: a renamed
// step's effect counts under either name (twice, once under each, is twice),
// a step is undone by the undo of the version that ran it and no other, a
// new step the move skipped took no effect, and an effect applied after a
// move by an attempt claimed before it is the order moved while at work.
func TestCheckJudgesAMovedOrderByItsOwnVersion(t *testing.T) {
	first := workflow.Orders(workflow.Settings{})
	second := cloneDefinition(first) // charge-payment renamed charge-card, a check added before create-shipment
	second.Steps[1].Do, second.Steps[1].Name = "charge-payment", "charge-card"
	second.Steps = slices.Insert(second.Steps, 2, workflow.Step{Action: workflow.Action{Name: "added-check", Agent: "payment",
		Timeout: time.Second, MaxFailures: 3}, NoUndo: true})
	kept := cloneDefinition(second) // its undo of charge-card changed to refund-card
	kept.Steps[1].Undo.Name = "refund-card"
	v := version{aliases: map[string]string{"charge-payment": "charge-card", "charge-card": "charge-payment",
		"refund-payment": "refund-card", "refund-card": "refund-payment"}}

	now := time.Now()
	step := func(id string, i int, name string, s workflow.State) statestore.Step {
		return statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: i}, Action: workflow.Action{Name: name, MaxFailures: 3},
			State: s, Attempt: 1}, OrderOf: statestore.OrderOf{OrderID: id}, AtWork: statestore.AtWork{ClaimedAt: now.Add(-time.Minute)}}
	}
	skippedCheck := func(id string) statestore.Step {
		st := step(id, 2, "added-check", workflow.Processed)
		st.Attempt, st.ClaimedAt = 0, time.Time{}
		st.Incidents = []statestore.Event{{At: now, What: "skipped: the order was past it when it moved to version " + second.Version}}
		return st
	}
	recs := func(id string, last workflow.State) []statestore.Step {
		return []statestore.Step{step(id, 0, "reserve-inventory", workflow.Processed), step(id, 1, "charge-card", workflow.Processed),
			skippedCheck(id), step(id, 3, "create-shipment", last)}
	}
	effect := func(id, name string) remotesim.Effect {
		return remotesim.Effect{OrderID: id, Key: id + "/" + name, AppliedAt: now.Add(-50 * time.Second)}
	}
	ledger := []remotesim.Effect{}
	for _, id := range []string{"m-ok", "m-twice", "m-at-work", "m-wrong-undo", "m-undone", "m-skipped-ran"} {
		ledger = append(ledger, effect(id, "reserve-inventory"), effect(id, "charge-payment")) // charged before it moved
	}
	for _, id := range []string{"m-ok", "m-twice", "m-skipped-ran"} {
		ledger = append(ledger, effect(id, "create-shipment"))
	}
	ledger = append(ledger, effect("m-twice", "charge-card"), effect("m-skipped-ran", "added-check"),
		effect("m-wrong-undo", "release-inventory"), effect("m-wrong-undo", "refund-payment"),
		effect("m-undone", "release-inventory"), effect("m-undone", "refund-card"))
	late := effect("m-at-work", "create-shipment")
	late.AppliedAt = now.Add(-10 * time.Second) // after its move, by the attempt claimed a minute ago
	ledger = append(ledger, late)

	task := func(id string, s workflow.State) statestore.Task {
		return statestore.Task{OrderID: id, Workflow: "order", State: s, Round: 1}
	}
	tasks, records, defs := map[string]statestore.Task{}, map[string][]statestore.Step{}, map[string]workflow.Definition{}
	for _, id := range []string{"m-ok", "m-twice", "m-at-work", "m-skipped-ran"} {
		tasks[id], records[id], defs[id] = task(id, workflow.Processed), recs(id, workflow.Processed), second
	}
	for _, id := range []string{"m-wrong-undo", "m-undone"} { // failed at the shipment, charged under the first version
		tasks[id], records[id], defs[id] = task(id, workflow.Failed), recs(id, workflow.Error), kept
		records[id][3].Attempt, records[id][3].Cause = 3, workflow.Refused
		records[id][3].Alerted = true
	}
	ids := []string{"m-ok", "m-twice", "m-at-work", "m-wrong-undo", "m-undone", "m-skipped-ran"}
	moves := map[string][]moveWindow{}
	for _, id := range ids {
		moves[id] = []moveWindow{{From: now.Add(-40 * time.Second), To: now.Add(-39 * time.Second)}}
	}
	j := judge{set: workflow.MustSet(first), defs: defs, versions: map[string]version{"order": v}, moves: moves}
	got, ends := j.check(ids, tasks, records, ledger)
	require.Equal(t, []string{
		"m-skipped-ran: step added-check, skipped by a move, applied 1 times, undone 0 times",
		"m-twice: Processed but charge-card applied 2 times, undone 0 times",
		"m-wrong-undo: step charge-card was undone 1 times by another action than refund-card, the undo of the version that ran it",
	}, got.Inconsistent)
	require.Len(t, got.MovedAtWork, 1)
	require.Contains(t, got.MovedAtWork[0], "m-at-work create-shipment: applied at")
	require.Empty(t, got.AppliedTwice, "each name once")
	require.Equal(t, 4, got.Count())
	require.Equal(t, 4, ends[workflow.Processed])

	// Judged by the first version instead, the moved orders look broken:
	// the check must read each order's own.
	naive, _ := Check(workflow.MustSet(first), ids, tasks, records, ledger)
	require.Greater(t, len(naive.Inconsistent), 3)
}

// A claim whose time is within claimLag of a move may have been written
// after it (its write tried again by the SDK): not judged moved at work;
// one claimed longer before is.
func TestAClaimWrittenAfterAMoveIsNotJudgedAtWork(t *testing.T) {
	now := time.Now()
	move := moveWindow{From: now.Add(-40 * time.Second), To: now.Add(-39 * time.Second)}
	j := judge{moves: map[string][]moveWindow{"o-1": {move}}}
	task := statestore.Task{OrderID: "o-1", Workflow: "order", State: workflow.Processed}
	effect := remotesim.Effect{OrderID: "o-1", Key: "o-1/reserve-inventory", AppliedAt: now.Add(-30 * time.Second)}
	for before, judged := range map[time.Duration]bool{time.Second: false, claimLag - time.Millisecond: false, claimLag + time.Second: true} {
		rec := statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: 0}, Action: workflow.Action{Name: "reserve-inventory"},
			State: workflow.Processed, Attempt: 1}, AtWork: statestore.AtWork{ClaimedAt: move.From.Add(-before)}}
		got := j.movedAtWork(task, []statestore.Step{rec}, []remotesim.Effect{effect})
		require.Equal(t, judged, len(got) == 1, "claimed %s before the move", before)
	}
}

// A new step a move recorded skipped at a key where the order's earlier
// record had attempts keeps their count (statestore: attempt numbers never
// go back at a key), never having run: judged skipped, not a Processed
// order's step that took no effect; one claimed since (run in a round
// resubmitted) is judged as any step.
func TestASkippedStepKeepsItsKeysAttemptsAndIsStillSkipped(t *testing.T) {
	now := time.Now()
	skipped := statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: 0}, Action: workflow.Action{Name: "added-check"},
		State: workflow.Processed, Attempt: 2}}
	skipped.Incidents = []statestore.Event{{At: now, What: "skipped: the order was past it when it moved to version v2"}}
	require.True(t, movedPast(skipped), "its attempts are the key's earlier record's")
	ran := skipped
	ran.Attempt, ran.ClaimedAt = 3, now.Add(time.Second)
	require.False(t, movedPast(ran), "claimed after it was skipped: it ran")
	never := skipped
	never.Incidents = nil
	require.False(t, movedPast(never))
}
