package operator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/workflow"
)

// BulkRate is how many orders a second a bulk action acts on unless told
// otherwise (sasctl's --rate, the console's, the client's): 3,000 orders in
// 2.5 minutes, so that a service each order calls at once is not hit by
// them all in a second.
const BulkRate = 20

// ActionSpec names an action Bulk takes, and what it takes: what sasctl's
// flags, the console's bulk form and the client give ActionOf.
type ActionSpec struct {
	Name string // retry, skip, undo, cancel, resubmit (ActionNames)
	// Step is, for retry and skip, the step that holds the order ("": the
	// one that does); for resubmit, the record in Error, as a check ("":
	// any). Undo and cancel take none.
	Step   string
	Result json.RawMessage // skip: the step's result, JSON (none: null)
	Reason string          // cancel: why, kept with each order
}

// ActionNames are the actions ActionOf builds, as sasctl's commands name
// them.
var ActionNames = []string{"retry", "skip", "undo", "cancel", "resubmit"}

// ActionOf is the action spec names, as Bulk takes it: HeldAction,
// CancelAction or ResubmitAction. An unknown name is an error, and so is a
// skip's result that is not JSON (a *workflow.HeldError, as DecideHeld's).
func (o *Operator) ActionOf(spec ActionSpec) (Action, error) {
	switch spec.Name {
	case string(outcome.HoldRetry):
		return o.HeldAction(outcome.HoldRetry, spec.Step, nil), nil
	case string(outcome.HoldSkip):
		if len(spec.Result) > 0 && !message.ValidJSON(spec.Result) {
			return Action{}, &workflow.HeldError{Reason: ResultNotJSON}
		}
		return o.HeldAction(outcome.HoldSkip, spec.Step, spec.Result), nil
	case string(outcome.HoldUndo):
		return o.HeldAction(outcome.HoldUndo, "", nil), nil
	case "cancel":
		return o.CancelAction(spec.Reason), nil
	case "resubmit":
		return o.ResubmitAction(spec.Step), nil
	}
	return Action{}, fmt.Errorf("no action %q: the actions are %s", spec.Name, strings.Join(ActionNames, ", "))
}

// KnownAction reports whether ActionOf builds the action name.
func KnownAction(name string) bool { return slices.Contains(ActionNames, name) }

// DefaultState is the state a query of the action lists when it names none:
// Held for retry, skip and undo, Failed for resubmit, and every state for
// cancel (the orders ended are refused).
func (spec ActionSpec) DefaultState() workflow.State {
	switch spec.Name {
	case string(outcome.HoldRetry), string(outcome.HoldSkip), string(outcome.HoldUndo):
		return workflow.Held
	case "resubmit":
		return workflow.Failed
	}
	return ""
}

// Would are the orders a dry run's report says the action would act on, in
// the order listed: the selection (IDs) of the run that confirms it, with
// BulkOptions.FromDryRun.
func (rep BulkReport) Would() []string {
	var ids []string
	for _, r := range rep.Orders {
		if r.Outcome == BulkWould {
			ids = append(ids, r.OrderID)
		}
	}
	return ids
}
