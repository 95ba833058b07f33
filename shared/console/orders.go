package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// inFlightTab is the list read from the deadline index.
const inFlightTab = "inflight"

// scannedStates are the lists read with a scan, on demand: the orders held
// for their operator, and the ended ones.
var scannedStates = []workflow.State{workflow.Held, workflow.Processed, workflow.Failed, workflow.CompensationFailed, workflow.Cancelled}

// tab is one list of the orders page.
type tab struct {
	Key, Label string
	Count      int
	Counted    bool // Count is known (the ended states' once a scan counted them)
	Active     bool
}

// listView is the orders page.
type listView struct {
	Tabs      []tab
	State     string // the tab shown
	InFlight  bool
	Orders    []operator.Order
	Page      string // this page's token ("" for the first)
	Next      string // the next page's link, if any
	CountedAt time.Time
	PageSize  int
	Shards    int
	Every     time.Duration // how old the ended states' counts may get
	// Search is the search the list shows (its state aside: the tab), from
	// the URL query, so that a link keeps it.
	Search operator.Search
	// Form is the search as typed, for the form (an age as given).
	Form url.Values
}

// Searching reports whether the list is searched, not whole.
func (v listView) Searching() bool { return !v.Search.Empty() }

// Link is the first page of the list in state, with the same search.
func (v listView) Link(state string) string {
	q := v.Search.Query()
	q.Set("state", state)
	return "/?" + q.Encode()
}

// States are the lists the search form offers: the tabs' keys and labels.
func (v listView) States() []tab {
	out := []tab{{Key: inFlightTab, Label: "In flight"}}
	for _, st := range scannedStates {
		out = append(out, tab{Key: string(st), Label: string(st)})
	}
	for i := range out {
		out[i].Active = out[i].Key == v.State
	}
	return out
}

// orders serves the orders page: its tabs with their counts, the search form,
// and a page of one list, searched if the query says so (prefix, workflow,
// older, newer: operator.SearchOf). The in-flight list and count come from the deadline index at
// every request; the ended states' counts from a scan, at most once every
// CensusEvery and never for a live refresh (?partial=1).
func (s *Server) orders(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := listView{State: q.Get("state"), Page: q.Get("next"), PageSize: s.cfg.PageSize,
		Shards: s.op.Topology.DeadlineShards, Every: s.cfg.CensusEvery}
	if v.State == "" {
		v.State = inFlightTab
	}
	if !knownTab(v.State) {
		s.fail(w, r, http.StatusBadRequest, "Bad request", fmt.Sprintf("Unknown list %q: the lists are %s.", v.State, tabNames()))
		return
	}
	v.InFlight = v.State == inFlightTab
	search, err := operator.SearchOf(q)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "Bad search", fmt.Sprintf("The search is not one the console can run: %s.", err))
		return
	}
	v.Search, v.Form = search, q
	if status, heading, detail := s.list(r.Context(), &v); status != 0 {
		s.fail(w, r, status, heading, detail)
		return
	}
	if err := s.count(r.Context(), &v, q.Get("partial") != "1"); err != nil {
		s.failErr(w, r, "count orders", err)
		return
	}
	s.render(w, r, http.StatusOK, "orders", view{Title: "Orders", Nav: "orders", Data: v})
}

// list reads the page of orders v names; on an error it returns the page to
// show instead.
func (s *Server) list(ctx context.Context, v *listView) (status int, heading, detail string) {
	var next string
	var tasks []statestore.Task
	var err error
	if v.InFlight {
		tasks, next, err = s.op.InFlight(ctx, v.Search, s.cfg.PageSize, v.Page)
	} else {
		search := v.Search
		search.State = workflow.State(v.State)
		tasks, next, err = s.op.ListTasks(ctx, search, s.cfg.PageSize, v.Page)
	}
	if err == nil {
		v.Orders, err = s.op.Views(ctx, tasks)
	}
	switch {
	case errors.Is(err, statestore.ErrBadPageToken):
		return http.StatusBadRequest, "Bad page token",
			fmt.Sprintf("%s. Page tokens come from this console's Next links; start again from the first page.", err)
	case err != nil:
		return http.StatusBadGateway, "The deployment did not answer", "list orders: " + err.Error()
	}
	if next != "" {
		q := v.Search.Query()
		q.Set("state", v.State)
		q.Set("next", next)
		v.Next = "/?" + q.Encode()
	}
	return 0, "", ""
}

// count fills the tabs: the in-flight count from the index, the ended
// states' from the census (scanned again only if scan and it is old).
func (s *Server) count(ctx context.Context, v *listView, scan bool) error {
	inFlight, err := s.op.Store.CountInFlight(ctx)
	if err != nil {
		return err
	}
	census, at, ok := s.census.peek()
	if scan {
		if census, at, err = s.census.get(ctx, s.op.Store); err != nil {
			return err
		}
		ok = true
	}
	v.CountedAt = at
	v.Tabs = []tab{{Key: inFlightTab, Label: "In flight", Count: inFlight, Counted: true}}
	for _, st := range scannedStates {
		v.Tabs = append(v.Tabs, tab{Key: string(st), Label: string(st), Count: census.ByState[st], Counted: ok})
	}
	for i := range v.Tabs {
		v.Tabs[i].Active = v.Tabs[i].Key == v.State
	}
	return nil
}

func knownTab(key string) bool {
	for _, t := range scannedStates {
		if string(t) == key {
			return true
		}
	}
	return key == inFlightTab
}

func tabNames() string {
	names := []string{inFlightTab}
	for _, t := range scannedStates {
		names = append(names, string(t))
	}
	return strings.Join(names, ", ")
}

// censusCache keeps the counts by state (a scan of the state table) for a
// while, so that opening pages in a row scans at most once in that while.
type censusCache struct {
	mu    sync.Mutex
	every time.Duration
	at    time.Time
	c     statestore.Census
}

// get returns the census, scanning the table if it is older than every.
func (c *censusCache) get(ctx context.Context, store *statestore.Store) (statestore.Census, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.every {
		return c.c, c.at, nil
	}
	census, err := store.Census(ctx, time.Now())
	if err != nil {
		return census, c.at, fmt.Errorf("count the orders by state: %w", err)
	}
	c.c, c.at = census, time.Now()
	return c.c, c.at, nil
}

// peek returns the census last taken, if any, without scanning.
func (c *censusCache) peek() (statestore.Census, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c, c.at, !c.at.IsZero()
}

// forget makes the next page count again (after an action changed a state).
func (c *censusCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = time.Time{}
}
