package outcome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// StartStore is the part of the state store a Starter uses beyond the
// Recorder's: arming a wait or a timer, and reading what a timer's until
// expression is made of (kept.Inputs: Kept opens them).
type StartStore interface {
	Arm(ctx context.Context, orderID string, r workflow.Ref, kind workflow.Kind, due, now time.Time, version string) (statestore.Step, map[string]string, error)
	Load(ctx context.Context, orderID string) (statestore.Task, []statestore.Step, error)
	Inputs(ctx context.Context, st statestore.Step, order kept.Value) (kept.Inputs, error)
	Order(ctx context.Context, orderID string) (string, error)
}

// Starter starts the records an outcome made ready: an agent step's request
// goes to its Agent (whose claim starts an attempt); a wait or a timer is
// armed, due at its timeout or its time, and parked. A wait whose event was
// kept, or a timer whose time has come, is completed at once, and what it
// makes ready is started in turn.
type Starter struct {
	Dispatch dispatch.Dispatcher
	Store    StartStore
	Recorder Recorder
	Now      func() time.Time
	Log      *slog.Logger
	// Budget bounds the payload bytes the timers' until documents it reads
	// hold at once (its function's: the messages of a batch run at once);
	// nil: an Agent's attempt, whose own reservation they ride on.
	Budget *kept.Budget
	// Kept opens the values a timer's until document is made of (nil:
	// inline ones only, none sealed).
	Kept *kept.Boundary
}

// Completed is a wait or a timer a Starter completed, for the caller to
// tell the order's caller (and count the order's end, if it ended).
type Completed struct {
	Ref  workflow.Ref
	Name string
	Recorded
}

// Start starts refs of an order running def; payload is the order, if the
// caller has it (an Agent reads it otherwise).
func (s Starter) Start(ctx context.Context, def workflow.Definition, orderID string, refs []workflow.Ref, payload json.RawMessage) ([]Completed, error) {
	var done []Completed
	for len(refs) > 0 {
		ref := refs[0]
		refs = refs[1:]
		c, err := s.start(ctx, def, orderID, ref, payload)
		if err != nil {
			return done, err
		}
		if c != nil {
			done = append(done, *c)
			refs = append(refs, c.Ready...)
		}
	}
	return done, nil
}

// start starts one record; it returns the completion it made, if any.
func (s Starter) start(ctx context.Context, def workflow.Definition, orderID string, ref workflow.Ref, payload json.RawMessage) (*Completed, error) {
	if ref.Undo || ref.Index >= len(def.Steps) || def.Steps[ref.Index].Kind() == workflow.KindAgent {
		return nil, s.Dispatch.Start(ctx, def, orderID, ref, payload)
	}
	st, now := def.Steps[ref.Index], s.Now()
	var due time.Time
	var refusal string // a timer whose until gives no time: it fails
	switch {
	case st.Wait != nil && st.Wait.Timeout > 0:
		due = now.Add(st.Wait.Timeout)
	case st.Sleep != nil:
		var err error
		due, err = s.wakeAt(ctx, st, orderID, ref, payload, now)
		var ee *workflow.ExpressionError
		switch {
		case kept.NoKey(err):
			return nil, err // a function with no key yet (a deploy adding it): the start is tried again, on one that has it
		case errors.As(err, &ee) || kept.Broken(err):
			// A fault of the workflow or of the order (or its payload gone,
			// sealed data that does not open, or a document larger than its
			// function reads at once), which no retry mends: the step fails
			// for good now, with the reason.
			s.Log.Error("a timer's until gave no time: the step fails", "order_id", orderID, "step", st.Name, "err", err)
			refusal, due = err.Error(), now
		case err != nil:
			return nil, err // an until out of time too: the start is tried again
		}
	} // a wait with no timeout: the order's deadline bounds it
	_, events, err := s.Store.Arm(ctx, orderID, ref, st.Kind(), due, now, def.Version)
	switch {
	case errors.Is(err, statestore.ErrStale):
		// Armed already (a repeated start), or no longer ready: a kept
		// event, or a time come, the Supervisor finds.
		return nil, nil
	case err != nil:
		return nil, err
	case refusal != "":
		rec, err := s.Recorder.Refuse(ctx, def, orderID, ref, refusal, now)
		if err != nil || rec.Stale {
			return nil, err
		}
		return &Completed{Ref: ref, Name: st.Name, Recorded: rec}, nil
	case st.Wait != nil && events[st.Wait.Event] == "":
		return nil, nil // parked until the event, or its timeout
	case st.Sleep != nil && (due.IsZero() || due.After(now)):
		return nil, nil // parked until its time
	}
	// Its event was kept, or its time has come: it is done now.
	rec, err := s.Recorder.Wake(ctx, def, orderID, ref, now)
	if err != nil || rec.Stale {
		return nil, err
	}
	return &Completed{Ref: ref, Name: st.Name, Recorded: rec}, nil
}

// wakeAt is when a timer made ready now ends: after its sleep, or at the
// time its until expression gives over the order's document (a
// *workflow.ExpressionError if it gives none).
func (s Starter) wakeAt(ctx context.Context, st workflow.Step, orderID string, ref workflow.Ref, payload json.RawMessage, now time.Time) (time.Time, error) {
	if st.Sleep.Until == "" {
		return st.Sleep.When(now, workflow.Document{})
	}
	ctx, let := kept.Reserving(ctx, s.Budget, time.Time{}, 0) // the function's time bounds the wait
	defer let()
	_, recs, err := s.Store.Load(ctx, orderID)
	if err != nil {
		return time.Time{}, err
	}
	order := payload
	if len(order) == 0 {
		o, err := s.Store.Order(ctx, orderID)
		if err != nil {
			return time.Time{}, err
		}
		order = json.RawMessage(o)
	}
	for _, r := range recs {
		if r.Ref == ref {
			in, err := s.Store.Inputs(ctx, r, kept.Stored(order))
			if err != nil {
				return time.Time{}, err
			}
			doc, err := s.Kept.Document(ctx, in)
			if err != nil {
				return time.Time{}, err
			}
			at, err := st.Sleep.When(now, doc.Document)
			var expr *workflow.ExpressionError
			if errors.As(err, &expr) && doc.Sealed { // jq's message may quote the order's data
				err = &workflow.ExpressionError{What: expr.What, Reason: workflow.SealedExpressionReason}
			}
			return at, err
		}
	}
	return time.Time{}, fmt.Errorf("step %s of order %s: no record", st.Name, orderID)
}
