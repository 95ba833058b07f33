package submission

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// cancelReceives is how often a cancel for an order not stored yet is
// tried (the order may be in the same queue, behind it) before it is
// rejected to the DLQ with the reason.
const cancelReceives = 3

// cancel carries out a cancel message (statestore.Store.Cancel) and what
// follows it: the first undo action sent to its Agent, the order's caller
// told. A refusal (the order ended, or is past a step that cannot be
// undone) is rejected to the DLQ with the reason, and the caller told.
func (h *Handler) cancel(ctx context.Context, rec events.SQSMessage, c message.Cancel) error {
	now := h.Now()
	res, err := h.store.Cancel(ctx, statestore.CancelRequest{OrderID: c.OrderID, By: cancelledBy(rec), Reason: c.Reason,
		Pickup: h.cfg.Workflows.Default().PickupTimeout, Now: now})
	switch {
	case errors.Is(err, statestore.ErrNotFound):
		if n, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"]); n < cancelReceives {
			return fmt.Errorf("cancel of %s: no such order yet (it may be behind the cancel); tried again", c.OrderID)
		}
		return message.Invalid("cancel of %s: no such order (after %d receives)", c.OrderID, cancelReceives)
	case statestore.IsNotCancellable(err):
		h.notify.Post(ctx, notify.Event{OrderID: c.OrderID, ReplyQueue: res.ReplyQueue, Round: res.Round,
			Event: workflow.EventCancelRefused, Error: err.Error(), State: res.State, At: now})
		return message.Invalid("%v", err)
	case err != nil:
		return err
	}
	h.metrics.Count(metrics.CancelsRequested, 1, map[string]any{"OrderID": c.OrderID, "State": string(res.State)})
	h.log.Info("cancel accepted", "order_id", c.OrderID, "state", res.State, "stopped", res.Stopped)
	if res.Verdict != workflow.CancelRepeated {
		h.notify.CancelAccepted(ctx, notify.Event{OrderID: c.OrderID, ReplyQueue: res.ReplyQueue, Round: res.Round, At: now}, res.State)
	}
	if res.Undo != nil {
		def, err := h.catalog.For(ctx, c.OrderID, res.Workflow, res.WfVersion)
		if err != nil {
			return err
		}
		// If this send is lost, the undo's pickup deadline brings the Supervisor.
		return h.dispatch.Start(ctx, def, c.OrderID, *res.Undo, nil) // the Agent reads the order
	}
	return nil
}

// cancelledBy names who sent a cancel message: the orders queue's sender.
func cancelledBy(rec events.SQSMessage) string {
	if id := rec.Attributes["SenderId"]; id != "" {
		return "orders queue (sender " + id + ")"
	}
	return "orders queue"
}
