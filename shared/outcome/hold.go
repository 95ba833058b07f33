package outcome

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// HoldStore is what an operator's decision on a held order reads and
// writes: the order, its definition (what follows a step), and a skipped
// step's result.
type HoldStore interface {
	Writer
	Definition(ctx context.Context, orderID string) (workflow.Definition, error)
	PutResult(ctx context.Context, r statestore.Result) error
	// Keep pushes out when what the order keeps may expire, before the
	// decision puts it to work again (statestore.Store.Keep).
	Keep(ctx context.Context, snap statestore.Snapshot, now time.Time) error
}

// Holds carries out an operator's decisions on held orders (workflow's
// RetryHeld, SkipHeld, UndoHeld): each one conditional write on the order as
// read, decided again if another write came first; then the requests of
// what it made ready.
type Holds struct {
	Store  HoldStore
	Start  RecordStarter    // nil: the caller starts HoldDecision.Start
	Notify *notify.Notifier // nil: nobody is told
	// Pickup is a record made ready's pickup deadline, for an order stored
	// before its workflow's was kept.
	Pickup time.Duration
}

// HoldAction is what an operator decides for a held order.
type HoldAction string

// The operator's choices.
const (
	HoldRetry HoldAction = "retry" // run the held step again, its failures forgotten
	HoldSkip  HoldAction = "skip"  // take the held step as done, with a result given by hand
	HoldUndo  HoldAction = "undo"  // undo the order now
)

// HoldDecision is one decision on a held order.
type HoldDecision struct {
	OrderID string
	Action  HoldAction
	// Step names the held record (a forEach item's as step#N); "" if only
	// one holds the order. Not for HoldUndo.
	Step string
	// Result, for HoldSkip: the step's result, as its service would have
	// answered (JSON; none: null).
	Result json.RawMessage
	// ResultBytes is the result's size as the operator gave it, when Result
	// is it sealed (0: len(Result)): the result limit is the given one's.
	ResultBytes int
	By          string // who decided, for the record's history
	Now         time.Time
}

// HoldDecided is what a decision did.
type HoldDecided struct {
	OrderID string         `json:"orderId"`
	Step    string         `json:"step,omitempty"`
	State   workflow.State `json:"state"` // the order's, after the decision
	// Start are the records it made ready, whose requests were sent.
	Start []workflow.Ref `json:"-"`
}

// Decide takes d on its order and sends the requests of what it made ready.
// A decision the order cannot take is a *workflow.HeldError with the reason.
func (h Holds) Decide(ctx context.Context, d HoldDecision) (HoldDecided, error) {
	def, err := h.Store.Definition(ctx, d.OrderID)
	if err != nil {
		return HoldDecided{}, err
	}
	out := HoldDecided{OrderID: d.OrderID}
	stored, kept := false, false
	// keep pushes out when its items expire, once the decision is taken:
	// the hold stopped the order's deadline, not their time to live.
	keep := func(s statestore.Snapshot, w *statestore.Write) (*statestore.Write, error) {
		if !kept {
			if err := h.Store.Keep(ctx, s, d.Now); err != nil {
				return nil, err
			}
			kept = true
		}
		return w, nil
	}
	after, w, err := Settle(ctx, h.Store, d.OrderID, nil, func(s statestore.Snapshot) (*statestore.Write, error) {
		if err := runs(s, def); err != nil {
			return nil, err
		}
		o := s.Order()
		w := &statestore.Write{Now: d.Now, Due: d.Now.Add(s.Pickup(h.Pickup))}
		if d.Action == HoldUndo {
			m, err := o.UndoHeld()
			if err != nil {
				return nil, err
			}
			w.Move = m
			for _, ref := range o.Held() {
				w.Notes = append(w.Notes, statestore.Note{Ref: ref, What: "undone by " + d.By + " while its failure held the order"})
			}
			return keep(s, w)
		}
		ref, err := heldRef(s, o, d.Step)
		if err != nil {
			return nil, err
		}
		st, _ := s.Step(ref)
		out.Step = st.RecordName()
		switch d.Action {
		case HoldRetry:
			if w.Move, err = def.RetryHeld(o, ref); err != nil {
				return nil, err
			}
			w.Looks = []statestore.Look{{Ref: ref, ReadyAt: d.Now, Due: w.Due, Retry: true, By: "the operator " + d.By,
				Reason: fmt.Sprintf("retried by %s after its failure held the order", d.By)}}
		case HoldSkip:
			if w.Move, err = def.SkipHeld(o, ref, d.Now); err != nil {
				return nil, err
			}
			w.Notes = []statestore.Note{{Ref: ref, What: "skipped by " + d.By + " with a result given by hand"}}
			if given := cmp.Or(d.ResultBytes, len(d.Result)); given > def.Limit() {
				return nil, &workflow.HeldError{Reason: fmt.Sprintf("the result is %d bytes, over workflow %s's %d-byte result limit",
					given, def.Name, def.Limit())}
			}
			if len(d.Result) > 0 && !stored {
				if err := h.Store.PutResult(ctx, statestore.Result{OrderID: d.OrderID, Ref: ref, Name: st.Name, Round: st.Round,
					Attempt: st.Attempt, JSON: d.Result, Now: d.Now, Lifetime: def.Lifetime(), Keep: s.Retention()}); err != nil {
					return nil, err
				}
				stored = true
			}
			if stored {
				w.ResultBytes, w.ResultOf = cmp.Or(d.ResultBytes, len(d.Result)), ref
			}
		default:
			return nil, &workflow.HeldError{Reason: fmt.Sprintf("%q: a held order is retried, skipped or undone", d.Action)}
		}
		return keep(s, w)
	})
	if err != nil {
		return out, err
	}
	task := after.Task()
	out.State = task.State
	out.Start = append(append(out.Start, w.Move.Ready...), w.Move.Resume...) // a retried record is among those resumed
	if h.Notify != nil && task.State.Ended() {
		h.Notify.PostEnded(ctx, d.OrderID, task.ReplyQueue, task.Round, task.State, "", d.Now)
	}
	if h.Start == nil {
		return out, nil
	}
	// If a send is lost, its record's pickup deadline brings the Supervisor.
	return out, h.Start.Start(ctx, d.OrderID, out.Start, 0)
}

// heldRef is the held record step names ("": the one that holds the order).
func heldRef(s statestore.Snapshot, o workflow.Order, step string) (workflow.Ref, error) {
	held := o.Held()
	if o.State != workflow.Held {
		return workflow.Ref{}, &workflow.HeldError{Reason: fmt.Sprintf("order %s is %s, not held", s.OrderID(), o.State)}
	}
	var names []string
	for _, ref := range held {
		st, _ := s.Step(ref)
		if st.RecordName() == step || (step == "" && len(held) == 1) {
			return ref, nil
		}
		names = append(names, st.RecordName())
	}
	if step == "" {
		return workflow.Ref{}, &workflow.HeldError{Reason: fmt.Sprintf("order %s is held by %s: name one", s.OrderID(), strings.Join(names, ", "))}
	}
	return workflow.Ref{}, &workflow.HeldError{Reason: fmt.Sprintf("step %s does not hold order %s (held by %s)", step, s.OrderID(),
		strings.Join(names, ", "))}
}

// IsHeldError reports whether err says why a decision on a held order
// cannot be taken.
func IsHeldError(err error) bool {
	var h *workflow.HeldError
	return errors.As(err, &h)
}
