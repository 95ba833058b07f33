package workflow

import (
	"cmp"
	"slices"
	"time"
)

// MoveKind is what a move does to one kind of order: one at a step of the
// earlier version (its needs done, it ready or waiting), or one whose every
// step is done but the last ones.
type MoveKind struct {
	// At is the step of the earlier version the order is at.
	At string
	// Moved is the move, or Err why such an order cannot move.
	Moved Moved
	Err   error
	// Undoes is what its undoing would run after the move, in order.
	Undoes []string
}

// Kinds are what the move does to each kind of order of From: one at each
// of its steps (what it needs done, it ready; a wait armed), as `sasctl
// workflow validate --from` prints them, so that a plan is checked by the
// rules before any order moves.
func (m Moving) Kinds() []MoveKind {
	var out []MoveKind
	ranAt := map[int]time.Time{} // each step done after what it needs, as an order runs them
	for k, i := range m.From.order() {
		ranAt[i] = time.Unix(int64(k+1), 0)
	}
	for _, i := range m.From.order() {
		o := m.From.Start(nil)
		done := map[int]bool{}
		var mark func(j int)
		mark = func(j int) {
			for _, n := range m.From.Needs(j) {
				if !done[n] {
					done[n] = true
					mark(n)
				}
			}
		}
		mark(i)
		for ref, r := range o.Recs {
			switch {
			case ref.Undo:
			case done[ref.Index]:
				r.State, r.Ready, r.Attempt, r.DoneAt = Processed, false, 1, ranAt[ref.Index]
			case ref.Index == i:
				r.Ready = true
			default:
				r.Ready = false
			}
			o.Recs[ref] = r
		}
		k := MoveKind{At: m.From.Steps[i].Name}
		k.Moved, k.Err = m.Move(o)
		if k.Err == nil {
			k.Undoes = k.Moved.Undoes()
		}
		out = append(out, k)
	}
	return out
}

// Undoes is what the moved order's undoing would run, in order: the undo
// actions of the steps it carried done, kept ones too, the latest done
// first, as the undoing orders them (Order.compensate).
func (mv Moved) Undoes() []string {
	var refs []Ref
	for ref, p := range mv.Recs {
		if ref.Undo && p.Carried {
			refs = append(refs, ref)
		}
	}
	slices.SortFunc(refs, func(a, b Ref) int {
		ta, tb := mv.doneAt[Ref{Index: a.Index, Item: a.Item}], mv.doneAt[Ref{Index: b.Index, Item: b.Item}]
		return -cmp.Or(boolCmp(ta.IsZero(), tb.IsZero()), ta.Compare(tb), a.Index-b.Index, a.Item-b.Item)
	})
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = RecordName(mv.Definition.Steps[r.Index].Undo.Name, r)
	}
	return out
}

// Kept are the steps the moved order keeps from earlier versions, done,
// for their undo alone (Step.Kept): those this move kept, and any an
// earlier move kept that it keeps still.
func (mv Moved) Kept() []string {
	var out []string
	for _, st := range mv.Definition.Steps {
		if st.Kept != "" {
			out = append(out, st.Name)
		}
	}
	return out
}
