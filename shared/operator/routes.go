package operator

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// pager reads a page of up to limit orders from the page token next, and
// the next page's token ("" after the last).
type pager func(ctx context.Context, limit int, next string) ([]statestore.Task, string, error)

// unended are the states of the orders the deadline index holds.
var unended = []workflow.State{workflow.Pending, workflow.Compensating, workflow.Held}

// route is where a search without a field reads: the deadline index for
// an order not ended (by its state), the end index for one ended other
// than Processed, both for a search by where an order is (step, agent,
// reason) that names no state (a Processed order is at no record); nil:
// a scan of the table (and for a search that asks for one: Search.Scan).
func (o *Operator) route(s Search) []pager {
	switch {
	case s.Scan:
		return nil
	case slices.Contains(unended, s.State):
		return []pager{o.Store.InFlight}
	case slices.Contains(statestore.IndexedEnds, s.State):
		return []pager{o.endedIn(s, s.State)}
	case s.State == "" && (s.Step != "" || s.Agent != "" || s.Reason != ""):
		out := []pager{o.Store.InFlight}
		for _, st := range statestore.IndexedEnds {
			out = append(out, o.endedIn(s, st))
		}
		return out
	}
	return nil
}

// endedIn pages the orders ended in state within s's end times.
func (o *Operator) endedIn(s Search, state workflow.State) pager {
	return func(ctx context.Context, limit int, next string) ([]statestore.Task, string, error) {
		f := o.filter(s)
		return o.Store.Ended(ctx, state, f.EndedAfter, f.EndedBefore, limit, next)
	}
}

// readKept pages the orders f keeps of pagers in turn, up to limit, from the
// page token next: an index cannot filter, so pages are read until limit
// orders are kept or the last pager ends.
func readKept(ctx context.Context, f statestore.TaskFilter, pagers []pager, limit int, next string) ([]statestore.Task, string, error) {
	pos, err := decodeRouteToken(next, len(pagers))
	if err != nil {
		return nil, "", err
	}
	limit = max(limit, 1)
	var out []statestore.Task
	for pos.Pager < len(pagers) && len(out) < limit {
		page, token, err := pagers[pos.Pager](ctx, limit-len(out), pos.Token)
		if err != nil {
			return nil, "", err
		}
		for _, t := range page {
			if f.Keeps(t) {
				out = append(out, t)
			}
		}
		pos.Token = token
		if token == "" {
			pos = routePos{Pager: pos.Pager + 1}
		}
	}
	if pos.Pager >= len(pagers) {
		return out, "", nil
	}
	b, _ := json.Marshal(pos)
	return out, base64.RawURLEncoding.EncodeToString(b), nil
}

// routePos is a place in pagers read in turn: which, and its own token.
type routePos struct {
	Pager int    `json:"p"`
	Token string `json:"t,omitempty"`
}

func decodeRouteToken(token string, pagers int) (routePos, error) {
	var p routePos
	if token == "" {
		return p, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil || p.Pager < 0 || p.Pager >= pagers {
		return p, fmt.Errorf("%w %q: not one this search returned", statestore.ErrBadPageToken, token)
	}
	return p, nil
}
