package workflow

// Ref names a record of a task: a step, or the undo action of a step; for a
// step that runs per item (forEach), one item's.
type Ref struct {
	Index int  // the step's position in the workflow
	Undo  bool // the step's undo action rather than the step
	Item  int  `json:",omitempty"` // 1-based item of a forEach step; 0 for a step that runs once
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
