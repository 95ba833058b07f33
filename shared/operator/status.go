package operator

import (
	"context"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/statestore"
)

// Status is an order's task, its records in the order they run, and its
// timeline.
type Status struct {
	Task     statestore.Task   `json:"task"`
	Records  []statestore.Step `json:"records"`
	Timeline []Event           `json:"timeline"`
}

// Event is one line of an order's timeline.
type Event struct {
	At     time.Time `json:"at"`
	Record string    `json:"record"` // the step or undo action
	What   string    `json:"what"`
}

// Status reads an order (statestore.ErrNotFound if there is none).
func (o *Operator) Status(ctx context.Context, orderID string) (Status, error) {
	task, recs, err := o.Store.Load(ctx, orderID)
	if err != nil {
		return Status{}, err
	}
	// Steps first, in order; then undo actions in the order they run (reverse).
	slices.SortStableFunc(recs, func(a, b statestore.Step) int {
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
	})
	s := Status{Task: task, Records: recs}
	for _, r := range recs {
		for _, e := range r.History() {
			s.Timeline = append(s.Timeline, Event{At: e.At, Record: r.Name, What: e.What})
		}
	}
	slices.SortStableFunc(s.Timeline, func(a, b Event) int { return a.At.Compare(b.At) })
	return s, nil
}
