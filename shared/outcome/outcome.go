// Package outcome records what became of a record, its service's answer or
// its refusal, an event a wait took, a timer's end, in the order's state, and
// in the same conditional write moves the order on by the workflow's rules
// (workflow.Definition.Complete, workflow.Order.Fail): what it made ready,
// the undoing started, or the order ended. It also carries out cancels by the
// same rules (Canceller). Every decision is taken on the order as read and
// written on the condition that what it read is still so; a race lost is
// decided again on the newer order (Settle), never dropped.
//
// The Agent records its own attempt's outcome before it replies, so an
// outcome never waits in a queue unrecorded: an attempt still claimed past
// its CompleteBy has no reply anywhere, and the Supervisor judges it then,
// however busy the queues are. The reply that follows only tells the
// Scheduler what to start and whom to tell. An outcome of an attempt that is
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
	Writer
	PutResult(ctx context.Context, r statestore.Result) error
	Record(ctx context.Context, orderID string, r workflow.Ref) (statestore.Step, error)
	KeepEvent(ctx context.Context, orderID string, r workflow.Ref, event, eventID, version string, now time.Time) error
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
	// Read is the order as the attempt's claim left it: the first guess of
	// where the others stand (nil: read it).
	Read *statestore.Snapshot
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
	// Ready are the records made ready, which the caller starts.
	Ready []workflow.Ref
	// Move is what the rules decided.
	Move workflow.Move
	// Slot, for an async attempt recorded, is the key of its agent's calls
	// in flight whose slot it held, as the write found it noted.
	Slot string
}

// Recorder records outcomes.
type Recorder struct {
	Store Store
}

// Record writes a's outcome for an order running def, and what follows it,
// in one conditional write. A stale attempt is no error: Recorded.Stale.
func (r Recorder) Record(ctx context.Context, def workflow.Definition, a Attempt) (Recorded, error) {
	f := &statestore.Fence{Ref: a.Ref, Attempt: a.Attempt, Round: a.Round, Token: a.Token}
	return r.settle(ctx, def, a.OrderID, a.Read, f, result{refusal: a.Refusal, ran: a.Ran, bytes: a.ResultBytes}, a.Now)
}

// result is what became of a record: done (refusal ""), or refused for
// good (ran: after taking effect).
type result struct {
	refusal string
	ran     bool
	bytes   int
}

// settle records res for the record f fences, by the workflow's rules, on the
// order as first has it (nil: as read), decided again on every race lost.
func (r Recorder) settle(ctx context.Context, def workflow.Definition, orderID string, first *statestore.Snapshot,
	f *statestore.Fence, res result, now time.Time) (Recorded, error) {
	snap, w, err := Settle(ctx, r.Store, orderID, first, func(s statestore.Snapshot) (*statestore.Write, error) {
		if !f.Holds(s, now) {
			return nil, statestore.ErrStale
		}
		if err := runs(s, def); err != nil {
			return nil, err
		}
		var m workflow.Move
		if res.refusal != "" {
			cause := workflow.Refused
			if res.ran {
				cause = workflow.Oversized
			}
			m = s.Order().Fail(f.Ref, cause, res.ran, now)
		} else {
			m = def.Complete(s.Order(), f.Ref, now)
		}
		return &statestore.Write{Move: m, Fence: f, Reason: res.refusal, ResultBytes: res.bytes,
			Due: now.Add(def.PickupTimeout), Now: now}, nil
	})
	if errors.Is(err, statestore.ErrStale) || errors.Is(err, statestore.ErrNotFound) {
		return Recorded{Stale: true}, nil // not the record's to record (no such order: nothing to)
	}
	if err != nil {
		return Recorded{}, err
	}
	task := snap.Task()
	rec := Recorded{State: task.State, ReplyQueue: task.ReplyQueue, Round: task.Round, Ready: w.Move.Ready, Move: w.Move}
	if st, ok := snap.Step(f.Ref); ok {
		rec.Slot = st.Slot
	}
	return rec, nil
}

// Release gives claimed attempt a back with no failure counted: its flow
// control held the call (a pause, a Retry-After, its key's slots all held),
// and the record is ready again at until. a.Ran says whether a request of
// the attempt may have taken effect (a retry after a transient fault); if
// not, the record keeps no claim that would have it undone, only that it
// waited and why. If the order is being undone, the undoing goes on
// (Recorded.Ready: what it made ready). Recorded.Stale: the attempt is no
// longer the record's to give back.
func (r Recorder) Release(ctx context.Context, def workflow.Definition, a Attempt, until time.Time, reason string) (Recorded, error) {
	f := &statestore.Fence{Ref: a.Ref, Attempt: a.Attempt, Round: a.Round, Token: a.Token}
	snap, w, err := Settle(ctx, r.Store, a.OrderID, a.Read, func(s statestore.Snapshot) (*statestore.Write, error) {
		st, ok := s.Step(a.Ref)
		if !ok || st.State != workflow.Processing || !f.Holds(s, a.Now) {
			return nil, statestore.ErrStale
		}
		if err := runs(s, def); err != nil {
			return nil, err
		}
		readyAt := until
		if !a.Ran {
			readyAt = a.Now // ready now: its Agent holds its request back (a key's line may hand it a slot sooner)
		}
		return &statestore.Write{Move: s.Order().GiveBack(a.Ref, a.Ran), Fence: f, Now: a.Now, Due: a.Now.Add(def.PickupTimeout),
			Looks: []statestore.Look{{Ref: a.Ref, FailureCount: st.FailureCount, Reason: reason, ReadyAt: readyAt, By: "its agent",
				Held: !a.Ran, Due: until.Add(def.PickupTimeout)}}}, nil
	})
	if errors.Is(err, statestore.ErrStale) || errors.Is(err, statestore.ErrNotFound) {
		return Recorded{Stale: true}, nil
	}
	if err != nil {
		return Recorded{}, err
	}
	task := snap.Task()
	return Recorded{State: task.State, ReplyQueue: task.ReplyQueue, Round: task.Round, Ready: w.Move.Ready, Move: w.Move}, nil
}
