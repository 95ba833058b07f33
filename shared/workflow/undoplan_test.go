package workflow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// pivotFlow has a step without undo between two with one: past it, the
// engine cannot undo what came before.
const pivotFlow = `name: pivot
agents:
  shop: {endpoint: "https://shop.example.com"}
defaults: {timeout: 10s}
steps:
  - {name: reserve, agent: shop, undo: {name: release}}
  - {name: ship, agent: shop}
  - {name: charge, agent: shop, undo: {name: refund}}
  - {name: notify, agent: shop, onFailure: hold, holdFor: 2h}
`

// The plans are what the rules do, not a line of undo actions: refused
// after the step that cannot be undone, the order undoes what came after
// it and ends CompensationFailed, naming it.
func TestUndoPlansStopAtAStepThatCannotBeUndone(t *testing.T) {
	d, err := workflow.ParseFile("pivot.yaml", []byte(pivotFlow), workflow.Options{})
	require.NoError(t, err)
	ship := workflow.Ref{Index: 1}
	release, refund := workflow.Ref{Index: 0, Undo: true}, workflow.Ref{Index: 2, Undo: true}
	require.Equal(t, []workflow.UndoPlan{
		{Step: 0, End: workflow.Failed},
		{Step: 1, Undo: []workflow.Ref{release}, End: workflow.Failed},
		{Step: 2, End: workflow.CompensationFailed, Pivot: &ship},
		{Step: 3, Held: true, HoldFor: 2 * time.Hour, Undo: []workflow.Ref{refund}, End: workflow.CompensationFailed, Pivot: &ship},
	}, d.UndoPlans())
	_, ok := d.UndoPlan(4)
	require.False(t, ok)
}
