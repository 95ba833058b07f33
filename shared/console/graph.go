package console

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// graph is an order's workflow laid out for an SVG: the steps left to right
// with arrows in the order they run, each undo action under its step, and
// arrows between the undo actions in the order the engine runs them.
type graph struct {
	W, H  int
	Boxes []box
	Edges []edge
}

// box is one record: a step or an undo action.
type box struct {
	X, Y, W, H int
	Name       string
	State      workflow.State
	Class      string // st-<State>, and "idle" for a record never made ready
	Undo       bool
	Tip        string // its last error, on hover
	Waiting    *operator.Waiting
	Lines      []line
}

// line is a line of text inside a box.
type line struct {
	X, Y int
	Text string
	Bold bool
}

// edge is an arrow (or, with Plain, a line) between two boxes: straight
// from (X1, Y1) to (X2, Y2), or through Via, points of a route around the
// boxes between them.
type edge struct {
	X1, Y1, X2, Y2 int
	Via            []point
	Class          string
	Plain          bool
}

// point is a point of an edge's route.
type point struct{ X, Y int }

// Segments are the edge's straight pieces, in order.
func (e edge) Segments() [][2]point {
	pts := append(append([]point{{e.X1, e.Y1}}, e.Via...), point{e.X2, e.Y2})
	var out [][2]point
	for i := 1; i < len(pts); i++ {
		out = append(out, [2]point{pts[i-1], pts[i]})
	}
	return out
}

// Path is the edge as an SVG path.
func (e edge) Path() string {
	d := fmt.Sprintf("M%d,%d", e.X1, e.Y1)
	for _, p := range e.Via {
		d += fmt.Sprintf(" L%d,%d", p.X, p.Y)
	}
	return d + fmt.Sprintf(" L%d,%d", e.X2, e.Y2)
}

const (
	boxW, boxH   = 200, 86
	gapX, margin = 56, 16
	stepY        = 16
	undoY        = stepY + boxH + 56
)

// layout places the records: steps (by index), and undo actions under the
// steps they undo, with an arrow from each undo action to those the engine
// runs right after it (undoNext, by name: operator.Status.UndoNext).
func layout(recs []operator.Record, undoNext map[string][]string) graph {
	var steps []operator.Record
	undos := map[int]operator.Record{}
	for _, r := range recs {
		if r.Undo {
			undos[r.Index] = r
		} else {
			steps = append(steps, r)
		}
	}
	slices.SortFunc(steps, func(a, b operator.Record) int { return a.Index - b.Index })
	g := graph{W: 2*margin + len(steps)*boxW + max(len(steps)-1, 0)*gapX, H: stepY + boxH + 24}
	if len(undos) > 0 {
		g.H = undoY + boxH + 24
	}
	undoCol := map[string]int{} // an undo action's column, by name
	for col, st := range steps {
		g.Boxes = append(g.Boxes, newBox(st, colX(col), stepY))
		if col > 0 {
			g.Edges = append(g.Edges, edge{X1: colX(col-1) + boxW, Y1: stepY + boxH/2, X2: colX(col) - 4, Y2: stepY + boxH/2, Class: "forward"})
		}
		if u, ok := undos[st.Index]; ok {
			g.addUndo(u, col)
			undoCol[u.Name] = col
		}
	}
	g.addUndoOrder(undoCol, undoNext)
	return g
}

// colX is the left edge of a column's boxes.
func colX(col int) int { return margin + col*(boxW+gapX) }

// addUndo places an undo action under its step's column, linked to it.
func (g *graph) addUndo(u operator.Record, col int) {
	x := colX(col)
	g.Boxes = append(g.Boxes, newBox(u, x, undoY))
	g.Edges = append(g.Edges, edge{X1: x + boxW/2, Y1: stepY + boxH, X2: x + boxW/2, Y2: undoY, Class: "undoes", Plain: true})
}

// addUndoOrder draws an arrow from each undo action to each the engine runs
// right after it: back, right to left, as a line of steps is undone.
func (g *graph) addUndoOrder(undoCol map[string]int, undoNext map[string][]string) {
	for _, from := range slices.Sorted(maps.Keys(undoNext)) {
		col, ok := undoCol[from]
		for _, to := range undoNext[from] {
			next, found := undoCol[to]
			if !ok || !found || next == col {
				continue
			}
			y := undoY + boxH/2
			e := edge{X1: colX(col), Y1: y, X2: colX(next) + boxW + 4, Y2: y, Class: "back"}
			if next > col { // forward: from its right edge to the next one's left
				e.X1, e.X2 = colX(col)+boxW, colX(next)-4
			}
			g.Edges = append(g.Edges, e)
		}
	}
}

func newBox(r operator.Record, x, y int) box {
	b := box{X: x, Y: y, W: boxW, H: boxH, Name: r.Name, State: r.State, Undo: r.Undo, Tip: r.LastError,
		Class: "st-" + string(r.State), Waiting: r.Waiting}
	if r.State == workflow.Pending && r.ReadyAt.IsZero() && r.Attempt == 0 {
		b.Class += " idle"
	}
	if r.Waiting != nil {
		b.Class += " waiting"
	}
	for i, t := range boxLines(r) {
		b.Lines = append(b.Lines, line{X: x + 10, Y: y + 21 + i*18, Text: t, Bold: i == 0})
	}
	return b
}

// boxLines are a record's lines of text: its name, what it is and its
// state, then its attempt and its CompleteBy, or, while it waits, what for,
// since when and until when.
func boxLines(r operator.Record) []string {
	kind := "step · " + r.Agent
	switch {
	case r.Undo:
		kind = "undo · " + r.Agent
	case r.Kind == "event":
		kind = "wait · " + r.Event
	case r.Kind == "timer":
		kind = "timer"
	case r.Async:
		kind += " (async)"
	}
	lines := []string{short(r.Name, 26), fmt.Sprintf("%s · %s", kind, r.State)}
	if w := r.Waiting; w != nil {
		return append(lines, "waits since "+operator.Clock(w.Since, w.Since), "until "+operator.Clock(w.Until, w.Since))
	}
	if r.Kind != "agent" {
		if !r.DoneAt.IsZero() {
			lines = append(lines, "done "+clock(r.DoneAt))
		}
		return lines
	}
	return append(lines, fmt.Sprintf("attempt %d · failures %d/%d", r.Attempt, r.FailureCount, r.MaxFailures),
		"CompleteBy "+operator.Clock(r.CompleteBy, time.Now()))
}

// clock is a time of day, or "-".
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}

func short(s string, n int) string {
	if len([]rune(s)) > n {
		return string([]rune(s)[:n-1]) + "…"
	}
	return s
}
