package operator

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/statestore"
)

// Selector pages the ids of the orders a bulk action is asked to act on:
// from the page token next ("" for the first page) it returns a page of
// ids and the next page's token ("" after the last). IDs names them, and
// Operator.Searched finds them with a Search; any query that pages ids
// fits.
type Selector func(ctx context.Context, next string) (ids []string, token string, err error)

// IDs selects the orders named, in one page.
func IDs(ids ...string) Selector {
	return func(context.Context, string) ([]string, string, error) { return ids, "", nil }
}

// Searched selects the orders the search keeps (Matching: by its field's
// index, if it names one).
func (o *Operator) Searched(s Search) Selector {
	return func(ctx context.Context, next string) ([]string, string, error) {
		ids, token, err := o.Matching(ctx, s, next)
		if err != nil {
			return nil, "", fmt.Errorf("list the orders to act on: %w", err)
		}
		return ids, token, nil
	}
}

// InFlightSearched selects the orders in flight (not ended) the search
// keeps, its State aside (InFlight: from the deadline index, or from its
// field's index if it names one), as the console's In flight list shows
// them.
func (o *Operator) InFlightSearched(s Search) Selector {
	return func(ctx context.Context, next string) ([]string, string, error) {
		tasks, token, err := o.InFlight(ctx, s, MatchingPage, next)
		if err != nil {
			return nil, "", fmt.Errorf("list the orders in flight to act on: %w", err)
		}
		ids := make([]string, 0, len(tasks))
		for _, t := range tasks {
			ids = append(ids, t.OrderID)
		}
		return ids, token, nil
	}
}

// Action is one operator action on one order, as Bulk runs it on many.
type Action struct {
	Name string // retry, skip, undo, cancel, resubmit, migrate
	// Fits says why an order, as read, is not one the action acts on ("":
	// it is). Bulk judges every order listed by it, one batch read a
	// hundred (a dry run writes nothing more), and again an order the
	// action refused at its turn, to tell one changed since listed. nil:
	// each order is judged by Do alone (dry, for a dry run).
	Fits func(t statestore.Task) string
	// Do acts on one order, for by; dry (only when Fits is nil): says what
	// it would do, writing nothing. An order the action cannot take is no
	// error: its Acted says why.
	Do func(ctx context.Context, orderID, by string, dry bool) (Acted, error)
}

// Acted is what an action did on one order.
type Acted struct {
	What    string // what it did, or would do, in words
	Already bool   // it was done already: a run resumed finds it so
	Refused string // why it did not act, judged at its turn
	Detail  any    // the action's own view of it (Migrated, outcome.HoldDecided…)
}

// The outcomes of a bulk action on an order.
const (
	BulkDone    = "done"    // acted
	BulkWould   = "would"   // a dry run: it would act
	BulkAlready = "already" // it was done already (a run resumed)
	BulkRefused = "refused" // the action does not take it: Why says why
	BulkChanged = "changed" // it fitted when listed, not at its turn: Why says what it is now
)

// BulkResult is a bulk action's outcome on one order.
type BulkResult struct {
	OrderID string `json:"orderId"`
	Outcome string `json:"outcome"` // done, would, already, refused, changed
	What    string `json:"what,omitempty"`
	Why     string `json:"why,omitempty"`
	Detail  any    `json:"-"`
}

// BulkOptions are how Bulk runs an action.
type BulkOptions struct {
	DryRun bool    // write nothing: say what it would do, and why not for the rest
	Rate   float64 // at most this many orders acted on a second (0: unpaced)
	Limit  int     // act on at most this many (0: all)
	// FromDryRun says the orders selected are those a dry run said the
	// action would act on (its report's Would): one it does not take now
	// changed since that dry run, and is reported so (BulkChanged), not
	// refused.
	FromDryRun bool
	// By is who acts (sasctl (alice)); each order's history names it with
	// the bulk action (BulkBy).
	By string
	// Sleep waits between two orders acted on (nil: a timer; a test counts).
	Sleep func(ctx context.Context, d time.Duration) error
	// Listed, if set, is told how many orders were listed, and the name
	// their histories keep, before the first is acted on (progress).
	Listed func(n int, by string)
}

// BulkReport is what a bulk action did, or, dry, would do.
type BulkReport struct {
	Action  string `json:"action"`
	By      string `json:"by"` // as each order's history names it
	DryRun  bool   `json:"dryRun"`
	Listed  int    `json:"listed"` // orders the selection gave
	Done    int    `json:"done"`   // acted on, or, dry, that it would act on
	Already int    `json:"already"`
	Refused int    `json:"refused"`
	Changed int    `json:"changed"` // fitted when listed, not at their turn
	// Left are the orders not reached: it was stopped, or met its limit.
	Left    int  `json:"left"`
	Stopped bool `json:"stopped,omitempty"` // its context ended: run it again to go on
	// Why counts the refusals and changes by their first reason.
	Why    map[string]int `json:"why,omitempty"`
	Orders []BulkResult   `json:"orders"`
}

// BulkBy is how each order's history names a bulk action: who, the action,
// when it started (to the minute, UTC) and how many orders it listed.
func BulkBy(by, action string, at time.Time, n int) string {
	orders := "orders"
	if n == 1 {
		orders = "order"
	}
	return fmt.Sprintf("%s %s (bulk %s, %s %s)", by, action, at.UTC().Format("2006-01-02T15:04Z"), thousands(n), orders)
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// pace is the wait between two orders acted on at rate a second.
func pace(rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(float64(time.Second) / rate)
}

// sleeper is opts' Sleep, or a timer.
func (opts BulkOptions) sleeper() func(ctx context.Context, d time.Duration) error {
	if opts.Sleep != nil {
		return opts.Sleep
	}
	return resilience.Sleep
}

// Check says how the report does not add up (nil: it does): done, done
// already, refused, changed since listed and left make the orders listed;
// each order reached is reported once, and no other; a reason is counted
// for each refusal and each change. The chaos run and the explorer hold
// every bulk action's report to it.
func (r BulkReport) Check() []string {
	var bad []string
	if n := r.Done + r.Already + r.Refused + r.Changed + r.Left; n != r.Listed {
		bad = append(bad, fmt.Sprintf("%d done, %d done already, %d refused, %d changed and %d left make %d, not the %d listed",
			r.Done, r.Already, r.Refused, r.Changed, r.Left, n, r.Listed))
	}
	if len(r.Orders) != r.Listed-r.Left {
		bad = append(bad, fmt.Sprintf("%d orders reported, %d listed and %d left", len(r.Orders), r.Listed, r.Left))
	}
	why := 0
	for _, n := range r.Why {
		why += n
	}
	if why != r.Refused+r.Changed {
		bad = append(bad, fmt.Sprintf("%d reasons counted for %d refused and %d changed", why, r.Refused, r.Changed))
	}
	seen := map[string]bool{}
	for _, o := range r.Orders {
		if seen[o.OrderID] {
			bad = append(bad, fmt.Sprintf("order %s acted on twice", o.OrderID))
		}
		seen[o.OrderID] = true
	}
	return bad
}
