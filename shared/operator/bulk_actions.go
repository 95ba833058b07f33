package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// HeldAction is a decision on held orders (retry, skip or undo: DecideHeld)
// as Bulk takes it: on each order Held (step: the one that holds it, ""
// if only one does; result: a skip's). An order no longer held when its
// turn comes (retried, skipped or undone already: a run resumed) is
// refused, not decided twice.
func (o *Operator) HeldAction(a outcome.HoldAction, step string, result json.RawMessage) Action {
	return Action{Name: string(a), Fits: inStates(workflow.Held),
		Do: func(ctx context.Context, id, by string, _ bool) (Acted, error) {
			res, err := o.DecideHeld(ctx, outcome.HoldDecision{OrderID: id, Action: a, Step: step, Result: result, By: by})
			if outcome.IsHeldError(err) {
				return Acted{Refused: err.Error()}, nil
			}
			if err != nil {
				return Acted{}, err
			}
			what := fmt.Sprintf("step %s runs again; it is %s", res.Step, res.State)
			switch a {
			case outcome.HoldSkip:
				what = fmt.Sprintf("step %s taken as done; it is %s", res.Step, res.State)
			case outcome.HoldUndo:
				what = fmt.Sprintf("being undone; it is %s", res.State)
			}
			return Acted{What: what, Detail: res}, nil
		}}
}

// CancelAction is Cancel as Bulk takes it, for reason: on each order that
// has not ended. An order whose cancellation was asked already is found
// done (a run resumed).
func (o *Operator) CancelAction(reason string) Action {
	return Action{Name: "cancel", Fits: notEnded,
		Do: func(ctx context.Context, id, by string, _ bool) (Acted, error) {
			res, err := o.Cancel(ctx, id, by, reason)
			var nc *statestore.NotCancellableError
			switch {
			case errors.As(err, &nc):
				return Acted{Refused: nc.Reason}, nil // the report groups the orders by why
			case err != nil:
				return Acted{}, err
			}
			return Acted{What: res.What, Already: res.What == cancelWhat(statestore.Cancellation{Verdict: workflow.CancelRepeated}),
				Detail: res}, nil
		}}
}

// ResubmitAction is Resubmit as Bulk takes it (step: the record in Error
// to check, "" for any): on each order Failed or CompensationFailed. An
// order resubmitted already is at work again, and refused.
func (o *Operator) ResubmitAction(step string) Action {
	return Action{Name: "resubmit", Fits: inStates(workflow.Failed, workflow.CompensationFailed),
		Do: func(ctx context.Context, id, by string, _ bool) (Acted, error) {
			res, err := o.ResubmitBy(ctx, id, step, by)
			var nr *statestore.NotResubmittableError
			switch {
			case errors.As(err, &nr):
				return Acted{Refused: nr.Error()}, nil
			case err != nil:
				return Acted{}, err
			}
			what := "step " + res.Step
			if res.Undo {
				what = "undo action " + res.Step
			}
			return Acted{What: fmt.Sprintf("%s is Pending again (round %d)", what, res.Round), Detail: res}, nil
		}}
}

// inStates fits the orders in one of states.
func inStates(states ...workflow.State) func(statestore.Task) string {
	return func(t statestore.Task) string {
		for _, st := range states {
			if t.State == st {
				return ""
			}
		}
		if len(states) == 1 {
			return fmt.Sprintf("it is %s, not %s", t.State, states[0])
		}
		return fmt.Sprintf("it is %s, not %s or %s", t.State, states[0], states[1])
	}
}

// notEnded fits the orders that have not ended.
func notEnded(t statestore.Task) string {
	if t.State.Ended() {
		return fmt.Sprintf("it ended %s", t.State)
	}
	return ""
}
