package workflow

// Ref names a record of a task: a step, or the undo action of a step.
type Ref struct {
	Index int  // the step's position in the workflow
	Undo  bool // the step's undo action rather than the step
}

// UndoFrom is the undo action to start when step i fails for good: that of
// the latest earlier step that has one, or -1 when there is nothing to undo.
func (d Definition) UndoFrom(i int) int {
	for j := min(i, len(d.Steps)) - 1; j >= 0; j-- {
		if d.Steps[j].Undo != nil {
			return j
		}
	}
	return -1
}

// UndoOnTimeout is the undo action to start when step i is given up on after
// timing out: its outcome is unknown (the remote may have applied it and the
// reply been lost), so its own undo runs first if it has one; undo actions
// are idempotent and must accept "nothing to undo".
func (d Definition) UndoOnTimeout(i int) int {
	if i >= 0 && i < len(d.Steps) && d.Steps[i].Undo != nil {
		return i
	}
	return d.UndoFrom(i)
}

// Next is what follows the successful completion of r: the next record to
// make ready, or, when ok is false, none, and the task ends in state end.
func (d Definition) Next(r Ref) (next Ref, ok bool, end State) {
	if r.Undo {
		if j := d.UndoFrom(r.Index); j >= 0 {
			return Ref{Index: j, Undo: true}, true, ""
		}
		return Ref{}, false, Failed
	}
	if r.Index+1 < len(d.Steps) {
		return Ref{Index: r.Index + 1}, true, ""
	}
	return Ref{}, false, Processed
}

// Action returns the action r names, or false if the definition has none.
func (d Definition) Action(r Ref) (Action, bool) {
	if r.Index < 0 || r.Index >= len(d.Steps) {
		return Action{}, false
	}
	s := d.Steps[r.Index]
	if !r.Undo {
		return s.Action, true
	}
	if s.Undo == nil {
		return Action{}, false
	}
	return *s.Undo, true
}
