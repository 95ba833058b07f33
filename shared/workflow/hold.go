package workflow

import (
	"fmt"
	"slices"
	"time"
)

// An order held (State Held) waits for its operator: a step that holds on
// failure (Step.HoldFor) failed for good. Nothing new starts meanwhile (its
// ready records are stopped, as while it is undone); what runs completes and
// is recorded, and what that makes ready is decided when it goes on. The
// operator chooses, for each held record:
//
//   - RetryHeld: the record runs again, a new attempt, its failures forgotten;
//   - SkipHeld: the record is done, with a result given by hand, and the
//     order goes on as if its service had answered it;
//   - UndoHeld: the order is undone now, as the failure would have done.
//
// Past its hold (HeldUntil) the Supervisor undoes it. The order goes on
// once no record of it holds it.

// HeldError says why a decision on a held order cannot be taken.
type HeldError struct{ Reason string }

func (e *HeldError) Error() string { return e.Reason }

// Held are the records that hold the order: its steps' records failed for
// good while it is Held.
func (o Order) Held() []Ref {
	if o.State != Held {
		return nil
	}
	var out []Ref
	for _, ref := range o.Recs.sorted() {
		if r := o.Recs[ref]; !ref.Undo && r.State == Error {
			out = append(out, ref)
		}
	}
	return out
}

// holds checks that ref holds order o.
func (o Order) holds(ref Ref) error {
	if o.State != Held {
		return &HeldError{fmt.Sprintf("the order is %s, not held", o.State)}
	}
	if !slices.Contains(o.Held(), ref) {
		return &HeldError{fmt.Sprintf("%s does not hold the order", RecordName(o.Recs[ref].Name, ref))}
	}
	return nil
}

// RetryHeld runs held record ref again: it is ready (its attempt given
// back: if its failure said it may have taken effect, it is undone if the
// order is later; a refusal did nothing), and, if nothing else holds the
// order, the order goes on. The store resets its failure count
// (statestore.Look.Retry).
func (d Definition) RetryHeld(o Order, ref Ref) (Move, error) {
	if err := o.holds(ref); err != nil {
		return Move{}, err
	}
	return d.goOn(o, Move{Changes: []Change{{Ref: ref, State: Pending, Ran: o.Recs[ref].Ran}}, Read: Read{Version: true}}), nil
}

// SkipHeld takes held record ref as done (its result, if any, given by the
// operator), and, if nothing else holds the order, the order goes on as if
// its service had answered.
func (d Definition) SkipHeld(o Order, ref Ref, now time.Time) (Move, error) {
	if err := o.holds(ref); err != nil {
		return Move{}, err
	}
	return d.goOn(o, finishing(o, Move{Changes: []Change{{Ref: ref, State: Processed, DoneAt: o.Recs.doneAt(now)}},
		Read: Read{Version: true}})), nil
}

// UndoHeld undoes held order o now, as its failure would have: what is
// ready stops, what runs is awaited, what completed (or may have) is undone.
func (o Order) UndoHeld() (Move, error) {
	if o.State != Held {
		return Move{}, &HeldError{fmt.Sprintf("the order is %s, not held", o.State)}
	}
	m := Move{State: Compensating, Stopped: o.readySteps(Ref{Index: -1}), Read: Read{Version: true}}
	return m.Then(o.After(m).compensate()), nil
}

// goOn is m, a decision on a held record, and, if no other record holds the
// order after it, the order going on: every step whose needs finished while
// it was held is made ready (Ready), the records stopped by the hold go on
// (Resume: their requests are sent again), and if every step is done it
// ends Processed.
func (d Definition) goOn(o Order, m Move) Move {
	after := o.After(m)
	if len(after.Held()) > 0 {
		return m // another record holds it still
	}
	m.State = Pending
	finished := after.Recs.finishedSteps()
	if d.allFinished(finished) {
		m.State = Processed
		return m
	}
	for i, st := range d.Steps {
		if after.Recs.started(i) || st.Kept != "" {
			continue
		}
		ready := true
		for _, n := range d.Needs(i) {
			ready = ready && finished[n]
		}
		if ready {
			m.Ready = append(m.Ready, after.Recs.refs(i)...)
		}
	}
	for _, ref := range after.Recs.sorted() {
		if r := after.Recs[ref]; !ref.Undo && r.State == Pending && r.Ready {
			m.Resume = append(m.Resume, ref)
		}
	}
	return m
}
