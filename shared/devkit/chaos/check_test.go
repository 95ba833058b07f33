package chaos

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The checker must catch each broken invariant, or a green chaos run means
// nothing: one order breaks each, one keeps them all.
func TestCheckFindsEachBrokenInvariant(t *testing.T) {
	def := workflow.Orders(workflow.Settings{})
	task := func(id string, s workflow.State) statestore.Task {
		return statestore.Task{OrderID: id, Workflow: "order", State: s, Round: 1}
	}
	step := func(id string, i int, s workflow.State, failures int) statestore.Step {
		st := statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: i},
			Action: workflow.Action{Name: def.Steps[i].Name, MaxFailures: 3}, State: s, FailureCount: failures, Attempt: failures + 1},
			OrderOf: statestore.OrderOf{OrderID: id},
			Outcome: statestore.Outcome{Alerted: s == workflow.Error}}
		switch s {
		case workflow.Error:
			st.Cause, st.Ran = workflow.TimedOut, true // given up on after it ran
		case workflow.Pending: // its failed attempts made, none running
			st.Attempt, st.Ran = failures, failures > 0
		}
		return st
	}
	effect := func(id, action string) remotesim.Effect {
		return remotesim.Effect{OrderID: id, Action: action, Key: id + "/" + action}
	}
	processed := func(id string) []statestore.Step {
		return []statestore.Step{step(id, 0, workflow.Processed, 0), step(id, 1, workflow.Processed, 0),
			step(id, 2, workflow.Processed, 0)}
	}
	tasks := map[string]statestore.Task{
		"o-ok": task("o-ok", workflow.Processed), "o-run": task("o-run", workflow.Pending),
		"o-twice": task("o-twice", workflow.Processed), "o-refunded": task("o-refunded", workflow.Failed),
		"o-over": task("o-over", workflow.Processed), "o-quiet": task("o-quiet", workflow.CompensationFailed),
		"o-stopped": task("o-stopped", workflow.Cancelled),
	}
	over := processed("o-over")
	over[1].FailureCount = 4
	quiet := processed("o-quiet")
	quiet[2] = step("o-quiet", 2, workflow.Error, 3)
	quiet[2].Alerted = false
	records := map[string][]statestore.Step{
		"o-ok": processed("o-ok"), "o-run": {step("o-run", 0, workflow.Processing, 0)},
		"o-twice": processed("o-twice"), "o-over": over, "o-quiet": quiet,
		"o-refunded": {step("o-refunded", 0, workflow.Processed, 0), step("o-refunded", 1, workflow.Processed, 0),
			step("o-refunded", 2, workflow.Error, 3)},
		// cancelled while its charge waited for a retry: the recovered
		// attempt took effect, and nothing refunded it
		"o-stopped": {step("o-stopped", 0, workflow.Processed, 0), step("o-stopped", 1, workflow.Pending, 1),
			step("o-stopped", 2, workflow.Pending, 0)},
	}
	// a step failed for a size the run's orders all keep within
	tooLarge := "create-shipment's input: its document (the order and the results before it) is 44739704 bytes, over the 34603008 its agent reads for one call"
	records["o-refunded"][2].LastError = tooLarge
	var ledger []remotesim.Effect
	for _, id := range []string{"o-ok", "o-twice", "o-over", "o-refunded", "o-quiet"} {
		for _, a := range []string{"reserve-inventory", "charge-payment", "create-shipment"} {
			ledger = append(ledger, effect(id, a))
		}
	}
	ledger = append(ledger, effect("o-stopped", "reserve-inventory"), effect("o-stopped", "release-inventory"),
		effect("o-stopped", "charge-payment"))
	ledger = append(ledger, effect("o-twice", "charge-payment"),
		effect("o-refunded", "refund-payment"), effect("o-refunded", "release-inventory"))

	ids := []string{"o-ok", "o-lost", "o-run", "o-twice", "o-refunded", "o-over", "o-quiet", "o-stopped"}
	v, ends := Check(workflow.MustSet(def), ids, tasks, records, ledger)
	require.Equal(t, []string{"o-lost"}, v.Lost)
	require.Equal(t, []string{"o-run"}, v.NotEnded)
	require.Equal(t, []string{"o-twice charge-payment/r1"}, v.AppliedTwice)
	require.Equal(t, []string{"o-refunded: step create-shipment took effect (Error after attempt 4) and has no undo",
		"o-stopped: step charge-payment may have taken effect (Pending after attempt 1) but its undo ran 0 times",
		"o-twice: Processed but charge-payment applied 2 times, undone 0 times"}, v.Inconsistent)
	require.Equal(t, []string{"o-over charge-payment 4/3"}, v.OverThreshold)
	require.Equal(t, []string{"o-quiet create-shipment"}, v.Unalerted)
	require.Equal(t, []string{"o-refunded create-shipment: " + tooLarge}, v.TooLarge)
	require.Equal(t, 9, v.Count())
	require.Equal(t, 3, ends[workflow.Processed])
	require.Equal(t, 1, ends[workflow.CompensationFailed], "an operator's case, alerted or not, is an end")
}

// A waits order Processed with no approval sent, or charged another amount
// than approved, is caught; one charged what was approved is not.
func TestCheckApprovalsFindsAnOrderThatDidNotWaitForItsApproval(t *testing.T) {
	ids := []string{"w-0", "w-1", "w-2"}
	tasks := map[string]statestore.Task{}
	for _, id := range ids {
		tasks[id] = statestore.Task{OrderID: id, Workflow: WaitsWorkflow, State: workflow.Processed}
	}
	charge := func(id string, cents int64) remotesim.Effect {
		return remotesim.Effect{OrderID: id, Action: "charge-payment", Input: json.RawMessage(fmt.Sprintf(`{"amountCents":%d}`, cents))}
	}
	ledger := []remotesim.Effect{charge("w-0", approvedCents(0)), charge("w-1", 5), charge("w-2", approvedCents(2))}
	approved := Plan{Seed: 1, Waits: 1} // every order waits; every approval sent
	require.Equal(t, []string{`w-1: charged {"amountCents":5}, approved 1001`}, checkApprovals(approved, ids, tasks, ledger))
	never := Plan{Seed: 1, Waits: 1, NoEvent: 1} // no approval sent at all
	require.Len(t, checkApprovals(never, ids, tasks, ledger), 4, "three Processed without an approval, one charged wrongly")
	require.Empty(t, checkApprovals(Plan{Seed: 1}, ids, tasks, ledger), "orders of the order workflow are not checked")
}

// A rejection is found only in the DLQ, with its reason.
func TestUnmatchedRejectionsAreReported(t *testing.T) {
	rs := []rejection{{"a", "body-a", "duplicate"}, {"b", "body-b", "no such order"}, {"c", "body-c", "x"}}
	got := map[string]string{"body-a": "invalid message: bad JSON: duplicate object member name", "body-b": "something else"}
	require.Equal(t, []string{`b: rejected as "something else", want "no such order"`, "c: not in the orders DLQ"}, unmatched(rs, got))
}

func TestTheWaitsWorkflowParses(t *testing.T) {
	d := waitsDefinition()
	require.Equal(t, WaitsWorkflow, d.Name)
	_, ok := d.WaitFor(approvedEvent)
	require.True(t, ok)
}

// A sealed run's bucket may keep a body sent by pointer in clear only if
// Submission did not take it: the check names an order stored and an event
// received whose bodies are still in clear, and counts the ones written
// over, by kind.
func TestClearCopyFindsWhatWasTakenLeftInClear(t *testing.T) {
	tasks := map[string]statestore.Task{"o-1": {OrderID: "o-1", Events: map[string]string{"approved": "e-1"}}}
	check := `{"$sasPayload":{"bucket":"b","key":"orders/o-1/x","bytes":9,"sha256":"00"}}`
	event := func(id, data string) []byte {
		b, err := json.Marshal(message.Event{Kind: message.KindEvent, OrderID: "o-1", Event: "approved", EventID: id, Data: json.RawMessage(data)})
		require.NoError(t, err)
		return b
	}
	for _, c := range []struct {
		name, body   string
		why, written string
	}{
		{"an order stored, in clear", `{"orderId":"o-1","customerId":"c","items":[]}`, "order o-1, stored", ""},
		{"an order not stored (refused)", `{"orderId":"o-9","customerId":"c","items":[]}`, "", ""},
		{"an order written over with its claim check", `{"orderId":"o-1",` + check[1:], "", "order"},
		{"an event received, in clear", string(event("e-1", `{"amountCents":1}`)), "event e-1 of order o-1, received", ""},
		{"an event refused (another eventId)", string(event("other-1", `{"amountCents":1}`)), "", ""},
		{"an event written over as stored", string(event("e-1", check)), "", "event"},
		{"not a body of the run", "not json", "", ""},
	} {
		why, written := clearCopy([]byte(c.body), tasks, nil)
		require.Equal(t, c.why, why, c.name)
		require.Equal(t, c.written, written, c.name)
	}
}
