// Package outcome records what became of an attempt, its service's answer
// or its refusal, in the order's state, and in the same conditional write
// moves the order on: the next record made ready, the undoing started, or the
// order ended.
//
// The Agent records its own attempt's outcome before it replies, so an
// outcome never waits in a queue unrecorded: an attempt still claimed past
// its CompleteBy has no reply anywhere, and the Supervisor judges it then,
// however busy the queues are. The reply that follows only tells the
// Scheduler what to start and whom to tell. A reply of an attempt that was
// not current changes nothing (fencing by attempt and round).
package outcome

import (
	"context"
	"errors"
	"time"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Store is the part of the state store that records outcomes.
type Store interface {
	Finish(ctx context.Context, c statestore.Completion) (statestore.Done, error)
	FinishCancelled(ctx context.Context, c statestore.Completion, undo *workflow.Ref, due time.Time) (statestore.Done, error)
	FailFor(ctx context.Context, f statestore.Failure, attempt, round int) (statestore.Done, error)
	PutResult(ctx context.Context, r statestore.Result) error
	EventState(ctx context.Context, orderID string, r workflow.Ref, event string) (statestore.EventState, error)
	Record(ctx context.Context, orderID string, r workflow.Ref) (statestore.Step, error)
	KeepEvent(ctx context.Context, orderID string, read statestore.EventState, event, eventID string, now time.Time) error
}

// Attempt is the outcome of one attempt of a record.
type Attempt struct {
	OrderID string
	Ref     workflow.Ref
	Name    string // the record's action, for the task's last error
	Attempt int
	Round   int
	// Refusal, if set, is the service's non-transient refusal; empty: the
	// service applied the action.
	Refusal string
	// ResultBytes > 0: its result was stored (statestore.PutResult).
	ResultBytes int
	// Token is an async attempt's nonce, for its callback.
	Token string
	// Ran: the action took effect though the outcome is a failure (its
	// answer was over the result limit): its own undo runs too.
	Ran bool
	// Read are the order's records as the attempt's claim left them (an
	// order whose steps run at once): where the others stood.
	Read workflow.Records
	Now  time.Time
}

// Recorded is what recording an outcome did.
type Recorded struct {
	// Stale: the attempt was not the record's current one (or the record
	// already had its outcome): nothing was written, nothing follows.
	Stale bool
	State workflow.State // the task's state after the write
	// ReplyQueue and Round are the order's, for its status notifications.
	ReplyQueue string
	Round      int
	// Ready are the records made ready, which the caller has started.
	Ready []workflow.Ref
	// After is, for a refusal, what follows it (the alert says so).
	After workflow.Aftermath
}

// Recorder records outcomes.
type Recorder struct {
	Store Store
}

// Record writes a's outcome for an order running def, and what follows it,
// in one conditional write. A stale attempt is no error: Recorded.Stale.
func (r Recorder) Record(ctx context.Context, def workflow.Definition, a Attempt) (Recorded, error) {
	var (
		rec Recorded
		err error
	)
	if a.Refusal != "" {
		rec, err = r.refuse(ctx, def, a)
	} else {
		rec, err = r.complete(ctx, def, a)
	}
	if errors.Is(err, statestore.ErrStale) {
		return Recorded{Stale: true}, nil
	}
	return rec, err
}

func (r Recorder) complete(ctx context.Context, def workflow.Definition, a Attempt) (Recorded, error) {
	return r.finish(ctx, def, statestore.Completion{OrderID: a.OrderID, Ref: a.Ref, Attempt: a.Attempt, Round: a.Round,
		Token: a.Token, ResultBytes: a.ResultBytes, Read: a.Read, Now: a.Now})
}

// finish completes the record c names, fenced as c says, and in the same
// write makes the next record ready or ends the order; while the order is
// being cancelled, it starts the undoing instead. In a workflow whose steps
// run at once, what follows is decided from the order's records
// (workflow.Definition.Progress, and the undoing's rules).
func (r Recorder) finish(ctx context.Context, def workflow.Definition, c statestore.Completion) (Recorded, error) {
	if !def.Linear() {
		ref := c.Ref
		c.Progress = func(recs workflow.Records) workflow.Progress { return def.Progress(recs, ref) }
		c.NextDueAt = c.Now.Add(def.PickupTimeout)
		d, err := r.Store.Finish(ctx, c)
		if err != nil {
			return Recorded{}, err
		}
		return Recorded{State: d.State, ReplyQueue: d.ReplyQueue, Round: d.Round, Ready: d.Ready}, nil
	}
	next, more, end := def.Next(c.Ref)
	c.End = end
	if more {
		c.Next, c.NextDueAt = &next, c.Now.Add(def.PickupTimeout)
	}
	d, err := r.Store.Finish(ctx, c)
	if errors.Is(err, statestore.ErrCancelling) {
		return r.completeCancelled(ctx, def, c)
	}
	if err != nil {
		return Recorded{}, err
	}
	rec := Recorded{State: d.State, ReplyQueue: d.ReplyQueue, Round: d.Round}
	if more {
		rec.Ready = []workflow.Ref{next}
	}
	return rec, nil
}

// completeCancelled records a step's completion while its order is being
// cancelled: the step is done, and its undoing starts (its own undo action
// first, if it has one), or the order ends Cancelled.
func (r Recorder) completeCancelled(ctx context.Context, def workflow.Definition, c statestore.Completion) (Recorded, error) {
	var undo *workflow.Ref
	if _, ok := def.Action(workflow.Ref{Index: c.Ref.Index, Undo: true}); ok {
		undo = &workflow.Ref{Index: c.Ref.Index, Undo: true}
	} else if j := def.UndoFrom(c.Ref.Index); j >= 0 {
		undo = &workflow.Ref{Index: j, Undo: true}
	}
	d, err := r.Store.FinishCancelled(ctx, c, undo, c.Now.Add(def.PickupTimeout))
	if err != nil {
		return Recorded{}, err
	}
	rec := Recorded{State: d.State, ReplyQueue: d.ReplyQueue, Round: d.Round}
	if undo != nil {
		rec.Ready = []workflow.Ref{*undo}
	}
	return rec, nil
}

func (r Recorder) refuse(ctx context.Context, def workflow.Definition, a Attempt) (Recorded, error) {
	after := workflow.AfterRefusal(a.Ref.Undo, def.UndoFrom(a.Ref.Index))
	if a.Ran {
		_, hasUndo := def.Action(workflow.Ref{Index: a.Ref.Index, Undo: true})
		after = workflow.AfterGiveUp(a.Ref.Undo, hasUndo && !a.Ref.Undo, true, a.Ref.Index, def.UndoFrom(a.Ref.Index))
	}
	f := statestore.Failure{OrderID: a.OrderID, Ref: a.Ref, Name: a.Name, After: after, Reason: a.Refusal, Token: a.Token,
		Due: a.Now.Add(def.PickupTimeout), Parallel: !def.Linear(), Now: a.Now}
	if a.Ran {
		f.Cause = workflow.Oversized
	}
	d, err := r.Store.FailFor(ctx, f, a.Attempt, a.Round)
	if err != nil {
		return Recorded{}, err
	}
	return Recorded{State: d.State, ReplyQueue: d.ReplyQueue, Round: d.Round, After: d.After, Ready: d.Ready}, nil
}
