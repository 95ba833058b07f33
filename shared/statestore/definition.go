package statestore

import (
	"context"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Definition reads back the workflow an order runs from its state item:
// each record holds its action (name, agent, service action, timeout,
// threshold, backoff), the item the workflow's name, version, pickup timeout
// and deadline. An order keeps the definition it started with, whatever the
// deployment runs now: the Scheduler reads it for an order whose version the
// deployment no longer has. An order stored before the pickup timeout was
// kept has none (PickupTimeout 0).
func (s *Store) Definition(ctx context.Context, orderID string) (workflow.Definition, error) {
	it, err := s.item(ctx, orderID)
	if err != nil {
		return workflow.Definition{}, err
	}
	return it.definition(), nil
}

func (it stateItem) definition() workflow.Definition {
	d := workflow.Definition{Name: it.Workflow, Version: it.WfVersion,
		PickupTimeout: time.Duration(it.PickupMs) * time.Millisecond, Deadline: time.Duration(it.DeadlineMs) * time.Millisecond}
	for _, st := range it.steps() {
		a := st.Definition()
		if !st.Undo {
			d.Steps = append(d.Steps, workflow.Step{Action: a})
			continue
		}
		if st.Index < len(d.Steps) { // steps() lists every step before any undo action
			d.Steps[st.Index].Undo = &a
		}
	}
	return d
}

// pickup is the order's workflow's pickup timeout, or def for an order
// stored before it was kept.
func (it stateItem) pickup(def time.Duration) time.Duration {
	if it.PickupMs > 0 {
		return time.Duration(it.PickupMs) * time.Millisecond
	}
	return def
}
