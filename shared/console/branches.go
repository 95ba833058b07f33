package console

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// layoutOf lays out an order's graph: a line of steps (layout), or, for a
// workflow whose steps run at once, its branches (layoutBranches).
func layoutOf(st operator.Status) graph {
	var g graph
	if len(st.Needs) == 0 {
		g = layout(st.Records, st.UndoNext)
	} else {
		g = layoutBranches(st.Records, st.Needs)
	}
	for i, b := range g.Boxes {
		if from, ok := st.Kept[b.Name]; ok && !b.Undo {
			g.Boxes[i].Class += " kept"
			g.Boxes[i].Tip = strings.TrimPrefix(b.Tip+"; kept from version "+from+" (undo only: done before a move, never run again)", "; ")
		}
	}
	return g
}

// rowH is the height of one row of a branched graph: a step and its undo.
const rowH = 2*boxH + 56 + 24

// layoutBranches places each step in the column of its level (one after
// the latest of its needs), the steps of one level one under the other,
// each step's undo under it, with an arrow from each step it needs. A
// forEach step is one box standing for its items: their states counted,
// the box in the state that matters most (an Error, else one running).
func layoutBranches(recs []operator.Record, needs map[string][]string) graph {
	steps, undos := mergeItems(recs)
	level := map[string]int{}
	var levelOf func(name string, depth int) int
	levelOf = func(name string, depth int) int {
		if l, ok := level[name]; ok || depth > len(needs) {
			return l
		}
		l := 0
		for _, n := range needs[name] {
			l = max(l, levelOf(n, depth+1)+1)
		}
		level[name] = l
		return l
	}
	rows := map[int]int{} // a level's steps so far
	at := map[string][2]int{}
	var g graph
	for _, st := range steps {
		col := levelOf(baseName(st), 0)
		row := rows[col]
		rows[col]++
		x, y := colX(col), stepY+row*rowH
		at[baseName(st)] = [2]int{x, y}
		g.Boxes = append(g.Boxes, newBox(st, x, y))
		if u, ok := undos[st.Index]; ok {
			g.Boxes = append(g.Boxes, newBox(u, x, y+boxH+56))
			g.Edges = append(g.Edges, edge{X1: x + boxW/2, Y1: y + boxH, X2: x + boxW/2, Y2: y + boxH + 56, Class: "undoes", Plain: true})
		}
		g.W = max(g.W, x+boxW+margin)
		g.H = max(g.H, y+rowH)
	}
	for _, st := range steps {
		to := at[baseName(st)]
		for _, n := range needs[baseName(st)] {
			from, ok := at[n]
			if !ok {
				continue
			}
			g.Edges = append(g.Edges, route(from, to))
		}
	}
	return g
}

// route is the arrow from the step at from (its box's top left) to the one
// at to: straight across the gap between adjacent columns; from further
// back, out into the gap after from's column, along the free lane just
// above to's row (between rows, no box is there), and in through the gap
// before to's column, so that it crosses no step's box and no undo's.
func route(from, to [2]int) edge {
	e := edge{X1: from[0] + boxW, Y1: from[1] + boxH/2, X2: to[0] - 4, Y2: to[1] + boxH/2, Class: "forward"}
	if to[0]-from[0] <= boxW+gapX {
		return e
	}
	lane := to[1] - 12 // between the row above and to's: 24 px free
	out, in := from[0]+boxW+gapX/2, to[0]-gapX/2
	e.Via = []point{{out, e.Y1}, {out, lane}, {in, lane}, {in, e.Y2}}
	return e
}

// mergeItems are the steps (a forEach step's items merged into one record
// standing for them) and their undos, by step.
func mergeItems(recs []operator.Record) ([]operator.Record, map[int]operator.Record) {
	var steps []operator.Record
	undos := map[int]operator.Record{}
	type step struct {
		index int
		undo  bool
	}
	items := map[step][]operator.Record{} // a forEach step's items, or their undos
	for _, r := range recs {
		switch {
		case r.Item > 0:
			k := step{r.Index, r.Undo}
			items[k] = append(items[k], r)
		case r.Undo:
			undos[r.Index] = r
		default:
			steps = append(steps, r)
		}
	}
	for k, rs := range items {
		m := merged(rs)
		if k.undo {
			undos[m.Index] = m
		} else {
			steps = append(steps, m)
		}
	}
	slices.SortFunc(steps, func(a, b operator.Record) int { return a.Index - b.Index })
	return steps, undos
}

// merged is one record standing for a forEach step's items (or their
// undos): named for the step, in the state that matters most, its line
// counting the items done.
func merged(items []operator.Record) operator.Record {
	m := items[0]
	m.Item, m.Name = 0, stepName(m.Name)
	done := 0
	for _, r := range items {
		switch {
		case r.State == workflow.Processed:
			done++
		case r.State == workflow.Error || m.State == workflow.Error:
			m.State, m.LastError = workflow.Error, r.LastError
		case r.State == workflow.Processing:
			m.State = workflow.Processing
		}
	}
	if done == len(items) {
		m.State = workflow.Processed
	}
	m.Name = fmt.Sprintf("%s ×%d (%d done)", m.Name, len(items), done)
	m.Item = -1 // stands for the step's items
	return m
}

// baseName is the name of the step a record stands for.
func baseName(r operator.Record) string {
	if r.Item < 0 {
		name, _, _ := strings.Cut(r.Name, " ×")
		return name
	}
	return r.Name
}

// stepName is a record's name without its item (pack-item#2: pack-item).
func stepName(name string) string {
	step, _, _ := strings.Cut(name, "#")
	return step
}
