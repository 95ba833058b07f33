package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/sas-go/sas/shared/operator"
)

// Search is a search of the orders (Find, and a Bulk's selection): by
// state, workflow and version, the step, agent and reason an order is at
// or failed with, its age and end time, and a field its workflow declares
// searchable (Field, Value: read from that field's index).
type Search = operator.Search

// BulkReport is what a bulk action did, or, dry, would do: the orders
// listed, done, done already, refused and changed since listed (with their
// reasons counted in Why), and left.
type BulkReport = operator.BulkReport

// BulkResult is a bulk action's outcome on one order.
type BulkResult = operator.BulkResult

// Find lists the orders s keeps, up to limit, and the token of the next
// page ("" at the end), as sasctl list does: by a searchable field, it reads
// that field's index and the orders it names; else it scans the state table
// with the search as the scan's filter (DynamoDB bills every item read, so
// a narrow search may read much of the table to fill a page).
func (c *Client) Find(ctx context.Context, s Search, limit int, next string) ([]operator.Order, string, error) {
	return c.op.List(ctx, s, max(limit, 1), next)
}

// Bulk says which orders a bulk action (RetryMany, SkipMany, UndoMany,
// CancelMany, ResubmitMany) acts on, and how.
type Bulk struct {
	// IDs are the orders to act on; or else Search finds them (its State
	// "": the action's own, Held for a retry, skip or undo, Failed for a
	// resubmit, every state for a cancel). Name one of the two: a Search
	// that says nothing (not even a State) is refused, not taken as every
	// order.
	IDs    []string
	Search Search
	// By is who acts: each order's history names it with the bulk action
	// (operator.BulkBy). Required.
	By string
	// DryRun writes nothing: the report says which orders the action would
	// act on (BulkReport.Would) and why not for the rest.
	DryRun bool
	// FromDryRun says IDs are a dry run's Would: an order the action does
	// not take now changed since that dry run (BulkChanged), not refused.
	FromDryRun bool
	// Rate is at most how many orders a second are acted on: 0 is
	// operator.BulkRate (20), a negative rate unpaced.
	Rate float64
	// Limit is at most how many orders are acted on (0: all).
	Limit int
	// Each, if set, is told each order's outcome in turn (progress).
	Each func(BulkResult)
}

// ErrNoSelection means a Bulk names no orders (no IDs, an empty Search), or
// both IDs and a Search: nothing was read or written.
var ErrNoSelection = errors.New("name the orders to act on: IDs or a Search, not both")

// RetryMany runs again, on each Held order b selects, the step whose failure
// holds it (step: its name, "" if one holds it), as Retry does.
func (c *Client) RetryMany(ctx context.Context, b Bulk, step string) (BulkReport, error) {
	return c.bulk(ctx, b, operator.ActionSpec{Name: "retry", Step: step})
}

// SkipMany takes as done, on each Held order b selects, the step whose
// failure holds it (step: its name, "" if one holds it), with result
// (encoded as JSON; nil: none), as Skip does.
func (c *Client) SkipMany(ctx context.Context, b Bulk, step string, result any) (BulkReport, error) {
	spec := operator.ActionSpec{Name: "skip", Step: step}
	if !none(result) {
		r, err := encode(result)
		if err != nil {
			return BulkReport{}, &HeldError{Reason: "its result: " + err.Error()}
		}
		spec.Result = r
	}
	return c.bulk(ctx, b, spec)
}

// UndoMany undoes each Held order b selects, as Undo does.
func (c *Client) UndoMany(ctx context.Context, b Bulk) (BulkReport, error) {
	return c.bulk(ctx, b, operator.ActionSpec{Name: "undo"})
}

// CancelMany cancels each order b selects, for reason, as Cancel does; an
// order ended, or past a step that cannot be undone, is refused with the
// reason.
func (c *Client) CancelMany(ctx context.Context, b Bulk, reason string) (BulkReport, error) {
	return c.bulk(ctx, b, operator.ActionSpec{Name: "cancel", Reason: reason})
}

// ResubmitMany puts each Failed or CompensationFailed order b selects back
// to work (step: the record in Error, as a check; "": any), as sasctl
// resubmit does.
func (c *Client) ResubmitMany(ctx context.Context, b Bulk, step string) (BulkReport, error) {
	return c.bulk(ctx, b, operator.ActionSpec{Name: "resubmit", Step: step})
}

// bulk runs the action spec names on the orders b selects, with the
// operator's Bulk: listed, judged, then acted on one at a time, paced. If
// ctx ends, it stops after the order at hand, with the report so far
// (Stopped): the same call again goes on where it stopped.
func (c *Client) bulk(ctx context.Context, b Bulk, spec operator.ActionSpec) (BulkReport, error) {
	sel, err := c.selection(b, spec)
	if err != nil {
		return BulkReport{}, err
	}
	if b.By == "" {
		return BulkReport{}, errors.New("client: a bulk action needs By: who acts, named in each order's history")
	}
	act, err := c.op.ActionOf(spec)
	if err != nil {
		return BulkReport{}, err
	}
	rate := b.Rate
	switch {
	case rate == 0:
		rate = operator.BulkRate
	case rate < 0:
		rate = 0 // the operator's unpaced
	}
	return c.op.Bulk(ctx, sel, act, operator.BulkOptions{DryRun: b.DryRun, FromDryRun: b.FromDryRun, Rate: rate,
		Limit: max(b.Limit, 0), By: b.By}, b.Each)
}

// selection is the orders b selects: its IDs, or its Search (in the
// action's own state unless it names one).
func (c *Client) selection(b Bulk, spec operator.ActionSpec) (operator.Selector, error) {
	searched := b.Search != Search{}
	switch {
	case len(b.IDs) > 0 && searched, len(b.IDs) == 0 && !searched:
		return nil, ErrNoSelection
	case len(b.IDs) > 0:
		return operator.IDs(b.IDs...), nil
	case b.FromDryRun:
		return nil, errors.New("client: FromDryRun takes IDs: the dry run's Would, not a Search")
	}
	s := b.Search
	if s.State == "" {
		s.State = spec.DefaultState()
	}
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c.op.Searched(s), nil
}
