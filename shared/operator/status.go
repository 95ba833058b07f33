package operator

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Status is an order, its records in the order they run (steps, then undo
// actions in the order they run: the latest step's first), and its
// timeline.
type Status struct {
	Order    Order    `json:"order"`
	Records  []Record `json:"records"`
	Timeline []Event  `json:"timeline"`
}

// Event is one line of an order's timeline.
type Event struct {
	At     time.Time `json:"at"`
	Record string    `json:"record"` // the step or undo action
	What   string    `json:"what"`
}

// Status reads an order (statestore.ErrNotFound if there is none), and its
// records' results if any has one.
func (o *Operator) Status(ctx context.Context, orderID string) (Status, error) {
	task, recs, err := o.Store.Load(ctx, orderID)
	if err != nil {
		return Status{}, err
	}
	slices.SortStableFunc(recs, runOrder)
	results, err := o.results(ctx, task, recs)
	if err != nil {
		return Status{}, err
	}
	steps := map[int]workflow.State{}
	for _, r := range recs {
		if !r.Undo {
			steps[r.Index] = r.State
		}
	}
	s := Status{Order: OrderOf(task), Records: make([]Record, 0, len(recs)), Timeline: []Event{}}
	for _, r := range recs {
		rec := recordOf(r, task.State, steps)
		rec.Result = results[r.Ref()]
		s.Records = append(s.Records, rec)
		for _, e := range r.History() {
			s.Timeline = append(s.Timeline, Event{At: utc(e.At), Record: r.Name, What: e.What})
		}
		if rec.Waiting != nil {
			s.Timeline = append(s.Timeline, waitEvent(r.Name, *rec.Waiting))
		}
	}
	slices.SortStableFunc(s.Timeline, func(a, b Event) int { return a.At.Compare(b.At) })
	return s, nil
}

// runOrder sorts steps first, by index, then undo actions in the order they
// run (reverse).
func runOrder(a, b statestore.Step) int {
	switch {
	case a.Undo != b.Undo && a.Undo:
		return 1
	case a.Undo != b.Undo:
		return -1
	case a.Undo:
		return b.Index - a.Index
	default:
		return a.Index - b.Index
	}
}

// results are the results of the order's records that have one (their
// round's), by record: one Query, only if a record has one.
func (o *Operator) results(ctx context.Context, task statestore.Task, recs []statestore.Step) (map[workflow.Ref]json.RawMessage, error) {
	out := map[workflow.Ref]json.RawMessage{}
	if !slices.ContainsFunc(recs, func(r statestore.Step) bool { return r.HasResult }) {
		return out, nil
	}
	stored, err := o.Store.Results(ctx, task.OrderID, task.Round)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if res, ok := stored[r.Ref()]; ok && r.HasResult && json.Valid(res.JSON) {
			out[r.Ref()] = res.JSON
		}
	}
	return out, nil
}
