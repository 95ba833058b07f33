package workflow

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Complete is what the completion of record ref (its attempt's success, the
// event its wait took, its timer's end) makes of order o, which runs d.
//
// While the order runs forward, a step done makes ready every step whose
// needs are all done now, and the last step done ends the order Processed.
// An item of a forEach step that is not its step's last makes nothing ready
// and reads nothing but its step's count. The write of a completion that
// finishes a step must be the first to finish one since the order was read
// (Read.Finishes), so two steps finishing at once are ordered and the later
// sees the earlier done: no join, and no end, is missed.
//
// While the order is undone (a record failed, or it was cancelled), a record
// done is recorded and the undoing goes on (see Fail).
func (d Definition) Complete(o Order, ref Ref, now time.Time) Move {
	c := Change{Ref: ref, State: Processed, DoneAt: o.Recs.doneAt(now)}
	if !ref.Undo && o.State == Held {
		// Recorded; what it makes ready is decided when the order goes on.
		return finishing(o, Move{Changes: []Change{c}, Read: Read{Version: true}})
	}
	if ref.Undo || o.State != Pending {
		return o.windDown(c)
	}
	m := Move{Changes: []Change{c}, Read: Read{Forward: true}}
	if ref.Item > 0 {
		items := &ItemsRead{Step: ref.Index, Done: o.Recs.done(ref.Index), Of: len(o.Recs.refs(ref.Index))}
		m.Read.Items = items
		if !items.Last() {
			return m
		}
	}
	m.Read.Finishes = true
	after := o.After(m).Recs
	finished := after.finishedSteps()
	for _, t := range d.Dependents(ref.Index) {
		ready := true
		for _, n := range d.Needs(t) {
			ready = ready && finished[n]
		}
		if ready && !after.started(t) {
			m.Ready = append(m.Ready, after.refs(t)...)
		}
	}
	if d.allFinished(finished) {
		m.State = Processed
	}
	return m
}

// Fail is what record ref failing for good makes of order o: cause says why,
// ran whether it may have taken effect (it was claimed and given up on, or
// its answer was over the limit: its own undo runs too). A record retried
// after an attempt that did not complete may have taken effect whatever its
// last attempt says (a refusal of the retry does not undo the first). An undo action that
// failed ends the order CompensationFailed (the operator is alerted); a
// step's record turns the order to be undone, or, if its step holds on
// failure and the order was not cancelled, holds it (Held) until the
// operator decides (RetryHeld, SkipHeld, UndoHeld) or the hold ends.
func (o Order) Fail(ref Ref, cause Cause, ran bool, now time.Time) Move {
	c := Change{Ref: ref, State: Error, Cause: cause, Ran: (ran || o.Recs[ref].Retried) && !ref.Undo, DoneAt: now}
	if ref.Undo {
		return Move{Changes: []Change{c}, State: CompensationFailed, Read: Read{Version: true}}
	}
	if hold := o.Recs[ref].HoldFor; hold > 0 && !o.Cancelled && (o.State == Pending || o.State == Held) {
		return Move{Changes: []Change{c}, State: Held, HeldUntil: now.Add(hold), Read: Read{Version: true}}
	}
	return o.windDown(c)
}

// GiveBack is an attempt of record ref that did not complete given back: the
// record is ready again, to run after a backoff. ran says whether its call
// may have taken effect (an attempt recovered after its CompleteBy, an
// async call its service accepted): then, if the order is undone before it
// runs again, it is undone too. An attempt given back before its call was
// made (its agent's flow control held it) did nothing: it is undone only if
// an earlier attempt may have run (Rec.Retried).
//
// While the order is undone, the record given back does not run again (a
// step's record is stopped), and the undoing, which may have awaited it,
// goes on.
func (o Order) GiveBack(ref Ref, ran bool) Move {
	m := Move{Changes: []Change{{Ref: ref, State: Pending, Ran: ran}}, Read: Read{Version: true}}
	if o.State != Compensating {
		return m
	}
	return m.Then(o.After(m).compensate())
}

// windDown records change c of an order that is undone from now on (or is
// already), and what the undoing does next.
func (o Order) windDown(c Change) Move {
	m := Move{Changes: []Change{c}, Read: Read{Version: true}}
	if o.State == Pending || o.State == Held {
		m.State, m.Stopped = Compensating, o.readySteps(c.Ref)
	}
	return m.Then(o.After(m).compensate())
}

// readySteps are the records of steps ready and not claimed (but skip):
// they stop when the order turns to be undone.
func (o Order) readySteps(skip Ref) []Ref {
	var out []Ref
	for ref, r := range o.Recs {
		if !ref.Undo && ref != skip && r.State == Pending && r.Ready {
			out = append(out, ref)
		}
	}
	slices.SortFunc(out, compareRefs)
	return out
}

// compensate is what the undoing of order o does next, from its records
// alone (the Supervisor knows no workflow): what is claimed is awaited, its
// outcome or its CompleteBy; then every record that took effect, or may
// have, is undone, the latest first, one undo at a time, whatever the
// workflow's shape (a record runs after what it needs, so its undo runs
// before theirs). With nothing left to undo the order ends Failed (Cancelled
// if it was cancelled). A record that took effect and has no undo action (a
// pivot) ends it CompensationFailed: undoing what came before it would be as
// wrong as leaving it, and the operator decides.
func (o Order) compensate() Move {
	var m Move
	for _, r := range o.Recs {
		if !o.Active(r) {
			continue
		}
		if r.Ref.Undo {
			return Move{Awaits: true} // an undo runs: its outcome comes first
		}
		m.Awaits = true
	}
	if m.Awaits {
		return m
	}
	var todo []Rec
	for ref, r := range o.Recs {
		if !ref.Undo && r.Kind == KindAgent && !r.NothingToUndo && (r.State == Processed || r.Ran) && o.Recs[UndoOf(ref)].State != Processed {
			todo = append(todo, r)
		}
	}
	switch {
	case len(todo) == 0 && o.Cancelled:
		m.State = Cancelled
		return m
	case len(todo) == 0:
		m.State = Failed
		return m
	}
	latest := slices.MaxFunc(todo, func(a, b Rec) int {
		// one that may have run and was never done ran last
		return cmp.Or(boolCmp(a.DoneAt.IsZero(), b.DoneAt.IsZero()), a.DoneAt.Compare(b.DoneAt),
			a.Ref.Index-b.Ref.Index, a.Ref.Item-b.Ref.Item)
	})
	if !latest.HasUndo {
		m.State, m.Pivot = CompensationFailed, &latest.Ref
		return m
	}
	m.Ready = []Ref{UndoOf(latest.Ref)}
	return m
}

// UndoOf is the undo action of record r (a step's, or an item's).
func UndoOf(r Ref) Ref { return Ref{Index: r.Index, Undo: true, Item: r.Item} }

// CancelVerdict is what a cancel does.
type CancelVerdict int

// The verdicts of Order.Cancel.
const (
	CancelRefused     CancelVerdict = iota // ended, or past a step that cannot be undone: the reason says which
	CancelRepeated                         // asked before: nothing more to do
	CancelStops                            // what is ready never runs; what completed is undone (or it ends at once)
	CancelAwaits                           // a step is running: its outcome is awaited, then undone
	CancelCompensates                      // already undoing after a failure: noted, it ends Failed
)

// Cancel is what a cancel asked of order o does: what is ready stops, what
// runs is awaited, what completed is undone, the latest first, as after a
// failure, and the order ends Cancelled. A step without an undo action that
// has run, or runs, is the point of no return: the cancel is refused, with
// the reason. A wait or a timer changes nothing outside: it is no such
// point. An async attempt its service accepted is not awaited: it is given
// back (a Change to Pending) and undone.
func (o Order) Cancel() (Move, CancelVerdict, string) {
	switch {
	case o.State == Cancelled || (o.Cancelled && !o.State.Ended()):
		return Move{}, CancelRepeated, ""
	case o.State.Ended():
		return Move{}, CancelRefused, fmt.Sprintf("the order is %s: there is nothing to cancel", o.State)
	case o.State == Compensating:
		return Move{Read: Read{Version: true}}, CancelCompensates, ""
	}
	for _, ref := range o.Recs.sorted() {
		r := o.Recs[ref]
		if !ref.Undo && !r.HasUndo && !r.NothingToUndo && r.Kind == KindAgent && (r.State == Processed || r.State == Processing || r.Ran) {
			return Move{}, CancelRefused, fmt.Sprintf("step %s has run, or is running, and cannot be undone: "+
				"the order can no longer be cancelled", RecordName(r.Name, ref))
		}
	}
	m := Move{State: Compensating, Cancel: true, Stopped: o.readySteps(Ref{Index: -1}), Read: Read{Version: true}}
	for _, ref := range o.Recs.sorted() {
		if r := o.Recs[ref]; r.State == Processing && r.Accepted {
			// Its service works on it and its callback may be hours away:
			// the attempt is given back (its token refused from now on)
			// rather than awaited, and undone, as it may have taken effect.
			m.Changes = append(m.Changes, Change{Ref: ref, State: Pending, Ran: true})
		}
	}
	m = m.Then(o.After(m).compensate())
	if m.Awaits {
		return m, CancelAwaits, ""
	}
	return m, CancelStops, ""
}

// finishing marks m, which makes its change's record Processed, as a write
// that finishes a step when it does (Read.Finishes): every such write moves
// the order's count of them on, so that a completion decided before it (on
// an order that did not have that step finished) cannot land after it and
// miss the join, or the end, it makes. A completion recorded while its
// order is held, and an operator's skip, finish steps too.
func finishing(o Order, m Move) Move {
	ref := m.Changes[0].Ref
	if o.After(m).Recs.finishedSteps()[ref.Index] {
		m.Read.Finishes = true
	}
	return m
}

// finishedSteps are the steps every record of which is Processed.
func (recs Records) finishedSteps() map[int]bool {
	of, done := map[int]int{}, map[int]int{}
	for ref, r := range recs {
		if ref.Undo {
			continue
		}
		of[ref.Index]++
		if r.State == Processed {
			done[ref.Index]++
		}
	}
	out := map[int]bool{}
	for i, n := range of {
		if done[i] == n {
			out[i] = true
		}
	}
	return out
}

// sorted are the records' refs, steps first, each by index and item.
func (recs Records) sorted() []Ref {
	out := make([]Ref, 0, len(recs))
	for ref := range recs {
		out = append(out, ref)
	}
	slices.SortFunc(out, compareRefs)
	return out
}

// boolCmp orders false before true.
func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
