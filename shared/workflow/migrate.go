package workflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
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
// version moved to, or be kept by the plan (Migration.Keep: done, it stays
// in the order's own definition for its undo alone), and keeps the undo of
// the version that ran it (unless the plan gives it the new one). A new step
// before a step the order already started must be declared skipped.

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
	// Transform rewrites the order's data and the results it kept.
	Transform Transform `json:",omitzero"`
	// Keep are earlier steps this version has not that an order which
	// completed them keeps: done, never run again, appended to its own
	// definition with the undo of the version that ran them, so that a
	// later failure undoes them in their turn (Step.Kept).
	Keep []string `json:",omitempty"`
}

// IsZero reports whether the plan says nothing.
func (m Migration) IsZero() bool {
	return len(m.Rename) == 0 && len(m.Skip) == 0 && len(m.NewUndo) == 0 && len(m.Keep) == 0 && m.Transform.IsZero()
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
	for i, name := range m.Keep {
		field := fmt.Sprintf("migrate.keep[%d]", i)
		switch _, renamed := m.Rename[name]; {
		case d.Index(name) >= 0:
			ps = append(ps, Problem{Field: field, What: fmt.Sprintf("%q is a step of this workflow: an order that ran it carries it, "+
				"nothing to keep", name)})
		case renamed:
			ps = append(ps, Problem{Field: field, What: fmt.Sprintf("%q is renamed under migrate.rename: it is carried, not kept", name)})
		}
	}
	return append(ps, m.Transform.check(d)...)
}

// Problems are what in To's plan does not name a step of From, where To's
// own checks (Migration.check) cannot tell: a kept step From has not. Each
// is a problem of To's file, at its field.
func (m Moving) Problems() Problems {
	var ps Problems
	if m.From.IDMember() != m.To.IDMember() {
		ps = append(ps, Problem{File: m.To.File, Line: m.To.lines.of("id"), Field: "id", What: m.idFieldsDiffer()})
	}
	for i, name := range m.To.Migrate.Keep {
		if m.From.Index(name) >= 0 {
			continue
		}
		field := fmt.Sprintf("migrate.keep[%d]", i)
		ps = append(ps, Problem{File: m.To.File, Line: m.To.lines.of(field), Field: field,
			What: fmt.Sprintf("%q is not a step of version %s (%s)", name, m.From.Version, m.From.File)})
	}
	return ps
}

// idFieldsDiffer says that From and To name their orders' ids by
// different members: an order keeps its id, so none moves.
func (m Moving) idFieldsDiffer() string {
	return fmt.Sprintf("version %s names an order's id by its %s, version %s by its %s: an order keeps the id it was sent with, "+
		"so none moves between them", m.From.Version, m.From.IDMember(), m.To.Version, m.To.IDMember())
}

// Moving is a move of orders from one version of a workflow to another, by
// the plan of the version moved to (To.Migrate).
type Moving struct {
	From, To Definition
	// Data is the order's data, opened (nil: not read: a move that must
	// count a new step's items, or rewrite it, is refused), and Sealed
	// says it is sealed: no reason quotes it.
	Data   json.RawMessage
	Sealed bool
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
	// Data is the order's data rewritten by the plan (nil: as it was).
	Data json.RawMessage
	// doneAt is when each record carried was done, by its ref now: the
	// order its undoing takes (Undoes).
	doneAt map[Ref]time.Time
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
	case m.From.IDMember() != m.To.IDMember():
		return Moved{}, &NotMovableError{[]string{m.idFieldsDiffer()}}
	case o.State != Pending && o.State != Held:
		return Moved{}, &NotMovableError{[]string{fmt.Sprintf("it is %s: only an order running forward or held moves", o.State)}}
	case o.Cancelled:
		return Moved{}, &NotMovableError{[]string{"it is being cancelled"}}
	}
	data, err := m.data()
	if err != nil {
		return Moved{}, &NotMovableError{[]string{err.Error()}}
	}
	items, err := m.items(data)
	if err != nil {
		return Moved{}, &NotMovableError{[]string{err.Error()}}
	}
	m.atWork(o, refuse)
	byTo, kept, dropped := m.match(o, m.steps(o, refuse), refuse)
	if len(why) > 0 {
		return Moved{}, &NotMovableError{why}
	}
	out := Moved{Recs: map[Ref]Placed{}, Dropped: dropped}
	if m.To.Migrate.Transform.Order != "" {
		out.Data = data
	}
	m.place(o, byTo, items, &out, refuse)
	m.checkItems(out, items, refuse)
	for k, s := range kept { // after To's steps: their indices stay
		byTo[len(m.To.Steps)+k] = s
	}
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
	out.placeKept(len(m.To.Steps), kept)
	out.Definition = def
	m.undos(byTo, &out)
	out.doneAt = map[Ref]time.Time{}
	for ref, p := range out.Recs {
		if p.Carried {
			out.doneAt[ref] = o.Recs[p.From].DoneAt
		}
	}
	return out, nil
}

// match pairs each step of the earlier version in o with its step in To,
// by name (byTo, by To's index), or with none: kept (the plan keeps it and
// the order completed it) or dropped (not started, or nothing to undo).
func (m Moving) match(o Order, steps []movingStep, refuse func(string, ...any)) (map[int]*movingStep, []*movingStep, []string) {
	byTo := map[int]*movingStep{}
	var kept []*movingStep
	var dropped []string
	for i := range steps {
		s := &steps[i]
		name := m.From.Steps[s.from].Name
		switch {
		case s.to >= 0 && byTo[s.to] != nil:
			refuse("steps %s and %s both become %s in version %s", m.From.Steps[byTo[s.to].from].Name, name, m.To.Steps[s.to].Name, m.To.Version)
		case s.to >= 0:
			byTo[s.to] = s
		case !s.started || m.From.Steps[s.from].NoUndo || nothingToUndo(o, s.recs):
			dropped = append(dropped, name)
		case !slices.Contains(m.To.Migrate.Keep, name):
			refuse("step %s ran and version %s has no step %s (keep it under migrate.keep, or rename it under migrate.rename)",
				name, m.To.Version, name)
		case !allProcessed(o, s.recs):
			refuse("step %s is kept under migrate.keep and has not completed (it failed, is held or at work): a kept step never runs "+
				"again; move the order once it is done", name)
		default:
			kept = append(kept, s)
		}
	}
	return byTo, kept, dropped
}

// placeKept carries the records of the kept steps, done, to their steps
// appended after To's n steps (Moving.definition); their undo records are
// carried with the others' (Moving.undos).
func (out *Moved) placeKept(n int, kept []*movingStep) {
	for k, s := range kept {
		for _, from := range s.recs {
			out.Recs[Ref{Index: n + k, Item: from.Item}] = Placed{Carried: true, From: from}
		}
	}
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
