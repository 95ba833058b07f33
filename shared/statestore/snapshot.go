package statestore

import (
	"context"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Snapshot is an order's state item as one read (or one write's answer)
// gave it: what the rules decide on, and what a write decided on it must
// find still so.
type Snapshot struct {
	it stateItem
}

// Read reads an order's state item, consistently (ErrNotFound if there is
// none).
func (s *Store) Read(ctx context.Context, orderID string) (Snapshot, error) {
	it, err := s.item(ctx, orderID)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{it: it}, nil
}

// OrderID is the order's id.
func (s Snapshot) OrderID() string { return s.it.OrderID }

// Order is the order as the rules read it.
func (s Snapshot) Order() workflow.Order { return s.it.order() }

// Task is the order's task record.
func (s Snapshot) Task() Task { return s.it.task() }

// Retention is how long the order is kept once ended, as it was submitted
// (Forever; 0: its item predates it, the store's).
func (s Snapshot) Retention() time.Duration { return s.it.ownRetention() }

// Retention is the retention of st's order as it was read (Snapshot's; 0:
// none read).
func (st Step) Retention() time.Duration {
	if st.Read == nil {
		return 0
	}
	return st.Read.Retention()
}

// Steps are the order's records.
func (s Snapshot) Steps() []Step { return s.it.steps() }

// Step is record r, if the order has it.
func (s Snapshot) Step(r workflow.Ref) (Step, bool) {
	if _, ok := s.it.Recs[sortKey(r)]; !ok {
		return Step{}, false
	}
	return s.it.step(sortKey(r), s.it.view()), true
}

// Version is the item's version as read.
func (s Snapshot) Version() int { return s.it.Version }

// Runs is the version of its workflow the order runs ("" for an order
// stored before versions were kept).
func (s Snapshot) Runs() string { return s.it.WfVersion }

// Trace is the order's trace context (Task.Trace).
func (s Snapshot) Trace() string { return s.it.Trace }

// Events are the round's events received, by name: their eventId.
func (s Snapshot) Events() map[string]string { return s.it.Events }

// Pickup is the order's workflow's pickup timeout, or def for an order
// stored before it was kept.
func (s Snapshot) Pickup(def time.Duration) time.Duration { return s.it.pickup(def) }

// undoneSince is when the order turned to be undone, as far as the item
// tells (its cancel, or its compensation's deadline less the order's
// deadline); zero while it runs forward.
func (s Snapshot) undoneSince() time.Time {
	switch {
	case s.it.State == string(workflow.Pending):
		return time.Time{}
	case s.it.CxAt != 0:
		return fromMs(s.it.CxAt)
	case s.it.DeadlineMs > 0 && s.it.DeadlineAt > s.it.DeadlineMs:
		return fromMs(s.it.DeadlineAt - s.it.DeadlineMs)
	}
	return fromMs(s.it.UpdatedAt)
}
