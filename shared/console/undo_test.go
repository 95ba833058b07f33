package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// pivotFlow's ship has run and cannot be undone: the engine never undoes
// reserve after refund, so no arrow leads from one to the other.
const pivotFlow = `name: pivot
agents:
  shop: {endpoint: "https://shop.example.com"}
defaults: {timeout: 10s}
steps:
  - {name: reserve, agent: shop, undo: {name: release}}
  - {name: ship, agent: shop}
  - {name: charge, agent: shop, undo: {name: refund}}
  - {name: notify, agent: shop}
`

// The undo arrows of a line of steps are the engine's (its UndoNext, as the
// order's status carries it), not one from each undo action to the one
// before it.
func TestTheUndoArrowsAreTheEngines(t *testing.T) {
	t.Parallel()
	pivot, err := workflow.ParseFile("pivot.yaml", []byte(pivotFlow), workflow.Options{})
	require.NoError(t, err)
	for _, c := range []struct {
		d    workflow.Definition
		back [][2]string // undo actions, the one run first and the one after it
	}{
		{pivot, nil},
		{workflow.MustExample(workflow.OrderWorkflow), [][2]string{{"refund-payment", "release-inventory"}}},
	} {
		d := c.d
		var recs []operator.Record
		for i, st := range d.Steps {
			recs = append(recs, operator.Record{Name: st.Name, Kind: "agent", State: workflow.Pending, Step: statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: i}}}})
			if st.Undo != nil {
				recs = append(recs, operator.Record{Name: st.Undo.Name, Kind: "agent", State: workflow.Pending, Step: statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: i, Undo: true}}}})
			}
		}
		g := layoutOf(operator.Status{Records: recs, UndoNext: d.UndoNext()})
		at := map[int]string{} // an undo box's left edge → its name
		for _, b := range g.Boxes {
			if b.Undo {
				at[b.X] = b.Name
			}
		}
		var back [][2]string
		for _, e := range g.Edges {
			if e.Class == "back" {
				back = append(back, [2]string{at[e.X1], at[e.X2-boxW-4]})
			}
		}
		require.Equal(t, c.back, back, d.Name)
	}
}
