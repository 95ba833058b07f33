package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/searchkey"
	"github.com/sas-go/sas/shared/statestore"
)

// Which orders a search matches is answered here, one door for sasctl list,
// the console's orders page and a bulk action's selector (Matching):
//   - by a searchable field (Field): the field's index items of its value,
//     then the state items of the orders found (reads in proportion to the
//     orders of that value);
//   - in flight only (InFlight): the deadline index, then the state items of
//     the orders in flight (in proportion to the work in flight);
//   - else (ListTasks): a scan of the state table with the search as its
//     FilterExpression (in proportion to the table).
// The parts the indexes do not hold (state, workflow, version, step,
// agent, reason, ages, end times) are tested on the state items read.

// ErrNotSearchable means a search names a field no workflow declares
// searchable (and no order was found by it).
var ErrNotSearchable = errors.New("not a searchable field")

// MatchingPage is how many orders Matching reads a page.
const MatchingPage = 100

// Matching pages the ids of the orders s keeps, from the page token next
// ("" for the first page; the token returned is "" after the last): a bulk
// action's selector. A search that names no state lists the orders of every
// state.
func (o *Operator) Matching(ctx context.Context, s Search, next string) (ids []string, token string, err error) {
	tasks, token, err := o.ListTasks(ctx, s, MatchingPage, next)
	if err != nil {
		return nil, "", err
	}
	for _, t := range tasks {
		ids = append(ids, t.OrderID)
	}
	return ids, token, nil
}

// byField lists up to limit orders s keeps, found by its searchable field's
// index, from the page token next, keeping those f keeps: a page reads the
// index items of the field's value and the state items they name, until
// limit orders are kept or the index ends.
func (o *Operator) byField(ctx context.Context, s Search, f statestore.TaskFilter, limit int, next string) ([]statestore.Task, string, error) {
	names, err := o.fieldNames(ctx, s.Value)
	if err != nil {
		return nil, "", err
	}
	limit = max(limit, 1)
	var out []statestore.Task
	for {
		ids, token, err := o.Store.WithField(ctx, s.Field, names, limit-len(out), next)
		if err != nil {
			return nil, "", err
		}
		tasks, err := o.Store.Tasks(ctx, ids)
		if err != nil {
			return nil, "", err
		}
		for _, id := range ids {
			if t, ok := tasks[id]; ok && f.Keeps(t) {
				out = append(out, t)
			}
		}
		if token == "" || len(out) >= limit {
			return out, token, o.declared(s.Field, len(out) == 0 && token == "")
		}
		next = token
	}
}

// declared says, for a search by field that found nothing (none), when no
// workflow of the deployment's (when known: Operator.Workflows) declares
// field searchable: a mistyped name is told so, not answered with an
// empty list. A field only an earlier version declared finds its orders
// all the same (it is refused only when it finds none).
func (o *Operator) declared(field string, none bool) error {
	if !none || o.Workflows.IsZero() {
		return nil
	}
	var all []string
	for _, d := range o.Workflows.Definitions() {
		if slices.Contains(d.Search, field) {
			return nil
		}
		all = append(all, d.Search...)
	}
	slices.Sort(all)
	known := "none declares one"
	if all = slices.Compact(all); len(all) > 0 {
		known = "searchable: " + strings.Join(all, ", ")
	}
	return fmt.Errorf("%w: no workflow declares %q in its search: (%s)", ErrNotSearchable, field, known)
}

// fieldNames are the names a searchable value may be kept under: itself,
// and its keyed hash under each search secret the deployment keeps (a
// sealed deployment's: searchkey.Lookup).
func (o *Operator) fieldNames(ctx context.Context, value string) ([]string, error) {
	if o.db == nil {
		return searchkey.Lookup(ctx, nil, "", nil, value)
	}
	return searchkey.Lookup(ctx, o.db, o.Topology.StateTable(), o.kept.Sealer(), value)
}

// filter is s as of now, as byField and InFlight test the items they read.
func (o *Operator) filter(s Search) statestore.TaskFilter { return s.Filter(time.Now()) }
