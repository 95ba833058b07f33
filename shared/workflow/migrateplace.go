package workflow

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
)

// Where a move places each record of an order (Moving.Move), and the
// definition the order runs after it.

// place sets out's records of the steps (not their undo actions) in the
// version moved to, a new step that runs per item once per item of items
// (the order's data read: else it is refused); it returns, by To's index,
// the steps done (carried done, or skipped).
func (m Moving) place(o Order, byTo map[int]*movingStep, items map[int]int, out *Moved, refuse func(string, ...any)) map[int]bool {
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
		if st.ForEach != "" && !done[j] && (byTo[j] == nil || m.From.Steps[byTo[j].from].ForEach == "") && items == nil {
			refuse("step %s runs per item in version %s: a move counts its items from the order's data, which this one did not read", st.Name, m.To.Version)
		}
		m.placeStep(o, j, byTo[j], done, items, out)
	}
	return done
}

// placeStep places the records of To's step j, from s (nil: a new step),
// a new one that runs per item once per item of items. A record ready
// after the move is sent again whatever it was: the requests in flight
// name the earlier version, which a claim no longer takes.
func (m Moving) placeStep(o Order, j int, s *movingStep, done map[int]bool, items map[int]int, out *Moved) {
	ready := allDone(m.To.Needs(j), done)
	switch {
	case s == nil && done[j]:
		out.Recs[Ref{Index: j}] = Placed{New: true, Skipped: true}
		return
	case s == nil || (!s.started && (m.From.Steps[s.from].ForEach == "") != (m.To.Steps[j].ForEach == "")):
		// new, or not started and now run per item rather than once or
		// the other way: its records are new, as many as its items
		for _, ref := range RecordsOf(j, forEachOnly(j, m.To.Steps[j], items)) {
			out.Recs[ref] = Placed{New: true, Ready: ready}
			out.ready(o, ref, ready)
		}
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

// forEachOnly is items' count for step j if it runs per item (nil: once).
func forEachOnly(j int, st Step, items map[int]int) map[int]int {
	if st.ForEach == "" {
		return nil
	}
	return map[int]int{j: items[j]}
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
// that ran each step started whose undo the plan does not renew, and the
// steps kept (byTo's past To's steps), appended.
func (m Moving) definition(byTo map[int]*movingStep) (Definition, error) {
	d := m.To
	d.Steps = slices.Clone(m.To.Steps)
	changed := false
	for j := len(m.To.Steps); byTo[j] != nil; j++ {
		st, err := m.kept(m.From.Steps[byTo[j].from])
		if err != nil {
			return d, err
		}
		d.Steps, changed = append(d.Steps, st), true
	}
	for j, s := range byTo {
		st := d.Steps[j]
		if !s.started || slices.Contains(m.To.Migrate.NewUndo, st.Name) {
			continue
		}
		from := m.From.Steps[s.from]
		if reflect.DeepEqual(from.Undo, st.Undo) && from.NoUndo == st.NoUndo {
			continue
		}
		st.Undo, st.NoUndo = from.Undo, from.NoUndo
		d.Steps[j], changed = st, true
	}
	if !changed {
		return m.To, nil
	}
	if len(d.Steps) > MaxSteps {
		return d, fmt.Errorf("version %s with the steps this order keeps has %d steps, over %d", m.To.Version, len(d.Steps), MaxSteps)
	}
	d.Base = m.To.Version
	d.Version = d.version()
	if err := d.Compile(); err != nil {
		return d, fmt.Errorf("version %s with the undo actions this order ran: %w", m.To.Version, err)
	}
	return d, nil
}

// kept is step st of From as the order that completed it keeps it in To:
// done, needing nothing, with the version that ran it, and its undo. Its
// name and its undo's are idempotency keys: none may be an action of To.
func (m Moving) kept(st Step) (Step, error) {
	if st.Kept == "" {
		st.Kept = cmp.Or(m.From.Base, m.From.Version)
	}
	st.Needs, st.NoNeeds = nil, true
	for _, a := range []*Action{&st.Action, st.Undo} {
		if a != nil && m.To.action(a.Name) {
			return st, fmt.Errorf("step %s is kept under migrate.keep, and version %s has an action named %s", st.Name, m.To.Version, a.Name)
		}
	}
	return st, nil
}

// action reports whether name is the name of a step or an undo action of d.
func (d Definition) action(name string) bool {
	return slices.ContainsFunc(d.Steps, func(st Step) bool { return st.Name == name || (st.Undo != nil && st.Undo.Name == name) })
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
