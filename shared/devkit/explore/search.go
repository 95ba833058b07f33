package explore

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/searchkey"
)

// Half of the ordinary runs declare their orders' customerId searchable
// (search: [customerId]): Submission keeps each order's customer in the
// index, in the transaction every fault and crash meets (named under a
// search secret in a sealed run), and an operator acts on the orders of a
// customer by query at random moments (bulk.go: operator.Bulk over the
// search). At the end, a search of each customer of the run, and of one
// no order has, finds exactly the run's orders of it.

// searchStream is the stream that decides whether a run searches, and its
// bulk actions: the seed's other choices are as they were before runs did.
const searchStream = 0x5ea

// searchField is the field the searching runs declare searchable.
const searchField = "customerId"

// searchable makes p a searching run, in half of the ordinary runs (none
// without withSearch: a regression seed found before runs searched
// replays the run it found). Made before the next version (evolve), which
// declares it too.
func (p *plan) searchable(withSearch bool) {
	rng := rand.New(rand.NewPCG(p.seed, searchStream))
	if !withSearch || p.scenario != none || rng.IntN(2) != 0 {
		return
	}
	p.def.Search = []string{searchField}
	p.bulker = rng
}

// prefix is what the run's order ids start with: the worker's runs share
// their tables, and a search of a customer of this run is kept to its own
// orders by it (operator.Search.Prefix).
func (w *World) prefix() string { return fmt.Sprintf("x%d-", w.seed) }

// searched selects the orders s finds, as an operator's search does: its
// own path (operator.Operator.Searched: the field's index, then the state
// items) in a run that does not seal; in a sealed one, the same door for
// the names a value may be kept under (searchkey.Lookup, the search
// secrets opened with a key without faults) and the same index read
// (statestore.Store.WithField), the state items kept by s's filter (the
// explorer's operator has no KMS client to open them by).
func (w *World) searched(s operator.Search) operator.Selector {
	if w.sealer == nil {
		return w.op.Searched(s)
	}
	opener := seal.New(newKeys(w.seed+secretStream, false, func(string) {}), explorerKey)
	return func(ctx context.Context, next string) ([]string, string, error) {
		names, err := searchkey.Lookup(ctx, w.db, w.topo.StateTable(), opener, s.Value)
		if err != nil {
			return nil, "", err
		}
		ids, token, err := w.store.WithField(ctx, s.Field, names, operator.MatchingPage, next)
		if err != nil {
			return nil, "", err
		}
		tasks, err := w.store.Tasks(ctx, ids)
		if err != nil {
			return nil, "", err
		}
		var out []string
		f := s.Filter(time.Now())
		for _, id := range ids {
			if t, ok := tasks[id]; ok && f.Keeps(t) {
				out = append(out, id)
			}
		}
		return out, token, nil
	}
}

// searchIDs are every page of what sel selects, as given (an id twice if
// pages give it twice).
func searchIDs(ctx context.Context, sel operator.Selector) ([]string, error) {
	var out []string
	for next := ""; ; {
		ids, token, err := sel(ctx, next)
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
		if token == "" || token == next {
			return out, nil
		}
		next = token
	}
}

// customerSearch is the search of the run's orders of customer c.
func (w *World) customerSearch(c string) operator.Search {
	return operator.Search{Field: searchField, Value: c, Prefix: w.prefix()}
}

// checkSearch checks, in a searching run, that a search of each customer
// of the run (and of one no order has) finds exactly the run's orders of
// it: every order ended, so every one was stored with its index item.
func (w *World) checkSearch(ctx context.Context) []string {
	if len(w.def.Search) == 0 {
		return nil
	}
	of := map[string][]string{"c-none": nil}
	for _, o := range w.orders {
		of[o.customer] = append(of[o.customer], o.id)
	}
	var bad []string
	for _, c := range slices.Sorted(maps.Keys(of)) {
		found, err := searchIDs(ctx, w.searched(w.customerSearch(c)))
		if err != nil {
			return append(bad, fmt.Sprintf("search %s=%s: %v", searchField, c, err))
		}
		w.countSearch()
		bad = append(bad, foundWrong(c, of[c], of[c], found)...)
	}
	return bad
}

// countSearch counts a search checked (a sealed run's apart).
func (w *World) countSearch() {
	if w.sealer != nil {
		w.count("searches checked, sealed")
		return
	}
	w.count("searches checked")
}

// foundWrong says how a search of customer c that must find must and may
// find may found otherwise: one of must missing, one not of may, one
// twice.
func foundWrong(c string, must, may, found []string) []string {
	var bad []string
	seen := map[string]bool{}
	for _, id := range found {
		switch {
		case seen[id]:
			bad = append(bad, fmt.Sprintf("a search finds each order once: %s=%s found %s twice", searchField, c, id))
		case !slices.Contains(may, id):
			bad = append(bad, fmt.Sprintf("a search finds only the orders of its value: %s=%s found %s", searchField, c, id))
		}
		seen[id] = true
	}
	for _, id := range must {
		if !seen[id] {
			bad = append(bad, fmt.Sprintf("a search finds every order of its value: %s=%s missed %s", searchField, c, id))
		}
	}
	return bad
}
