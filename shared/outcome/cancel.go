package outcome

import (
	"context"
	"time"

	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// CancelStore is the part of the state store a cancel uses.
type CancelStore interface {
	Cancel(ctx context.Context, c statestore.CancelRequest) (statestore.Cancellation, error)
}

// RecordStarter starts an order's records from what they say (dispatch.Restarter).
type RecordStarter interface {
	Start(ctx context.Context, orderID string, refs []workflow.Ref, delay time.Duration) error
}

// Canceller carries out a cancel: the state store decides and writes it
// (statestore.Store.Cancel), the order's caller is told, and the first undo
// action, if one was made ready, is started straight at its Agent. A cancel
// message on the orders queue (Submission) and sasctl cancel or the console
// (the operator) run this one implementation.
type Canceller struct {
	Store  CancelStore
	Start  RecordStarter
	Notify *notify.Notifier
}

// Cancel cancels the order c names. A refusal (*statestore.NotCancellableError)
// is told to the order's caller as cancel-refused and returned.
func (k Canceller) Cancel(ctx context.Context, c statestore.CancelRequest) (statestore.Cancellation, error) {
	res, err := k.Store.Cancel(ctx, c)
	ev := notify.Event{OrderID: c.OrderID, ReplyQueue: res.ReplyQueue, Round: res.Round, At: c.Now}
	switch {
	case statestore.IsNotCancellable(err):
		ev.Event, ev.Error, ev.State = workflow.EventCancelRefused, err.Error(), res.State
		k.Notify.Post(ctx, ev)
		return res, err
	case err != nil:
		return res, err
	case res.Verdict == workflow.CancelRepeated:
		return res, nil
	}
	k.Notify.CancelAccepted(ctx, ev, res.State)
	if res.Undo == nil {
		return res, nil
	}
	// If this send is lost, the undo's pickup deadline brings the Supervisor.
	return res, k.Start.Start(ctx, c.OrderID, []workflow.Ref{*res.Undo}, 0)
}
