package operator

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// An order in flight is counted by what it waits for: at work if one of
// its records is (a branch that works outranks one that waits), else by
// the first of its flow control, a callback, an event, a timer; held with
// its held record's cause; a record ready for an agent that holds its
// calls waits in its flow control.
func TestAnOrderInFlightIsCountedByWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	ready := statestore.Spot{Step: "charge", Agent: "payment", State: workflow.Pending}
	running := statestore.Spot{Step: "ship", Agent: "shipping", State: workflow.Processing}
	event := statestore.Spot{Step: "approve", State: workflow.Pending, Waits: statestore.ForEvent, Event: "approved"}
	timer := statestore.Spot{Step: "nap", State: workflow.Pending, Waits: statestore.ForTimer}
	callback := statestore.Spot{Step: "scan", Agent: "ocr", State: workflow.Processing, Waits: statestore.ForCallback}
	flowed := statestore.Spot{Step: "charge", Agent: "payment", State: workflow.Pending, Waits: statestore.ForFlow,
		Why: `waiting for a slot of key "c-1" (2nd in line)`}
	refused := statestore.Spot{Step: "charge", Agent: "payment", State: workflow.Error, Cause: workflow.Refused}
	paused := func(agent string) string {
		if agent == "payment" {
			return "agent payment is paused (by ops)"
		}
		return ""
	}
	none := func(string) string { return "" }
	for _, c := range []struct {
		state workflow.State
		at    []statestore.Spot
		holds func(string) string
		want  string
	}{
		{workflow.Pending, []statestore.Spot{ready}, none, "at work"},
		{workflow.Pending, []statestore.Spot{running}, paused, "at work"},
		{workflow.Pending, []statestore.Spot{event}, none, "event: approved"},
		{workflow.Pending, []statestore.Spot{timer}, none, "timer"},
		{workflow.Pending, []statestore.Spot{callback}, none, "callback"},
		{workflow.Pending, []statestore.Spot{flowed}, none, "flow: line"},
		{workflow.Pending, []statestore.Spot{ready}, paused, "flow: pause"},
		{workflow.Pending, []statestore.Spot{timer, event, ready}, none, "at work"},
		{workflow.Pending, []statestore.Spot{timer, event}, none, "event: approved"},
		{workflow.Pending, []statestore.Spot{timer, callback, event}, none, "callback"},
		{workflow.Pending, []statestore.Spot{event, ready}, paused, "flow: pause"},
		{workflow.Pending, nil, none, "at work"},
		{workflow.Held, []statestore.Spot{refused, event}, none, "held: refused"},
		{workflow.Held, nil, none, "held"},
		{workflow.Compensating, []statestore.Spot{{Step: "charge", Undo: true, State: workflow.Pending}}, none, "undoing"},
	} {
		require.Equal(t, c.want, WaitReason(statestore.Task{State: c.state, At: c.at}, c.holds), "%s at %+v", c.state, c.at)
	}
}

// A flow control's wait is named by the class a search by reason takes
// (sasctl list --reason), whoever said it: the record's own give-back or
// its agent's hold.
func TestAFlowWaitIsNamedByItsReasonClass(t *testing.T) {
	t.Parallel()
	for why, class := range map[string]string{
		"agent payment is paused (by ops)":                                    "pause",
		`waiting for a slot of key "c-1" (its line is full)`:                  "line",
		"waiting for its rate turn (agent payment, 50/s)":                     "rate",
		"agent payment's service asked for no calls before 2026-12-07T18:00Z": "503",
		"agent payment's service slowed it until 2026-12-07T18:00:00Z":        "503",
		"something new: with details":                                         "something new",
	} {
		require.Equal(t, class, statestore.FlowClass(why), why)
	}
}
