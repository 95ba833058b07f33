package operator

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Search is a search of the orders, the same for sasctl list and the
// console's orders page: an order is kept if it matches every part given
// (an empty part keeps every order).
type Search struct {
	State     workflow.State // its state
	Prefix    string         // its orderId starts with it
	Workflow  string         // its workflow's name
	OlderThan time.Duration  // created more than this long ago
	NewerThan time.Duration  // created less than this long ago
	Version   string         // the workflow's version it runs
	// Step, Agent and Reason keep an order one of whose records it is at
	// (at work, or failed for good: statestore.Spot) has that step, that
	// agent and that reason (a class of statestore.ReasonClasses, or text).
	Step, Agent, Reason string
	// EndedAfter and EndedBefore keep the orders ended within them.
	EndedAfter, EndedBefore Moment
	// Field and Value keep the orders whose searchable field Field
	// (workflow.Definition.Search) is Value: found by the field's index,
	// reading only them.
	Field, Value string
	// Scan reads the state table whatever index could answer (ListTasks):
	// it finds, too, the orders that ended before the deployment had its
	// end index, which has no entry of theirs. Not with a Field.
	Scan bool
}

// The names of a search's parts in a URL query (the console's links);
// sasctl list's flags are --id-prefix, --workflow, --older-than and
// --newer-than.
const (
	QueryPrefix      = "prefix"
	QueryWorkflow    = "workflow"
	QueryOlderThan   = "older"
	QueryNewerThan   = "newer"
	QueryVersion     = "version"
	QueryStep        = "step"
	QueryAgent       = "agent"
	QueryReason      = "reason"
	QueryEndedAfter  = "ended-after"
	QueryEndedBefore = "ended-before"
	QueryField       = "field" // name=value
	QueryScan        = "scan"  // "1": Search.Scan
)

// SearchOf reads the search parts of a URL query (all but the state, which
// the caller reads as it lists it); a bad part is an error naming it.
func SearchOf(q url.Values) (Search, error) {
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	s := Search{Prefix: get(QueryPrefix), Workflow: get(QueryWorkflow), Version: get(QueryVersion),
		Step: get(QueryStep), Agent: get(QueryAgent), Reason: get(QueryReason)}
	for _, a := range []struct {
		key string
		to  *time.Duration
	}{{QueryOlderThan, &s.OlderThan}, {QueryNewerThan, &s.NewerThan}} {
		v := get(a.key)
		if v == "" {
			continue
		}
		d, err := ParseAge(v)
		if err != nil {
			return s, fmt.Errorf("%s: %w", a.key, err)
		}
		*a.to = d
	}
	if err := s.readMore(get); err != nil {
		return s, err
	}
	s.Scan = get(QueryScan) == "1"
	return s, s.Check()
}

// ParseAge reads an age: a Go duration ("10m", "1h30m") or a number of days
// ("2d").
func ParseAge(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil {
			v = strconv.Itoa(n*24) + "h"
		}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not an age: write one like 10m, 1h or 2d", v)
	}
	return d, nil
}

// Check refuses a search that can keep nothing: one whose orders must be
// both older than an age and newer than a smaller one, or end both after
// a time and before an earlier one.
func (s Search) Check() error {
	now := time.Now()
	if a, b := s.EndedAfter.Of(now), s.EndedBefore.Of(now); !a.IsZero() && !b.IsZero() && !a.Before(b) {
		return fmt.Errorf("no order ended after %s and before %s", s.EndedAfter, s.EndedBefore)
	}
	if s.OlderThan < 0 || s.NewerThan < 0 {
		return fmt.Errorf("an age is positive")
	}
	if s.Scan && s.Field != "" {
		return fmt.Errorf("a searchable field is found by its index only: a scan cannot search by %s", s.Field)
	}
	if s.OlderThan != 0 && s.NewerThan != 0 && s.NewerThan <= s.OlderThan {
		return fmt.Errorf("no order is older than %s and newer than %s", Duration(s.OlderThan), Duration(s.NewerThan))
	}
	return nil
}

// Empty reports whether the search keeps every order of its state.
func (s Search) Empty() bool {
	return s == Search{State: s.State}
}

// Query is the search's parts (not its state) in a URL query.
func (s Search) Query() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set(QueryPrefix, s.Prefix)
	set(QueryWorkflow, s.Workflow)
	if s.OlderThan > 0 {
		set(QueryOlderThan, Duration(s.OlderThan).String())
	}
	if s.NewerThan > 0 {
		set(QueryNewerThan, Duration(s.NewerThan).String())
	}
	s.writeMore(set)
	return q
}

// Filter is the search as of now: the ages become times of creation.
func (s Search) Filter(now time.Time) statestore.TaskFilter {
	f := statestore.TaskFilter{State: s.State, Prefix: s.Prefix, Workflow: s.Workflow, Version: s.Version,
		Step: s.Step, Agent: s.Agent, Reason: s.Reason, EndedAfter: s.EndedAfter.Of(now), EndedBefore: s.EndedBefore.Of(now)}
	if s.OlderThan > 0 {
		f.CreatedBefore = now.Add(-s.OlderThan)
	}
	if s.NewerThan > 0 {
		f.CreatedAfter = now.Add(-s.NewerThan)
	}
	return f
}

// ListTasks lists the orders the search keeps, up to limit, from the page
// token next ("" for the first page), and returns the next page's token
// ("" after the last). It reads an index when one narrows the search
// (route): a searchable field's (byField), the deadline index for the
// orders not ended, the end index for those ended other than Processed,
// both for a search by step, agent or reason that names no state. Any
// other scans the state table with the search as the scan's
// FilterExpression: only the orders kept come back, but DynamoDB bills
// every item read, so a narrow search may read much of the table to fill a
// page.
func (o *Operator) ListTasks(ctx context.Context, s Search, limit int, next string) ([]statestore.Task, string, error) {
	if err := s.Check(); err != nil {
		return nil, "", err
	}
	if s.Field != "" {
		return o.byField(ctx, s, o.filter(s), limit, next)
	}
	if pagers := o.route(s); pagers != nil {
		return readKept(ctx, o.filter(s), pagers, limit, next)
	}
	return o.Store.SearchTasks(ctx, s.Filter(time.Now()), limit, next)
}

// List is ListTasks as the views sasctl prints.
func (o *Operator) List(ctx context.Context, s Search, limit int, next string) ([]Order, string, error) {
	tasks, token, err := o.ListTasks(ctx, s, limit, next)
	if err != nil {
		return nil, "", err
	}
	out, err := o.Views(ctx, tasks)
	return out, token, err
}

// Views are tasks as the views sasctl and the console show, with the steps
// that wait for their agent's flow control.
func (o *Operator) Views(ctx context.Context, tasks []statestore.Task) ([]Order, error) {
	out := make([]Order, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, OrderOf(t))
	}
	return out, o.agentWaits(ctx, tasks, out, o.Now())
}

// agentWaits marks as waiting, in orders (the views of tasks), the steps
// ready for an agent that holds its calls now (paused, slowed by its
// service, its rate turns queued): one read of each agent's flow control a
// page.
func (o *Operator) agentWaits(ctx context.Context, tasks []statestore.Task, orders []Order, now time.Time) error {
	holds := map[string]string{}
	for i, t := range tasks {
		for _, agent := range slices.Sorted(maps.Keys(t.ReadyFor)) {
			why, ok := holds[agent]
			if !ok {
				var err error
				if why, err = o.agentHold(ctx, agent, now); err != nil {
					return err
				}
				holds[agent] = why
			}
			if why == "" {
				continue
			}
			if orders[i].FlowWaiting == 0 {
				orders[i].FlowWhy = why
			}
			orders[i].FlowWaiting += t.ReadyFor[agent]
		}
	}
	return nil
}

// InFlight lists the orders in flight (Pending or Compensating) the search
// keeps (its State aside), up to limit, from the page token next, from the
// deadline index (no scan), or, for a search by a searchable field, from
// that field's index. The index cannot filter: with a search, pages
// are read until limit orders are kept or the index ends, so a narrow
// search reads every order in flight (never the ended ones).
func (o *Operator) InFlight(ctx context.Context, s Search, limit int, next string) ([]statestore.Task, string, error) {
	if err := s.Check(); err != nil {
		return nil, "", err
	}
	if s.Empty() {
		return o.Store.InFlight(ctx, limit, next)
	}
	f := o.filter(s)
	f.State = ""
	if s.Field != "" {
		return o.byField(ctx, s, inFlightOnly(f), limit, next)
	}
	return readKept(ctx, f, []pager{o.Store.InFlight}, limit, next)
}

// inFlightOnly is f keeping the orders in flight only (not ended, as the
// deadline index lists them): Pending, Compensating or Held.
func inFlightOnly(f statestore.TaskFilter) statestore.TaskFilter {
	f.Unended = true
	return f
}
