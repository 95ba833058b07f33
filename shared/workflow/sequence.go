package workflow

// Ref names a record of a task: a step, or the undo action of a step; for a
// step that runs per item (forEach), one item's.
type Ref struct {
	Index int  // the step's position in the workflow
	Undo  bool // the step's undo action rather than the step
	Item  int  `json:",omitempty"` // 1-based item of a forEach step; 0 for a step that runs once
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

// Aftermath is what follows a record failing for good: the undo action to
// start, and the task's state from then on.
type Aftermath struct {
	UndoFrom int   // the step whose undo action starts; -1 for none
	Next     State // Compensating (an undo starts, or is awaited), Failed or CompensationFailed
	// UndoItem is the item of the undo that starts, for a forEach step's
	// (0: none). Stop are the records ready but not claimed that will not
	// run now (a workflow with parallel steps: the order is undone).
	UndoItem int   `json:",omitempty"`
	Stop     []Ref `json:",omitempty"`
}

// Undo is the undo action the aftermath starts, if any.
func (a Aftermath) Undo() (Ref, bool) {
	if a.Next != Compensating || a.UndoFrom < 0 {
		return Ref{}, false
	}
	return Ref{Index: a.UndoFrom, Undo: true, Item: a.UndoItem}, true
}

// AfterRefusal is the aftermath of a step (undo false) or an undo action
// (undo true) refused for good by its remote service: a refused step did
// nothing, so the earlier completed steps are undone from undoFrom (-1: there
// are none, and the task ends Failed); a refused undo action ends the task
// CompensationFailed.
func AfterRefusal(undo bool, undoFrom int) Aftermath {
	switch {
	case undo:
		return Aftermath{UndoFrom: -1, Next: CompensationFailed}
	case undoFrom >= 0:
		return Aftermath{UndoFrom: undoFrom, Next: Compensating}
	default:
		return Aftermath{UndoFrom: -1, Next: Failed}
	}
}

// AfterGiveUp is the aftermath of a record given up on (its attempts timed
// out, or the order's deadline passed). Its outcome may be unknown: the
// remote may have applied it and the reply been lost.
//   - an undo action: the task ends CompensationFailed;
//   - a step never claimed (no attempt): it did nothing; as a refusal;
//   - a step with an undo action: its own undo runs first (undo actions are
//     idempotent and accept "nothing to undo"), then the earlier ones;
//   - a step without an undo action that ran (a pivot): its effect may have
//     happened and nothing can undo it, and undoing the earlier steps would be
//     as wrong as leaving them (a refund for an order that shipped). Nothing
//     is undone; the task ends CompensationFailed and the operator, told so,
//     checks the remote and resubmits the step (same idempotency key).
func AfterGiveUp(undo, hasUndo, ran bool, index, undoFrom int) Aftermath {
	switch {
	case undo:
		return AfterRefusal(true, -1)
	case !ran:
		return AfterRefusal(false, undoFrom)
	case hasUndo:
		return Aftermath{UndoFrom: index, Next: Compensating}
	default:
		return Aftermath{UndoFrom: -1, Next: CompensationFailed}
	}
}
