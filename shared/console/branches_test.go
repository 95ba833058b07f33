package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// The parallel example's branches: the three starts one under the other in
// the first column, the charge after all three, the items as one box
// counting those done, the shipment last; an arrow from each need.
func TestBranchesAreLaidOutByLevel(t *testing.T) {
	t.Parallel()
	rec := func(name string, i, item int, undo bool, st workflow.State) operator.Record {
		return operator.Record{Name: name, Index: i, Item: item, Undo: undo, Kind: "agent", State: st}
	}
	recs := []operator.Record{
		rec("reserve-east", 0, 0, false, workflow.Processed), rec("reserve-west", 1, 0, false, workflow.Processing),
		rec("authorize-payment", 2, 0, false, workflow.Processed), rec("charge-payment", 3, 0, false, workflow.Pending),
		rec("pack-item#1", 4, 1, false, workflow.Processed), rec("pack-item#2", 4, 2, false, workflow.Processing),
		rec("create-shipment", 5, 0, false, workflow.Pending), rec("release-east", 0, 0, true, workflow.Pending),
		rec("unpack-item#1", 4, 1, true, workflow.Pending), rec("unpack-item#2", 4, 2, true, workflow.Pending),
	}
	needs := map[string][]string{"reserve-east": {}, "reserve-west": {}, "authorize-payment": {},
		"charge-payment": {"reserve-east", "reserve-west", "authorize-payment"}, "pack-item": {"charge-payment"},
		"create-shipment": {"pack-item"}}
	g := layoutOf(operator.Status{Records: recs, Needs: needs})
	at := map[string]box{}
	for _, b := range g.Boxes {
		at[b.Name] = b
	}
	require.Len(t, g.Boxes, 8, "six steps, the items as one, two undos")
	east, west, auth := at["reserve-east"], at["reserve-west"], at["authorize-payment"]
	require.Equal(t, east.X, west.X, "the starts share a column")
	require.Equal(t, east.X, auth.X)
	require.Less(t, east.Y, west.Y)
	require.Greater(t, at["charge-payment"].X, east.X)
	pack := at["pack-item ×2 (1 done)"]
	require.Equal(t, workflow.Processing, pack.State, "an item runs")
	require.Greater(t, pack.X, at["charge-payment"].X)
	require.Contains(t, at, "unpack-item ×2 (0 done)")
	forward := 0
	for _, e := range g.Edges {
		if e.Class == "forward" {
			forward++
		}
	}
	require.Equal(t, 5, forward, "three into the charge, one into the packing, one into the shipment")

	line := layoutOf(operator.Status{Records: recs[:4]})
	require.Equal(t, line.Boxes[1].Y, line.Boxes[0].Y, "with no needs, a line")
}
