package workflow

import (
	"slices"
	"time"
)

// UndoPlan is what the engine does when one step's service refuses it for
// good, every record the engine started before it done: the undo actions it
// runs, in the order it runs them, and how the order ends. It is found by
// the rules themselves (Start, Complete, Fail, UndoHeld) on a simulated
// order, not by a layout of its own: sasctl workflow show and the console
// draw the undo from it.
type UndoPlan struct {
	Step int // the step refused (of a forEach step, its first item)
	// Held: the step holds the order on failure (onFailure: hold) for the
	// operator, for HoldFor at most; Undo and End are what follows if the
	// order is undone then.
	Held    bool
	HoldFor time.Duration
	Undo    []Ref // the undo actions run, in order
	End     State // Failed, or CompensationFailed
	// Pivot, for CompensationFailed, is the record that took effect and
	// has no undo action: the undoing stops there, for the operator.
	Pivot *Ref
}

// UndoPlans are the plans of the steps that call an agent (the ones a
// service can refuse), in step order. The simulated order has one item for
// each forEach step, and starts its records in the order the engine makes
// them ready, each done as it starts: what completes before the refused
// step is what a run with every other call answered at once completes.
func (d Definition) UndoPlans() []UndoPlan {
	var out []UndoPlan
	for i, st := range d.Steps {
		if st.Kind() == KindAgent {
			out = append(out, d.undoPlan(i))
		}
	}
	return out
}

// UndoPlan is the plan of step i refused (UndoPlans); false if step i calls
// no agent.
func (d Definition) UndoPlan(i int) (UndoPlan, bool) {
	if i < 0 || i >= len(d.Steps) || d.Steps[i].Kind() != KindAgent {
		return UndoPlan{}, false
	}
	return d.undoPlan(i), true
}

// planEpoch is the simulated order's clock; each record is done a second
// after the one before.
var planEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// undoPlan runs a simulated order of d in which step i is refused.
func (d Definition) undoPlan(i int) UndoPlan {
	items := map[int]int{}
	for k, st := range d.Steps {
		if st.ForEach != "" {
			items[k] = 1
		}
	}
	o, queue := d.Start(items), d.Starts(items)
	p := UndoPlan{Step: i, End: o.State}
	now := planEpoch
	for n := 0; len(queue) > 0 && !o.State.Ended() && n <= 4*len(o.Recs); n++ {
		ref := queue[0]
		queue = queue[1:]
		if r := o.Recs[ref]; r.State != Pending || !o.Active(r) {
			continue // stopped: the order is undone, or held
		}
		now = now.Add(time.Second)
		m := d.planMove(o, ref, i, now)
		o = o.After(m)
		queue = append(queue, m.Ready...)
		p.note(m)
		if m.State == Held {
			p.Held, p.HoldFor = true, m.HeldUntil.Sub(now)
			undo, _ := o.UndoHeld() // the operator's undo, or its hold's end
			o = o.After(undo)
			queue = append(queue, undo.Ready...)
			p.note(undo)
		}
	}
	p.End = o.State
	return p
}

// planMove is what record ref does in the simulated order o: step i's
// record is refused, every other one is done.
func (d Definition) planMove(o Order, ref Ref, i int, now time.Time) Move {
	if o.Recs[ref].Kind == KindAgent {
		o = o.Claimed(ref)
	}
	if !ref.Undo && ref.Index == i {
		return o.Fail(ref, Refused, false, now)
	}
	return d.Complete(o, ref, now)
}

// note takes down what move m undid, and the pivot it stopped at.
func (p *UndoPlan) note(m Move) {
	for _, c := range m.Changes {
		if c.Ref.Undo && c.State == Processed && !slices.Contains(p.Undo, c.Ref) {
			p.Undo = append(p.Undo, c.Ref)
		}
	}
	if m.Pivot != nil {
		p.Pivot = m.Pivot
	}
}

// UndoName is the name of undo action ref as a plan shows it: its action's,
// "(each item)" after a forEach step's, whose items are undone one by one,
// the latest done first.
func (d Definition) UndoName(ref Ref) string {
	a, ok := d.Action(ref)
	switch {
	case !ok:
		return RecordName("?", ref)
	case ref.Item > 0:
		return a.Name + " (each item)"
	}
	return a.Name
}

// UndoNext are, for each undo action (by its action's name), the undo
// actions the engine runs right after it in some plan (UndoPlans), in plan
// order: the arrows of a drawing of the undo.
func (d Definition) UndoNext() map[string][]string {
	out := map[string][]string{}
	for _, p := range d.UndoPlans() {
		for k := 1; k < len(p.Undo); k++ {
			from, to := d.actionName(p.Undo[k-1]), d.actionName(p.Undo[k])
			if !slices.Contains(out[from], to) {
				out[from] = append(out[from], to)
			}
		}
	}
	return out
}

// actionName is the name of ref's action ("" if it has none).
func (d Definition) actionName(ref Ref) string {
	a, _ := d.Action(ref)
	return a.Name
}
