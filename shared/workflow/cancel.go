package workflow

import "fmt"

// Cancelling a task stops what has not started and undoes what completed,
// in reverse order, as a failure would, but the task ends Cancelled. A step
// without an undo action (a pivot: a shipment made cannot be unmade) ends
// the point of no return: once one has been claimed, the order can only go
// on, and a cancel is refused. A wait or a timer changes nothing outside,
// so one that has run is no such point.

// Phase is where a record stands, as a cancel sees it.
type Phase struct {
	Ref     Ref
	State   State
	Ready   bool // a Pending record with a deadline: ready, not yet claimed
	HasUndo bool // for a step: it has an undo action
	// Ran: a step Pending again after an attempt of it was recovered: that
	// attempt's call may have taken effect with its answer lost.
	Ran  bool
	Name string
	Kind Kind // a wait or a timer has no effect to undo: it is no pivot
}

// CancelVerdict is what a cancel does.
type CancelVerdict int

// The verdicts of DecideCancel.
const (
	CancelRefused     CancelVerdict = iota // ended, or past a step that cannot be undone: the reason says which
	CancelRepeated                         // asked before: nothing more to do
	CancelStops                            // the ready step never runs; undo what completed (or end at once)
	CancelAwaits                           // a step is running: its outcome is awaited, then undone
	CancelCompensates                      // already undoing after a failure: noted, it ends Failed
)

// CancelDecision is what cancelling a task does.
type CancelDecision struct {
	Verdict CancelVerdict
	Reason  string // for CancelRefused
	Stop    Ref    // for CancelStops: the ready step that will not run
}

// DecideCancel decides a cancel of a task in state task (asked before if
// asked), from its records.
func DecideCancel(task State, asked bool, recs []Phase) CancelDecision {
	switch {
	case task == Cancelled || (asked && !task.Ended()):
		return CancelDecision{Verdict: CancelRepeated}
	case task.Ended():
		return CancelDecision{Verdict: CancelRefused, Reason: fmt.Sprintf("the order is %s: there is nothing to cancel", task)}
	case task == Compensating:
		return CancelDecision{Verdict: CancelCompensates}
	}
	for _, r := range recs {
		if !r.Ref.Undo && !r.HasUndo && r.Kind == KindAgent && (r.State == Processed || r.State == Processing || r.Ran) {
			return CancelDecision{Verdict: CancelRefused, Reason: fmt.Sprintf(
				"step %s has run, or is running, and cannot be undone: the order can no longer be cancelled", r.Name)}
		}
	}
	for _, r := range recs {
		switch {
		case r.Ref.Undo:
		case r.State == Processing:
			return CancelDecision{Verdict: CancelAwaits}
		case r.State == Pending && r.Ready:
			return CancelDecision{Verdict: CancelStops, Stop: r.Ref}
		}
	}
	return CancelDecision{Verdict: CancelRefused, Reason: "no step of the order is ready or running"}
}
