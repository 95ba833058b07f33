package explore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// An operator acts on the orders of a customer by query at random moments
// of a searching run (search.go), as sasctl retry, undo and cancel do with
// --field: operator.Bulk over the search, paced, each order acted on by the
// rules' own door (outcome.Holds, outcome.Canceller) and the requests of
// what it made ready sent to the explorer's queues. Before it, the search
// must find every order of the customer stored by then; after it, its
// report must add up (operator.BulkReport.Check) and list only orders of
// the customer.

// bulkActions are the bulk actions a run's operator takes, one at random
// each time.
var bulkActions = []string{string(outcome.HoldRetry), string(outcome.HoldUndo), "cancel"}

// bulk takes a bulk action on the orders of a customer: with an order
// held, most often a decision on the held orders of its customer; else on
// those of a sent order's customer, an action at random.
func (w *World) bulk(ctx context.Context) {
	o, kind := w.heldOrder(ctx), bulkActions[w.bulker.IntN(len(bulkActions))]
	if o == nil || w.bulker.IntN(4) == 0 {
		o = w.randomOrder(w.bulker)
	} else {
		kind = bulkActions[w.bulker.IntN(2)] // retry or undo
	}
	if o == nil {
		return
	}
	s := w.customerSearch(o.customer)
	w.checkStoredFound(ctx, o.customer)
	act := w.cancelAction()
	if kind != "cancel" {
		s.State, act = workflow.Held, w.heldAction(outcome.HoldAction(kind))
	}
	rep, err := w.op.Bulk(ctx, w.searched(s), act, operator.BulkOptions{By: "explorer", Rate: 5, Sleep: w.paced}, nil)
	w.note("bulk %s of %s=%s: %d listed, %d done, %d already, %d refused, %d changed, %d left: %v", kind, searchField, o.customer,
		rep.Listed, rep.Done, rep.Already, rep.Refused, rep.Changed, rep.Left, err)
	if err != nil {
		return
	}
	w.count("bulk " + kind)
	if rep.Done > 0 {
		w.count("bulk " + kind + " that acted")
	}
	var bad []string
	for _, why := range rep.Check() {
		bad = append(bad, "a bulk report adds up: "+why)
	}
	for _, r := range rep.Orders {
		if x := w.byID[r.OrderID]; x == nil || x.customer != o.customer {
			bad = append(bad, fmt.Sprintf("a bulk action lists only the orders of its value: %s of %s=%s listed %s", kind, searchField,
				o.customer, r.OrderID))
		}
	}
	w.mu.Lock()
	w.bulkBad = append(w.bulkBad, bad...)
	w.mu.Unlock()
}

// heldOrder is the first order held now (nil: none).
func (w *World) heldOrder(ctx context.Context) *order {
	for _, o := range w.orders {
		if task, _, err := w.store.Load(ctx, o.id); err == nil && task.State == workflow.Held {
			return o
		}
	}
	return nil
}

// paced is a bulk action's wait between two orders: none in the
// explorer's time, counted.
func (w *World) paced(context.Context, time.Duration) error {
	w.count("bulk paces")
	return nil
}

// checkStoredFound checks, while the orders run, that a search of customer
// c finds every order of c stored by then (read first), and none of
// another customer.
func (w *World) checkStoredFound(ctx context.Context, c string) {
	var must, may []string
	for _, o := range w.orders {
		if o.customer != c {
			continue
		}
		may = append(may, o.id)
		if _, _, err := w.store.Load(ctx, o.id); err == nil {
			must = append(must, o.id)
		}
	}
	found, err := searchIDs(ctx, w.searched(w.customerSearch(c)))
	if err != nil {
		w.note("search %s=%s: %v", searchField, c, err)
		return
	}
	w.countSearch()
	bad := foundWrong(c, must, may, found)
	w.mu.Lock()
	w.bulkBad = append(w.bulkBad, bad...)
	w.mu.Unlock()
}

// heldAction is a decision on held orders as Bulk takes it
// (operator.Operator.HeldAction's, on the explorer's queues): on each
// order held, the record that holds it (refused if several do).
func (w *World) heldAction(act outcome.HoldAction) operator.Action {
	return operator.Action{Name: string(act), Fits: func(t statestore.Task) string {
		if t.State != workflow.Held {
			return fmt.Sprintf("it is %s, not %s", t.State, workflow.Held)
		}
		return ""
	}, Do: func(ctx context.Context, id, by string, _ bool) (operator.Acted, error) {
		h := outcome.Holds{Store: w.store, Start: w.restarter(), Pickup: w.def.PickupTimeout}
		res, err := h.Decide(ctx, outcome.HoldDecision{OrderID: id, Action: act, By: by, Now: w.clock()})
		w.tooLarge(err)
		switch {
		case outcome.IsHeldError(err):
			return operator.Acted{Refused: err.Error()}, nil
		case err != nil:
			return operator.Acted{}, err
		}
		w.mu.Lock()
		w.decided[string(act)]++
		w.mu.Unlock()
		return operator.Acted{What: fmt.Sprintf("%s: it is %s", res.Step, res.State)}, nil
	}}
}

// cancelAction is a cancel as Bulk takes it (operator.Operator.CancelAction's,
// on the explorer's queues): on each order not ended, its slots passed to
// the undos of the accepted async calls it gives back, as Submission's
// cancel passes them.
func (w *World) cancelAction() operator.Action {
	return operator.Action{Name: "cancel", Fits: func(t statestore.Task) string {
		if t.State.Ended() {
			return fmt.Sprintf("it ended %s", t.State)
		}
		return ""
	}, Do: func(ctx context.Context, id, by string, _ bool) (operator.Acted, error) {
		start := w.restarter()
		k := outcome.Canceller{Store: w.store, Start: start,
			Slots: dispatch.Slots{Store: passCounted{w.lines, w.count}, AgentQueues: start.AgentQueues, Send: start.Send}}
		res, err := k.Cancel(ctx, statestore.CancelRequest{OrderID: id, By: by, Reason: "the explorer's bulk cancel",
			Pickup: w.def.PickupTimeout, Now: w.clock()})
		var nc *statestore.NotCancellableError
		switch {
		case errors.As(err, &nc):
			return operator.Acted{Refused: nc.Reason}, nil
		case err != nil:
			return operator.Acted{}, err
		}
		if o := w.byID[id]; o != nil {
			o.cancelled = true
		}
		return operator.Acted{What: string(res.State), Already: res.Verdict == workflow.CancelRepeated}, nil
	}}
}

// restarter sends the requests of records made ready to the explorer's
// queues, as an operator's go to the deployment's.
func (w *World) restarter() dispatch.Restarter {
	r := dispatch.Restarter{Records: w.store, AgentQueues: map[string]string{}, SchedulerQueueURL: w.url(w.topo.SchedulerQueue().Name),
		Send: w.sender}
	for _, a := range w.def.Agents() {
		r.AgentQueues[a] = w.url(w.topo.AgentRequests(a).Name)
	}
	return r
}
