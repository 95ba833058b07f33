package statestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// NotCancellableError says why an order cannot be cancelled.
type NotCancellableError struct{ Reason string }

// Error says why.
func (e *NotCancellableError) Error() string { return e.Reason }

// IsNotCancellable reports whether err is a *NotCancellableError.
func IsNotCancellable(err error) bool {
	var e *NotCancellableError
	return errors.As(err, &e)
}

// CancelRequest asks for an order's cancellation.
type CancelRequest struct {
	OrderID string
	By      string        // who asks: an operator, or the orders queue's sender
	Reason  string        // why, if they said
	Pickup  time.Duration // an undo action made ready is due this long after now (if the order has no pickup timeout stored)
	Now     time.Time
}

// Cancellation is what a cancel did.
type Cancellation struct {
	Verdict workflow.CancelVerdict
	State   workflow.State // the task's, after the cancel
	Stopped string         // the step that will not run (CancelStops)
	// Undo, if set, is the undo action made ready: the caller has it sent
	// to its Agent.
	Undo       *workflow.Ref
	ReplyQueue string
	Round      int
	Workflow   string // the order's workflow, and its version
	WfVersion  string
}

// Cancel cancels an order (workflow.DecideCancel): a ready step does not
// run, and the completed steps are undone in reverse order (or, with none,
// the task ends Cancelled at once); a running step's outcome is awaited, and
// then undone; an order already compensating after a failure has the
// request noted, and ends Failed. Asking again is no error. It is one write,
// conditional on the order being as read, re-read up to cancelTries times if
// another write lands between. A refusal is a *NotCancellableError.
func (s *Store) Cancel(ctx context.Context, c CancelRequest) (Cancellation, error) {
	for range cancelTries {
		res, err := s.cancel(ctx, c)
		if !errors.Is(err, ErrStale) {
			return res, err
		}
	}
	return Cancellation{}, &NotCancellableError{fmt.Sprintf("order %s changed each of the %d times it was read to be cancelled; ask again", c.OrderID, cancelTries)}
}

const cancelTries = 5

func (s *Store) cancel(ctx context.Context, c CancelRequest) (Cancellation, error) {
	it, err := s.item(ctx, c.OrderID)
	if err != nil {
		return Cancellation{}, err
	}
	if it.Parallel {
		return s.cancelParallel(ctx, it, c)
	}
	d := workflow.DecideCancel(workflow.State(it.State), it.CxBy != "", it.phases())
	res := Cancellation{Verdict: d.Verdict, State: workflow.State(it.State), ReplyQueue: it.ReplyQueue, Round: it.Round,
		Workflow: it.Workflow, WfVersion: it.WfVersion}
	ch := newChange(c.Now)
	ch.cond = append(ch.cond, "V = "+ch.val("version", num(int64(it.Version))))
	ch.set = append(ch.set, "CxBy = "+ch.val("by", str(c.By)), "CxAt = "+ch.at())
	if c.Reason != "" {
		ch.set = append(ch.set, "CxWhy = "+ch.val("why", str(c.Reason)))
	}
	switch d.Verdict {
	case workflow.CancelRefused:
		return res, &NotCancellableError{fmt.Sprintf("order %s cannot be cancelled: %s", c.OrderID, d.Reason)}
	case workflow.CancelRepeated:
		return res, nil
	case workflow.CancelCompensates:
		// Noted; the undoing under way ends the order Failed.
	case workflow.CancelAwaits:
		ch.set = append(ch.set, "Ea = "+ch.val("endAs", str(string(workflow.Cancelled))))
	case workflow.CancelStops:
		s.stop(ch, it, d.Stop, c, &res)
	}
	if err := s.update(ctx, c.OrderID, ch, "cancel "+c.OrderID); err != nil {
		return res, err
	}
	return res, nil
}

// stop adds to ch the cancel of a ready step: it is no longer ready, and
// the completed steps' undoing starts (or, with nothing to undo, the task
// ends Cancelled and leaves the index). A step ready again after an attempt
// of it was recovered may have taken effect: as for a step given up on
// after it ran, its own undo runs first (DecideCancel refused the cancel if
// it has none).
func (s *Store) stop(ch *change, it stateItem, stop workflow.Ref, c CancelRequest, res *Cancellation) {
	r := it.Recs[sortKey(stop)]
	p := ch.rec("r", stop)
	ch.remove = append(ch.remove, p+".d")
	from := r.UndoFrom
	if r.Attempt > 0 && r.HasUndo {
		from = stop.Index
		ch.incident(p, "r", "cancelled before its retry, by %s: attempt %d may have taken effect, so its undo runs", c.By, r.Attempt)
	} else {
		ch.incident(p, "r", "cancelled before it ran, by %s", c.By)
	}
	res.Stopped = r.Name
	if from < 0 {
		ch.task(workflow.Pending, workflow.Cancelled, "")
		ch.remove = append(ch.remove, "DueShard", "DueAt")
		res.State = workflow.Cancelled
		return
	}
	undo := workflow.Ref{Index: from, Undo: true}
	ch.task(workflow.Pending, workflow.Compensating, "")
	ch.set = append(ch.set, "Ea = "+ch.val("endAs", str(string(workflow.Cancelled))), "Dl = DlMs + "+ch.at())
	due := c.Now.Add(it.pickup(c.Pickup))
	s.makeReady(ch, undo, due)
	ch.index(it.OrderID, s.shards, due)
	res.State, res.Undo = workflow.Compensating, &undo
}

// phases are the item's records as a cancel sees them.
func (it stateItem) phases() []workflow.Phase {
	var out []workflow.Phase
	for sk, r := range it.Recs {
		out = append(out, workflow.Phase{Ref: refOf(sk), State: workflow.State(r.State), Ready: r.DueAt != 0,
			HasUndo: r.HasUndo, Name: r.Name, Kind: workflow.Kind(r.Kind), Ran: r.State == string(workflow.Pending) && r.Attempt > 0})
	}
	return out
}

// CompleteCancelled records the reply of a step whose order is being
// cancelled (Complete said ErrCancelling): fenced as Complete is, the step
// is Processed and, in the same write, the undoing starts from undo (the
// step's own undo action, or the latest earlier one), or, with nothing to
// undo, the task ends Cancelled. It returns the task's state after.
func (s *Store) CompleteCancelled(ctx context.Context, c Completion, undo *workflow.Ref, due time.Time) (workflow.State, error) {
	d, err := s.FinishCancelled(ctx, c, undo, due)
	return d.State, err
}

// FinishCancelled is CompleteCancelled, returning the order as the write
// left it.
func (s *Store) FinishCancelled(ctx context.Context, c Completion, undo *workflow.Ref, due time.Time) (Done, error) {
	ch := newChange(c.Now)
	p := ch.rec("r", c.Ref)
	c.fence(ch, p)
	ch.cond = append(ch.cond, "attribute_exists(CxBy)")
	c.done(ch, p)
	if undo == nil {
		ch.task(workflow.Pending, workflow.Cancelled, "")
		ch.remove = append(ch.remove, "DueShard", "DueAt")
	} else {
		ch.task(workflow.Pending, workflow.Compensating, "")
		ch.set = append(ch.set, "Dl = DlMs + "+ch.at())
		s.makeReady(ch, *undo, due)
		ch.index(c.OrderID, s.shards, due)
	}
	return s.updateDone(ctx, c.OrderID, ch, fmt.Sprintf("complete %s/%s of a cancelled order", c.OrderID, sortKey(c.Ref)))
}

// cancelParallel cancels an order whose steps run at once: what is ready
// stops, what runs is awaited, and what completed is undone, the latest
// first (workflow.Records.Compensate); the order is undone from now on, and
// ends Cancelled. A step that took effect, or runs, and has no undo is the
// point of no return, as in a linear workflow.
func (s *Store) cancelParallel(ctx context.Context, it stateItem, c CancelRequest) (Cancellation, error) {
	state := workflow.State(it.State)
	res := Cancellation{State: state, ReplyQueue: it.ReplyQueue, Round: it.Round, Workflow: it.Workflow, WfVersion: it.WfVersion}
	recs := it.records()
	switch {
	case state == workflow.Cancelled || (it.CxBy != "" && !state.Ended()):
		res.Verdict = workflow.CancelRepeated
		return res, nil
	case state.Ended():
		return res, &NotCancellableError{fmt.Sprintf("order %s cannot be cancelled: the order is %s: there is nothing to cancel", c.OrderID, state)}
	}
	for ref, r := range recs {
		if !ref.Undo && !r.HasUndo && r.Kind == workflow.KindAgent && (r.State == workflow.Processed || r.State == workflow.Processing ||
			(r.State == workflow.Pending && r.Ran)) {
			return res, &NotCancellableError{fmt.Sprintf("order %s cannot be cancelled: step %s has run, or is running, and cannot be undone: "+
				"the order can no longer be cancelled", c.OrderID, workflow.RecordName(it.Recs[sortKey(ref)].Name, ref))}
		}
	}
	ch := newChange(c.Now)
	ch.cond = append(ch.cond, "V = "+ch.val("version", num(int64(it.Version))))
	ch.set = append(ch.set, "CxBy = "+ch.val("by", str(c.By)), "CxAt = "+ch.at())
	if c.Reason != "" {
		ch.set = append(ch.set, "CxWhy = "+ch.val("why", str(c.Reason)))
	}
	if state == workflow.Compensating {
		res.Verdict = workflow.CancelCompensates // noted; the undoing under way ends the order Failed
		return res, s.update(ctx, c.OrderID, ch, "cancel "+c.OrderID)
	}
	comp := recs.Compensate()
	s.stopAll(ch, comp.Stop, fmt.Sprintf("cancelled before it ran, by %s", c.By))
	for _, r := range comp.Stop {
		res.Stopped = joinNames(res.Stopped, workflow.RecordName(it.Recs[sortKey(r)].Name, r))
	}
	res.Verdict = workflow.CancelStops
	switch {
	case comp.End != "": // nothing ran: nothing to undo
		ch.task(workflow.Pending, workflow.Cancelled, "")
		ch.remove = append(ch.remove, "DueShard", "DueAt")
		res.State = workflow.Cancelled
	default:
		if comp.Await {
			res.Verdict = workflow.CancelAwaits
		}
		ch.task(workflow.Pending, workflow.Compensating, "")
		ch.set = append(ch.set, "Ea = "+ch.val("endAs", str(string(workflow.Cancelled))), "Dl = DlMs + "+ch.at())
		res.State = workflow.Compensating
		if comp.Undo != nil {
			due := c.Now.Add(it.pickup(c.Pickup))
			s.makeReadyAs(ch, "un", *comp.Undo, due)
			ch.index(it.OrderID, s.shards, due)
			res.Undo = comp.Undo
		}
	}
	return res, s.update(ctx, c.OrderID, ch, "cancel "+c.OrderID)
}

func joinNames(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}
