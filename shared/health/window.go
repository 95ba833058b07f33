package health

import (
	"cmp"
	"slices"
	"time"
)

// HourCounts are one clock hour's counts of a workflow version (the ends in
// that hour), as the state store keeps them.
type HourCounts struct {
	Hour time.Time `json:"hour"`
	Counts
}

// Window is a workflow version's ends over a window: the sum of its hours.
type Window struct {
	Counts
	// Since is the window's first hour.
	Since time.Time `json:"since"`
	// StartedEnded counts the orders that both started and ended in the
	// window (the ones still in flight are counted apart).
	StartedEnded int64 `json:"startedEnded"`
}

// Sum adds up the hours at or after since, by workflow version, sorted by
// workflow then version.
func Sum(hours []HourCounts, since time.Time) []Window {
	since = Hour(since)
	by := map[string]*Window{}
	for _, h := range hours {
		if h.Hour.Before(since) {
			continue
		}
		k := h.Workflow + "@" + h.Version
		w := by[k]
		if w == nil {
			w = &Window{Counts: NewCounts(h.Workflow, h.Version), Since: since}
			by[k] = w
		}
		w.Merge(h.Counts)
		for ago, n := range h.StartedAgo {
			if !h.Hour.Add(-time.Duration(ago) * time.Hour).Before(since) {
				w.StartedEnded += n
			}
		}
	}
	out := make([]Window, 0, len(by))
	for _, w := range by {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b Window) int {
		if a.Workflow != b.Workflow {
			return cmp.Compare(a.Workflow, b.Workflow)
		}
		return cmp.Compare(a.Version, b.Version)
	})
	return out
}

// Rate is n of total, as a fraction (0 when total is 0).
func Rate(n, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(n) / float64(total)
}
