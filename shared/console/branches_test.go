package console

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The parallel example's branches: the three starts one under the other in
// the first column, the charge after all three, the items as one box
// counting those done, the shipment last; an arrow from each need.
func TestBranchesAreLaidOutByLevel(t *testing.T) {
	t.Parallel()
	rec := func(name string, i, item int, undo bool, st workflow.State) operator.Record {
		return operator.Record{Name: name, Kind: "agent", State: st, Step: statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: i, Item: item, Undo: undo}}}}
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

// No arrow crosses a box, whatever the shape: generated workflows of every
// shape (needs reaching back several levels among them), each laid out,
// every segment of every edge checked against the inside of every box.
func TestNoArrowCrossesABox(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	skips := 0
	for n := range 300 {
		d := shapes.Random(rng, fmt.Sprintf("s%d", n), shapes.Defaults())
		if n%3 == 0 {
			d = shapes.Branches(shapes.Defaults())
		}
		var recs []operator.Record
		needs := map[string][]string{}
		for i, st := range d.Steps {
			recs = append(recs, operator.Record{Name: st.Name, Kind: string(st.Kind()), State: workflow.Pending, Step: statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: i}}}})
			if st.Undo != nil {
				recs = append(recs, operator.Record{Name: st.Undo.Name, Kind: "agent", State: workflow.Pending, Step: statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: i, Undo: true}}}})
			}
			needs[st.Name] = []string{}
			for _, j := range d.Needs(i) {
				needs[st.Name] = append(needs[st.Name], d.Steps[j].Name)
				if j < i-1 {
					skips++
				}
			}
		}
		g := layoutOf(operator.Status{Records: recs, Needs: needs})
		for _, e := range g.Edges {
			for _, seg := range e.Segments() {
				for _, b := range g.Boxes {
					require.False(t, crosses(seg, b), "%s: edge %+v crosses box %s (%d,%d)", d.Name, e, b.Name, b.X, b.Y)
				}
			}
		}
	}
	require.Positive(t, skips, "some needs reach back past a level")
}

// crosses reports whether the segment, horizontal or vertical, or any
// straight one sampled along, enters the inside of b (its border excluded:
// a connector ends on it).
func crosses(seg [2]point, b box) bool {
	const steps = 200
	for k := 0; k <= steps; k++ {
		x := float64(seg[0].X) + float64(seg[1].X-seg[0].X)*float64(k)/steps
		y := float64(seg[0].Y) + float64(seg[1].Y-seg[0].Y)*float64(k)/steps
		if x > float64(b.X)+1 && x < float64(b.X+b.W)-1 && y > float64(b.Y)+1 && y < float64(b.Y+b.H)-1 {
			return true
		}
	}
	return false
}

// A step an order keeps from an earlier version (migrate.keep) is drawn as
// such: marked kept, its tip saying from which version, for its undo only.
func TestAKeptStepIsDrawnAsKept(t *testing.T) {
	t.Parallel()
	rec := func(name string, i int, undo bool, st workflow.State) operator.Record {
		return operator.Record{Name: name, Kind: "agent", State: st, Step: statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: i, Undo: undo}}}}
	}
	recs := []operator.Record{rec("validate", 0, false, workflow.Processed), rec("credit", 1, false, workflow.Pending),
		rec("ocr", 2, false, workflow.Processed), rec("drop-ocr", 2, true, workflow.Pending)}
	g := layoutOf(operator.Status{Records: recs, Kept: map[string]string{"ocr": "8614e3d5"}})
	for _, b := range g.Boxes {
		if b.Name == "ocr" {
			require.Contains(t, b.Class, "kept")
			require.Equal(t, "kept from version 8614e3d5 (undo only: done before a move, never run again)", b.Tip)
			continue
		}
		require.NotContains(t, b.Class, "kept", b.Name)
	}
}
