package submission

import (
	"context"
	"errors"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
)

// cancel carries out a cancel message with the one cancel there is
// (outcome.Canceller: the first undo action started at its Agent, the
// order's caller told). A refusal (the order ended, or is past a step that
// cannot be undone) is rejected to the DLQ with the reason.
func (h *Handler) cancel(ctx context.Context, rec events.SQSMessage, c message.Cancel) error {
	k := outcome.Canceller{Store: h.store, Notify: h.notify, Start: dispatch.Restarter{Records: h.store,
		AgentQueues: h.cfg.AgentQueues, SchedulerQueueURL: h.cfg.SchedulerQueueURL, Send: h.send}, Slots: h.slotsOf(), Log: h.log}
	req := statestore.CancelRequest{OrderID: c.OrderID, By: cancelledBy(rec), Reason: c.Reason,
		Pickup: h.cfg.Workflows.Default().PickupTimeout, Now: h.Now()}
	res, err := k.Cancel(ctx, req)
	switch {
	case errors.Is(err, statestore.ErrNotFound):
		return ahead(rec, "cancel of "+c.OrderID, err)
	case statestore.IsNotCancellable(err):
		return message.Invalid("%v", err)
	case err != nil:
		return err
	}
	h.metrics.Count(metrics.CancelsRequested, 1, map[string]any{"OrderID": c.OrderID, "State": string(res.State)})
	h.log.Info("cancel accepted", "order_id", c.OrderID, "state", res.State, "stopped", res.Stopped)
	return nil
}

// cancelledBy names who sent a cancel message: the orders queue's sender.
func cancelledBy(rec events.SQSMessage) string {
	if id := rec.Attributes["SenderId"]; id != "" {
		return "orders queue (sender " + id + ")"
	}
	return "orders queue"
}
