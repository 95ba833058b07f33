package outcome

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// RecordStarter starts an order's records from what they say (dispatch.Restarter).
type RecordStarter interface {
	Start(ctx context.Context, orderID string, refs []workflow.Ref, delay time.Duration) error
}

// Canceller carries out a cancel by the workflow's rules (workflow.Order's
// Cancel), written as every decision is (Settle); the order's caller is
// told, and the first undo action, if one was made ready, is started
// straight at its Agent. A cancel message on the orders queue (Submission)
// and sasctl cancel or the console (the operator) run this one
// implementation.
type Canceller struct {
	Store  Writer
	Start  RecordStarter    // nil: the caller starts Cancellation.Undo
	Notify *notify.Notifier // nil: nobody is told
	// Slots passes the slot of its agent's calls in flight that an
	// accepted async attempt the cancel gives back held to the attempt's
	// undo (nil: it ends at the attempt's CompleteBy).
	Slots SlotLetter
	Log   *slog.Logger // a slot not let go (nil: nothing logged)
}

// SlotLetter lets a slot of an agent's calls in flight go, handing it on
// (dispatch.Slots).
type SlotLetter interface {
	LetGo(ctx context.Context, agent, key, holder string, now time.Time) error
	// Pass hands sl's slot to the call sl.To, reserved for it until
	// sl.Until (keyline.Store.Pass).
	Pass(ctx context.Context, sl keyline.Slot, now time.Time) error
}

// Cancel cancels the order c names. A refusal (*statestore.NotCancellableError)
// is told to the order's caller as cancel-refused and returned.
func (k Canceller) Cancel(ctx context.Context, c statestore.CancelRequest) (statestore.Cancellation, error) {
	res, err := k.decide(ctx, c)
	ev := notify.Event{OrderID: c.OrderID, ReplyQueue: res.ReplyQueue, Round: res.Round, At: c.Now}
	switch {
	case statestore.IsNotCancellable(err):
		ev.Event, ev.Error, ev.State = workflow.EventCancelRefused, err.Error(), res.State
		if k.Notify != nil {
			k.Notify.Post(ctx, ev)
		}
		return res, err
	case err != nil:
		return res, err
	case res.Verdict == workflow.CancelRepeated:
		return res, nil
	}
	if k.Notify != nil {
		k.Notify.CancelAccepted(ctx, ev, res.State)
	}
	for _, sl := range res.Slots {
		// The attempt given back is undone: its undo, of the same agent,
		// has the slot passed to it, so that it does not wait for the
		// attempt's CompleteBy and no other call takes it first.
		if k.Slots == nil {
			break
		}
		if err := k.Slots.Pass(ctx, sl, c.Now); err != nil && k.Log != nil {
			// The cancel is recorded (asked again, it is a repeat), and
			// its undo goes on: the slot ends at its CompleteBy.
			k.Log.Warn(keyline.NotLetGo, "order_id", c.OrderID, "key", sl.Key, "holder", sl.Holder, "err", err)
		}
	}
	if res.Undo == nil || k.Start == nil {
		return res, nil
	}
	// If this send is lost, the undo's pickup deadline brings the Supervisor.
	return res, k.Start.Start(ctx, c.OrderID, []workflow.Ref{*res.Undo}, 0)
}

// decide takes the cancel's decision on the order and writes it.
func (k Canceller) decide(ctx context.Context, c statestore.CancelRequest) (statestore.Cancellation, error) {
	var res statestore.Cancellation
	snap, w, err := Settle(ctx, k.Store, c.OrderID, nil, func(s statestore.Snapshot) (*statestore.Write, error) {
		task := s.Task()
		res = statestore.Cancellation{State: task.State, ReplyQueue: task.ReplyQueue, Round: task.Round, Workflow: task.Workflow,
			WfVersion: task.Version}
		m, verdict, reason := s.Order().Cancel()
		res.Verdict = verdict
		switch verdict {
		case workflow.CancelRefused:
			return nil, &statestore.NotCancellableError{OrderID: c.OrderID, Reason: reason}
		case workflow.CancelRepeated:
			return nil, nil
		}
		names := make([]string, len(m.Stopped))
		for i, r := range m.Stopped {
			st, _ := s.Step(r)
			names[i] = st.RecordName()
		}
		res.Stopped = strings.Join(names, ", ")
		var looks []statestore.Look
		for _, ch := range m.Changes {
			if ch.State == workflow.Pending { // an accepted async attempt, given back to be undone
				st, _ := s.Step(ch.Ref)
				if st.Slot != "" {
					sl := keyline.Slot{Agent: st.Agent, Key: st.Slot, Holder: keyline.Holder(st.OrderID, st.Ref, st.Round, st.Attempt)}
					undo := workflow.Ref{Index: ch.Ref.Index, Item: ch.Ref.Item, Undo: true}
					if u, ok := s.Step(undo); ok && u.Agent == st.Agent {
						// Its undo, of the same agent, takes the slot from
						// it: the service drops the accepted call when the
						// undo comes, and no other call of the key is in
						// flight between. Kept for it until its pickup
						// deadline brings the Supervisor (an undo made
						// ready after others, or whose key is another,
						// leaves it idle until then), at the least
						// keyline.ReserveFor.
						sl.To, sl.Until = keyline.WaiterID(st.OrderID, undo, st.Round), c.Now.Add(max(s.Pickup(c.Pickup), keyline.ReserveFor))
						res.Slots = append(res.Slots, sl)
					}
					// Else its undo is another agent's, and waits for no
					// slot of this one, while the accepted call may go on
					// at its service: its slot is held until the attempt's
					// CompleteBy, as the call may be.
				}
				looks = append(looks, statestore.Look{Ref: ch.Ref, FailureCount: st.FailureCount, ReadyAt: c.Now, By: "the cancel",
					Reason: fmt.Sprintf("attempt %d, its call accepted by its service, is not awaited: it is undone", st.Attempt)})
			}
		}
		return &statestore.Write{Move: m, Looks: looks, Cancel: &c, Due: c.Now.Add(s.Pickup(c.Pickup)), Now: c.Now}, nil
	})
	if err != nil || w == nil {
		return res, err
	}
	res.State = snap.Task().State
	if len(w.Move.Ready) > 0 {
		res.Undo = &w.Move.Ready[0]
	}
	return res, nil
}
