package workflow

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// The one engine. Every workflow is a graph of steps (a line is a graph in
// which each step needs the one before it), and an order's records (its
// steps', their items', their undo actions') move by one set of rules,
// whatever the shape. The rules are pure: given the order as a writer read
// it and what happened, they say the records' next states and what the
// decision read (Move). The state store writes a Move as one conditional
// write that must find what was read still so; when another write changed
// it, the writer takes the order as that write left it and asks again.

// Records are an order's records, by ref.
type Records map[Ref]Rec

// Order is an order as the rules read it.
type Order struct {
	State     State // Pending while its steps run, Compensating while it is undone, or its end
	Cancelled bool  // a cancel was asked and taken: its undoing ends Cancelled
	Recs      Records
}

// Move is what the rules make of one event: the records' next states, the
// order's, and what the decision read, which its write must find still so.
type Move struct {
	Changes []Change // the records the event changes
	Ready   []Ref    // the records made ready
	State   State    // the order's state after ("": unchanged)
	Cancel  bool     // the order is cancelled by this move: its undoing ends Cancelled
	// Stopped are the records that were ready to run and will not, the
	// order being undone from now on (no write: a record of a step is
	// claimed only while its order runs forward).
	Stopped []Ref
	// Awaits: records at work are awaited before anything more is undone.
	Awaits bool
	// Pivot, when the order ends CompensationFailed because a record that
	// took effect has no undo action, names that record.
	Pivot *Ref
	// HeldUntil, for a move that holds the order (State Held): when its
	// hold ends, and it is undone.
	HeldUntil time.Time
	// Resume, for a held order going on: its records ready before it was
	// held (stopped by the hold, or given back), whose requests are sent
	// again.
	Resume []Ref
	Read   Read
}

// Change is one record's next state.
type Change struct {
	Ref   Ref
	State State // Processed or Error; Pending: an attempt given back, to run again
	Cause Cause // for Error
	// Ran, for Error or Pending (an attempt given back): the record may
	// have taken effect (it is undone too).
	Ran    bool
	DoneAt time.Time
}

// Read is what a decision read of the order, which its write must find
// still so.
type Read struct {
	// Version: the whole order as read; any write since refuses it.
	Version bool
	// Forward: the order still runs forward (no failure, no cancel since).
	Forward bool
	// Finishes: the write finishes a step, and must be the first to
	// finish one since the order was read: two completions that each
	// finish a step are ordered, the later deciding on the earlier's
	// outcome (what it made ready, whether the order ends).
	Finishes bool
	// Items, for the completion of one item of a forEach step: its items
	// done as read, of how many.
	Items *ItemsRead
}

// ItemsRead is a forEach step's items done as a completion of one of them
// read them: a completion that is not the step's last needs fewer than
// Of-1 done still (the others may finish meanwhile, in any order); the
// last needs exactly Of-1 (it finishes the step).
type ItemsRead struct{ Step, Done, Of int }

// Last reports whether the completion finishes its step.
func (r ItemsRead) Last() bool { return r.Done+1 == r.Of }

// Active reports whether record r is at work in the order: claimed, or
// ready to be claimed. A ready record of a step is at work only while the
// order runs forward (once it is undone, a ready step is stopped: nothing
// claims it), an undo action's only while it is undone.
func (o Order) Active(r Rec) bool {
	switch r.State {
	case Processing:
		return true
	case Pending:
		return r.Ready && o.runs(r.Ref)
	}
	return false
}

// Stopped reports whether record r was made ready and will not run: a
// step's record ready when its order turned to be undone.
func (o Order) Stopped(r Rec) bool { return r.State == Pending && r.Ready && !o.runs(r.Ref) }

// runs reports whether the order runs record r's kind of record now.
func (o Order) runs(r Ref) bool {
	if r.Undo {
		return o.State == Compensating
	}
	return o.State == Pending
}

// After is the order as move m leaves it.
func (o Order) After(m Move) Order {
	next := Order{State: cmp.Or(m.State, o.State), Cancelled: o.Cancelled || m.Cancel, Recs: maps.Clone(o.Recs)}
	for _, c := range m.Changes {
		r := next.Recs[c.Ref]
		r.State, r.DoneAt = c.State, c.DoneAt
		if c.State == Error {
			r.Cause = c.Cause
		}
		r.Ready = c.State == Pending // an attempt given back is ready again
		r.Ran = (c.State == Error && c.Ran) || (c.State == Pending && (c.Ran || r.Retried))
		r.Retried = r.Retried || (c.State == Pending && c.Ran)
		next.Recs[c.Ref] = r
	}
	for _, ref := range m.Ready {
		r := next.Recs[ref]
		r.Ready = true
		next.Recs[ref] = r
	}
	return next
}

// Then is m followed by n, as one write: n decided on the order m left.
func (m Move) Then(n Move) Move {
	out := m
	out.Changes = append(slices.Clone(m.Changes), n.Changes...)
	out.Ready = append(slices.Clone(m.Ready), n.Ready...)
	out.Stopped = append(slices.Clone(m.Stopped), n.Stopped...)
	out.Resume = append(slices.Clone(m.Resume), n.Resume...)
	out.State = cmp.Or(n.State, m.State)
	out.Cancel = m.Cancel || n.Cancel
	out.Awaits = n.Awaits
	if n.Pivot != nil {
		out.Pivot = n.Pivot
	}
	if !n.HeldUntil.IsZero() {
		out.HeldUntil = n.HeldUntil
	}
	out.Read = Read{Version: m.Read.Version || n.Read.Version, Forward: m.Read.Forward || n.Read.Forward,
		Finishes: m.Read.Finishes || n.Read.Finishes, Items: cmp.Or(n.Read.Items, m.Read.Items)}
	return out
}

// Changed is the change move m makes to record r, if any.
func (m Move) Changed(r Ref) (Change, bool) {
	i := slices.IndexFunc(m.Changes, func(c Change) bool { return c.Ref == r })
	if i < 0 {
		return Change{}, false
	}
	return m.Changes[i], true
}

// refs are the records of step i (one, or one per item), in item order.
func (recs Records) refs(i int) []Ref {
	var out []Ref
	for ref := range recs {
		if ref.Index == i && !ref.Undo {
			out = append(out, ref)
		}
	}
	slices.SortFunc(out, compareRefs)
	return out
}

// done is how many of step i's records are Processed.
func (recs Records) done(i int) int {
	n := 0
	for ref, r := range recs {
		if ref.Index == i && !ref.Undo && r.State == Processed {
			n++
		}
	}
	return n
}

// finished reports whether every record of step i is Processed.
func (recs Records) finished(i int) bool {
	refs := recs.refs(i)
	return len(refs) > 0 && recs.done(i) == len(refs)
}

// started reports whether some record of step i was made ready, ran or is
// done.
func (recs Records) started(i int) bool {
	return slices.ContainsFunc(recs.refs(i), func(ref Ref) bool {
		r := recs[ref]
		return r.Ready || r.State != Pending
	})
}

// latestDone is when the latest record of the order was done (zero: none).
func (recs Records) latestDone() time.Time {
	var t time.Time
	for _, r := range recs {
		if r.DoneAt.After(t) {
			t = r.DoneAt
		}
	}
	return t
}

// doneAt is when a record done now is done, for the rules' order of
// completions: now, but never before a record the order read as done (a
// record of a step runs after what it needs; the clocks of the machines
// that record outcomes may disagree by a little).
func (recs Records) doneAt(now time.Time) time.Time {
	if latest := recs.latestDone(); !now.After(latest) {
		return latest.Add(time.Millisecond)
	}
	return now
}

func compareRefs(a, b Ref) int {
	if a.Undo != b.Undo {
		if a.Undo {
			return 1
		}
		return -1
	}
	return cmp.Or(a.Index-b.Index, a.Item-b.Item)
}

// Start is a new order of d with items (the items of each forEach step): a
// record per step, or per item, and one per undo action, Pending; the
// records of the steps that need nothing ready.
func (d Definition) Start(items map[int]int) Order {
	o := Order{State: Pending, Recs: Records{}}
	for i, st := range d.Steps {
		for _, ref := range RecordsOf(i, items) {
			o.Recs[ref] = Rec{Ref: ref, Action: st.Action, State: Pending, Ready: d.starts(i), Kind: st.Kind(),
				HasUndo: st.Undo != nil, NothingToUndo: st.NoUndo, HoldFor: st.HoldFor}
			if st.Undo != nil {
				u := UndoOf(ref)
				o.Recs[u] = Rec{Ref: u, Action: *st.Undo, State: Pending}
			}
		}
	}
	return o
}

// Claimed is the order with ready record ref claimed: an attempt of it runs.
func (o Order) Claimed(ref Ref) Order {
	next := Order{State: o.State, Cancelled: o.Cancelled, Recs: maps.Clone(o.Recs)}
	r := next.Recs[ref]
	r.State, r.Ready, r.Ran = Processing, false, false
	next.Recs[ref] = r
	return next
}
