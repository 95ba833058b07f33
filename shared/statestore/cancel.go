package statestore

import (
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/workflow"
)

// NotCancellableError says why an order cannot be cancelled.
type NotCancellableError struct {
	OrderID string
	Reason  string // why, naming no order: many orders' refusals group by it
}

// Error says which order and why.
func (e *NotCancellableError) Error() string {
	if e.OrderID == "" {
		return e.Reason
	}
	return fmt.Sprintf("order %s cannot be cancelled: %s", e.OrderID, e.Reason)
}

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
	Stopped string         // the steps that will not run, by name (CancelStops)
	// Undo, if set, is the undo action made ready: the caller has it sent
	// to its Agent.
	Undo       *workflow.Ref
	ReplyQueue string
	Round      int
	Workflow   string // the order's workflow, and its version
	WfVersion  string
	// Slots are the slots of their agents' calls in flight that the
	// accepted async attempts it gave back held, to pass to their undos.
	Slots []keyline.Slot
}
