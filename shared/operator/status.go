package operator

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/kept"
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
	// Needs, for a workflow whose steps run at once, are the steps each step
	// waits for, by name (a step that needs nothing starts with the order).
	Needs map[string][]string `json:"needs,omitempty"`
	// UndoNext are, for each undo action (by name), the undo actions the
	// engine runs right after it, whichever step's refusal started the
	// undoing (workflow.Definition.UndoNext): the console draws its arrows.
	UndoNext map[string][]string `json:"undoNext,omitempty"`
	// Kept are the steps an order moved to another version keeps from the
	// version that ran them (by name: that version), which the version it
	// moved to has not: done, never run again, there for their undo alone
	// (workflow.Step.Kept).
	Kept map[string]string `json:"kept,omitempty"`
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
	steps := map[workflow.Ref]workflow.State{} // a step's record (an item's) by its ref without undo
	for _, r := range recs {
		if !r.Undo {
			steps[r.Ref] = r.State
		}
	}
	s := Status{Order: OrderOf(task), Records: make([]Record, 0, len(recs)), Timeline: []Event{}}
	d, err := o.Store.Definition(ctx, orderID)
	if err != nil {
		return Status{}, err
	}
	s.Needs = needsOf(d)
	for _, st := range d.Steps {
		if st.Kept != "" {
			if s.Kept == nil {
				s.Kept = map[string]string{}
			}
			s.Kept[st.Name] = st.Kept
		}
	}
	if next := d.UndoNext(); len(next) > 0 {
		s.UndoNext = next
	}
	for _, r := range recs {
		rec := recordOf(r, task.State, steps)
		rec.Result = results[r.Ref]
		s.Records = append(s.Records, rec)
		for _, e := range r.History() {
			s.Timeline = append(s.Timeline, Event{At: utc(e.At), Record: rec.Name, What: e.What})
		}
		if rec.Waiting != nil {
			s.Timeline = append(s.Timeline, waitEvent(rec.Name, *rec.Waiting))
		}
	}
	if err := o.flowWaits(ctx, s.Records, o.Now()); err != nil {
		return Status{}, err
	}
	slices.SortStableFunc(s.Timeline, func(a, b Event) int { return a.At.Compare(b.At) })
	return s, nil
}

// needsOf are what each step of workflow d needs, by name; none for a line
// of steps (each needs the one before it).
func needsOf(d workflow.Definition) map[string][]string {
	if d.Linear() {
		return nil
	}
	out := map[string][]string{}
	for i, st := range d.Steps {
		if st.Kept != "" {
			continue // never runs: Status.Kept
		}
		out[st.Name] = []string{}
		for _, j := range d.Needs(i) {
			out[st.Name] = append(out[st.Name], d.Steps[j].Name)
		}
	}
	return out
}

// runOrder sorts steps first, by index (and item), then undo actions in the
// order they run in a line (reverse).
func runOrder(a, b statestore.Step) int {
	switch {
	case a.Undo != b.Undo && a.Undo:
		return 1
	case a.Undo != b.Undo:
		return -1
	case a.Index != b.Index && a.Undo:
		return b.Index - a.Index
	case a.Index != b.Index:
		return a.Index - b.Index
	default:
		return a.Item - b.Item
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
		if res, ok := stored[r.Ref]; ok && r.HasResult && json.Valid(res.JSON) {
			out[r.Ref] = o.open(ctx, task.OrderID, res.JSON)
		}
	}
	return out, nil
}

// open is a result as the operator may read it (raw, JSON): as it is, or,
// sealed (sealData), opened with the operator's own kms:Decrypt on the key,
// or, without it, its shape: that it is sealed, and why it stays so.
func (o *Operator) open(ctx context.Context, orderID string, raw json.RawMessage) json.RawMessage {
	plain, err := o.kept.Unseal(ctx, orderID, kept.Stored(raw))
	if err == nil && json.Valid(plain) {
		return plain
	}
	why := "not JSON once opened"
	if err != nil {
		why = err.Error()
	}
	b, _ := json.Marshal(map[string]string{kept.SealedMember: "sealed: opening it takes kms:Decrypt on the deployment's key (" + why + ")"})
	return b
}
