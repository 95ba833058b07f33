package workflow

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// An order keeps the definition it started with; an operator may move it to
// another version of its workflow (sasctl migrate). The move is one more
// rule: given the order as read and the two versions, it says where each of
// the order's records stands in the version moved to, or why the order
// cannot move now. Steps are matched by name (a plan may rename them). An
// order moves only at a safe point: running forward or held, with no
// attempt at work that could still record an outcome (an async call its
// service accepted keeps its place and its token, if its step keeps its
// position and its action). Every step that took effect must exist in the
// version moved to, and keeps the undo of the version that ran it (unless
// the plan gives it the new one). A new step before a step the order already
// started must be declared skipped.

// Migration is a workflow file's migrate: section: how orders of an earlier
// version move to this one. It is not part of the version (adding one does
// not change what the workflow runs).
type Migration struct {
	// Rename maps an earlier version's step names to this version's.
	Rename map[string]string `json:",omitempty"`
	// Skip are new steps that an order already past them (a step that
	// needs them started) records as skipped, never run.
	Skip []string `json:",omitempty"`
	// NewUndo are steps whose undo, for an order that already ran them, is
	// this version's rather than the one of the version that ran them.
	NewUndo []string `json:",omitempty"`
}

// IsZero reports whether the plan says nothing.
func (m Migration) IsZero() bool {
	return len(m.Rename) == 0 && len(m.Skip) == 0 && len(m.NewUndo) == 0
}

// check reports what in the plan does not name a step of d.
func (m Migration) check(d Definition) Problems {
	var ps Problems
	for _, from := range sortedKeys(m.Rename) {
		if to := m.Rename[from]; d.Index(to) < 0 {
			ps = append(ps, Problem{Field: "migrate.rename." + from, What: fmt.Sprintf("%q is not a step of this workflow", to)})
		}
	}
	for i, name := range m.Skip {
		if d.Index(name) < 0 {
			ps = append(ps, Problem{Field: fmt.Sprintf("migrate.skip[%d]", i), What: fmt.Sprintf("%q is not a step of this workflow", name)})
		}
	}
	for i, name := range m.NewUndo {
		if d.Index(name) < 0 {
			ps = append(ps, Problem{Field: fmt.Sprintf("migrate.newUndo[%d]", i), What: fmt.Sprintf("%q is not a step of this workflow", name)})
		}
	}
	return ps
}

// Moving is a move of orders from one version of a workflow to another, by
// the plan of the version moved to (To.Migrate).
type Moving struct {
	From, To Definition
}

// Placed is where one record of a moved order stands in the version moved
// to.
type Placed struct {
	// Carried: the record is the order's record From, carried over with its
	// state, attempts and result (a step it started, a wait armed).
	// Otherwise it is new: Pending, ready if Ready.
	Carried bool
	From    Ref
	// New: a step the earlier version has not (From names no record).
	New   bool
	Ready bool
	// Skipped: a new step the order is past, recorded as done with no
	// effect.
	Skipped bool
}

// Moved is an order as a move leaves it.
type Moved struct {
	// Recs are every record of the order in the version moved to.
	Recs map[Ref]Placed
	// Definition is what the order runs from now on: To, or, when a step it
	// ran keeps the undo of the version that ran it and that differs, To
	// with that undo (a version of its own, Base To's).
	Definition Definition
	// Ready are the records ready after the move that were not ready, or
	// not this record, before it: their requests are to be sent.
	Ready []Ref
	// Dropped are the steps of the earlier version the order leaves behind
	// (not started, or done with nothing to undo).
	Dropped []string
}

// NotMovableError says why an order cannot move now.
type NotMovableError struct{ Reasons []string }

// Error says why.
func (e *NotMovableError) Error() string { return strings.Join(e.Reasons, "; ") }

// step is what a move reads of one step of the earlier version in an order.
type movingStep struct {
	from, to int  // its index in each version (to: -1, none)
	started  bool // it took or may have taken effect: done, failed, at work, or given back
	armed    bool // a wait or a timer armed and not started otherwise
	recs     []Ref
}

// Move places the records of order o, of version From, in version To, or
// says why it cannot move (*NotMovableError).
func (m Moving) Move(o Order) (Moved, error) {
	var why []string
	refuse := func(format string, args ...any) { why = append(why, fmt.Sprintf(format, args...)) }
	switch {
	case m.From.Name != m.To.Name:
		return Moved{}, &NotMovableError{[]string{fmt.Sprintf("it runs workflow %q, not %q", m.From.Name, m.To.Name)}}
	case o.State != Pending && o.State != Held:
		return Moved{}, &NotMovableError{[]string{fmt.Sprintf("it is %s: only an order running forward or held moves", o.State)}}
	case o.Cancelled:
		return Moved{}, &NotMovableError{[]string{"it is being cancelled"}}
	}
	steps := m.steps(o, refuse)
	byTo := map[int]*movingStep{}
	var dropped []string
	for i := range steps {
		s := &steps[i]
		name := m.From.Steps[s.from].Name
		switch {
		case s.to >= 0 && byTo[s.to] != nil:
			refuse("steps %s and %s both become %s in version %s", m.From.Steps[byTo[s.to].from].Name, name, m.To.Steps[s.to].Name, m.To.Version)
		case s.to >= 0:
			byTo[s.to] = s
		case s.started && !m.From.Steps[s.from].NoUndo && !nothingToUndo(o, s.recs):
			refuse("step %s ran and version %s has no step %s (rename it under migrate.rename)", name, m.To.Version, name)
		default:
			dropped = append(dropped, name)
		}
	}
	if len(why) > 0 {
		return Moved{}, &NotMovableError{why}
	}
	out := Moved{Recs: map[Ref]Placed{}, Dropped: dropped}
	m.place(o, byTo, &out, refuse)
	def, err := m.definition(byTo)
	if err != nil {
		refuse("%s", err)
	}
	if len(why) > 0 {
		return Moved{}, &NotMovableError{why}
	}
	if o.State == Pending && out.finished(o) {
		return Moved{}, &NotMovableError{[]string{fmt.Sprintf("every step of version %s is done in it: it would have nothing left "+
			"to run, and ends under the version it runs", m.To.Version)}}
	}
	out.Definition = def
	m.undos(byTo, &out)
	return out, nil
}

// finished reports whether every step record the move places is done.
func (out Moved) finished(o Order) bool {
	for ref, p := range out.Recs {
		if !ref.Undo && !p.Skipped && !(p.Carried && o.Recs[p.From].State == Processed) {
			return false
		}
	}
	return true
}

// steps reads each step of the earlier version in o, refusing what cannot
// move now.
func (m Moving) steps(o Order, refuse func(string, ...any)) []movingStep {
	steps := make([]movingStep, len(m.From.Steps))
	for i, st := range m.From.Steps {
		name := st.Name
		if to, ok := m.To.Migrate.Rename[name]; ok {
			name = to
		}
		steps[i] = movingStep{from: i, to: m.To.Index(name)}
	}
	st := func(ref Ref) Step { return m.From.Steps[ref.Index] }
	for _, ref := range sortedRefs(o.Recs) {
		r := o.Recs[ref]
		if ref.Undo || ref.Index >= len(steps) {
			continue
		}
		s := &steps[ref.Index]
		s.recs = append(s.recs, ref)
		switch {
		case r.State == Processing && !r.Accepted:
			refuse("step %s's attempt %d is at work: move it once it is done", r.RecordName(), r.Attempt)
		case r.State == Processing && !m.keepsAtWork(s, r):
			refuse("step %s's async call is accepted and at work: its step must keep its place and its action in version %s",
				r.RecordName(), m.To.Version)
		case r.State == Pending && r.Ready && r.Ran:
			refuse("step %s's attempt %d was given back and its answer may still come: move it once it is done", r.RecordName(), r.Attempt)
		case s.to >= 0 && m.To.Steps[s.to].Name != st(ref).Name && r.State != Processed && (r.State == Processing || r.Ran || r.Retried):
			// Its name is in its idempotency key: a retry under another
			// (a held record's, an accepted call's once recovered) would be
			// a new effect at its service.
			refuse("step %s may have taken effect and may run again: its name is its idempotency key, which a rename to %s would change; "+
				"move it once it is done", r.RecordName(), m.To.Steps[s.to].Name)
		}
		switch {
		case r.State == Processed || r.State == Error || r.State == Processing || r.Ran:
			s.started = true
		case r.State == Pending && r.Ready && r.Kind != KindAgent:
			s.armed = true
		}
	}
	for i := range steps {
		s := &steps[i]
		if s.to < 0 || !s.started {
			continue
		}
		from, to := m.From.Steps[s.from], m.To.Steps[s.to]
		switch {
		case from.Kind() != to.Kind():
			refuse("step %s ran as a %s and is a %s in version %s", from.Name, from.Kind(), to.Kind(), m.To.Version)
		case (from.ForEach == "") != (to.ForEach == ""):
			refuse("step %s ran %s and runs %s in version %s", from.Name, perItem(from), perItem(to), m.To.Version)
		}
	}
	return steps
}

func perItem(s Step) string {
	if s.ForEach != "" {
		return "once per item"
	}
	return "once"
}

// keepsAtWork reports whether an accepted async record r of step s may stay
// at work through the move: its step keeps its place and its action, so its
// callback's token still names it.
func (m Moving) keepsAtWork(s *movingStep, r Rec) bool {
	if s.to != s.from {
		return false
	}
	from, to := m.From.Steps[s.from].Action, m.To.Steps[s.to].Action
	return from.Agent == to.Agent && from.Do == to.Do && to.Async
}

// place sets out's records of the steps (not their undo actions) in the
// version moved to; it returns, by To's index, the steps done (carried done,
// or skipped).
func (m Moving) place(o Order, byTo map[int]*movingStep, out *Moved, refuse func(string, ...any)) map[int]bool {
	// needed[j]: a step the order started needs j, directly or not.
	needed := map[int]bool{}
	var need func(j int)
	need = func(j int) {
		for _, n := range m.To.Needs(j) {
			if !needed[n] {
				needed[n] = true
				need(n)
			}
		}
	}
	for j, s := range byTo {
		if s.started {
			need(j)
		}
	}
	done := map[int]bool{}
	for j, st := range m.To.Steps {
		s := byTo[j]
		switch {
		case s != nil && s.started:
			done[j] = allProcessed(o, s.recs)
		case needed[j] && s == nil && slices.Contains(m.To.Migrate.Skip, st.Name):
			done[j] = true
		case needed[j]:
			refuse("step %s comes before a step this order started, in version %s: list it under migrate.skip", st.Name, m.To.Version)
		}
	}
	for j, st := range m.To.Steps {
		if s := byTo[j]; s != nil && s.started {
			for _, n := range m.To.Needs(j) {
				if !done[n] && byTo[n] != nil {
					refuse("step %s ran and needs %s, which this order has not done, in version %s", st.Name, m.To.Steps[n].Name, m.To.Version)
				}
			}
		}
		if st.ForEach != "" && !done[j] && (byTo[j] == nil || m.From.Steps[byTo[j].from].ForEach == "") {
			refuse("step %s runs per item in version %s: a move does not count an order's items (list it under migrate.skip, or let the order end)", st.Name, m.To.Version)
		}
		m.placeStep(o, j, byTo[j], done, out)
	}
	return done
}

// placeStep places the records of To's step j, from s (nil: a new step).
// A record ready after the move is sent again whatever it was: the requests
// in flight name the earlier version, which a claim no longer takes.
func (m Moving) placeStep(o Order, j int, s *movingStep, done map[int]bool, out *Moved) {
	ready := allDone(m.To.Needs(j), done)
	switch {
	case s == nil && done[j]:
		out.Recs[Ref{Index: j}] = Placed{New: true, Skipped: true}
		return
	case s == nil:
		out.Recs[Ref{Index: j}] = Placed{New: true, Ready: ready}
		out.ready(o, Ref{Index: j}, ready)
		return
	case !s.started && (m.From.Steps[s.from].ForEach == "") != (m.To.Steps[j].ForEach == ""):
		// not started, and now once rather than per item (a new forEach
		// step is refused in place)
		out.Recs[Ref{Index: j}] = Placed{From: s.recs[0], Ready: ready}
		out.ready(o, Ref{Index: j}, ready)
		return
	}
	for _, from := range s.recs {
		to := Ref{Index: j, Item: from.Item}
		r := o.Recs[from]
		switch {
		case s.started:
			out.Recs[to] = Placed{Carried: true, From: from, Ready: r.State == Pending && r.Ready}
			out.ready(o, to, r.State == Pending && r.Ready && r.Kind == KindAgent)
		case s.armed && ready && r.Ready && m.From.Steps[s.from].Kind() == m.To.Steps[j].Kind():
			// a wait or a timer armed keeps its deadline and what it waits
			// for (a timer woken whose wake the move made stale is woken
			// again by the Supervisor, as a lost one)
			out.Recs[to] = Placed{Carried: true, From: from, Ready: true}
		default:
			out.Recs[to] = Placed{From: from, Ready: ready}
			out.ready(o, to, ready)
		}
	}
}

// ready notes ref as to be started, if it is ready in an order that runs.
func (out *Moved) ready(o Order, ref Ref, ready bool) {
	if ready && o.State == Pending {
		out.Ready = append(out.Ready, ref)
	}
}

// undos places the undo records: a step that ran keeps the undo of the
// version that ran it unless the plan gives it the new one (its record is
// carried, with its action in Definition); any other step has To's.
func (m Moving) undos(byTo map[int]*movingStep, out *Moved) {
	def := out.Definition
	for j, st := range def.Steps {
		if st.Undo == nil {
			continue
		}
		s := byTo[j]
		for ref, p := range out.Recs {
			if ref.Index != j || ref.Undo || p.Skipped {
				continue
			}
			u := UndoOf(ref)
			if s != nil && s.started && p.Carried && !slices.Contains(m.To.Migrate.NewUndo, st.Name) {
				out.Recs[u] = Placed{Carried: true, From: UndoOf(p.From)}
				continue
			}
			out.Recs[u] = Placed{From: UndoOf(p.From), New: p.New}
		}
	}
}

// definition is what a moved order runs: To, with the undo of the version
// that ran each step started whose undo the plan does not renew.
func (m Moving) definition(byTo map[int]*movingStep) (Definition, error) {
	d := m.To
	changed := false
	for j, s := range byTo {
		st := d.Steps[j]
		if !s.started || slices.Contains(m.To.Migrate.NewUndo, st.Name) {
			continue
		}
		from := m.From.Steps[s.from]
		if reflect.DeepEqual(from.Undo, st.Undo) && from.NoUndo == st.NoUndo {
			continue
		}
		if !changed {
			d.Steps = slices.Clone(d.Steps)
			changed = true
		}
		st.Undo, st.NoUndo = from.Undo, from.NoUndo
		d.Steps[j] = st
	}
	if !changed {
		return d, nil
	}
	d.Base = m.To.Version
	d.Version = d.version()
	if err := d.Compile(); err != nil {
		return d, fmt.Errorf("version %s with the undo actions this order ran: %w", m.To.Version, err)
	}
	return d, nil
}

// nothingToUndo reports whether every record refs of o is done with
// nothing to undo (a step a move recorded skipped: it never ran).
func nothingToUndo(o Order, refs []Ref) bool {
	for _, r := range refs {
		if rec := o.Recs[r]; rec.State != Processed || !rec.NothingToUndo {
			return false
		}
	}
	return len(refs) > 0
}

func allProcessed(o Order, refs []Ref) bool {
	for _, r := range refs {
		if o.Recs[r].State != Processed {
			return false
		}
	}
	return len(refs) > 0
}

func allDone(needs []int, done map[int]bool) bool {
	for _, n := range needs {
		if !done[n] {
			return false
		}
	}
	return true
}

func sortedRefs(recs Records) []Ref {
	out := make([]Ref, 0, len(recs))
	for r := range recs {
		out = append(out, r)
	}
	slices.SortFunc(out, compareRefs)
	return out
}

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
				r.State, r.Ready, r.Attempt = Processed, false, 1
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
// actions of the steps it carried done (the latest step first).
func (mv Moved) Undoes() []string {
	var refs []Ref
	for ref, p := range mv.Recs {
		if ref.Undo && p.Carried {
			refs = append(refs, ref)
		}
	}
	slices.SortFunc(refs, func(a, b Ref) int { return compareRefs(b, a) })
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = RecordName(mv.Definition.Steps[r.Index].Undo.Name, r)
	}
	return out
}
