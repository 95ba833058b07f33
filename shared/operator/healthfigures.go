package operator

import (
	"context"
	"time"

	"github.com/sas-go/sas/shared/health"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// emptyFigures are a window's figures with no order.
func emptyFigures(since time.Time) Figures {
	return Figures{Since: since, Ended: map[workflow.State]int64{}}
}

// figuresOf are the figures of a window's counts.
func figuresOf(w health.Window) Figures {
	f := Figures{Since: w.Since, Started: w.StartedEnded, Ended: w.Ended,
		FailureRate:      health.Rate(w.Failures(), w.Total()),
		CompensationRate: health.Rate(w.Undone, w.Total()),
		Order:            percentilesOf(w.Order)}
	for _, name := range w.StepNames() {
		f.Steps = append(f.Steps, StepFigures{Name: name, Percentiles: percentilesOf(w.Steps[name])})
	}
	return f
}

func percentilesOf(h health.Histogram) Percentiles {
	return Percentiles{Count: h.Count(), P50: Percentile(h.Percentile(0.50)), P95: Percentile(h.Percentile(0.95)),
		P99: Percentile(h.Percentile(0.99))}
}

// Bucket is a percentile's text: "≤ 250ms", "> 24h" past the last bound,
// "-" for none.
func (p Percentiles) Bucket(d Percentile) string {
	switch {
	case p.Count == 0 || d == 0:
		return "-"
	case d < 0:
		return "> 24h"
	}
	return "≤ " + time.Duration(d).String()
}

// Text is the percentiles' text: "p50 ≤ 100ms, p95 ≤ 1s, p99 ≤ 1s".
func (p Percentiles) Text() string {
	return "p50 " + p.Bucket(p.P50) + ", p95 " + p.Bucket(p.P95) + ", p99 " + p.Bucket(p.P99)
}

// eachInFlight calls fn with each order in flight, once (the index moves
// under a listing: an order read twice is passed once), at most limit.
func (o *Operator) eachInFlight(ctx context.Context, limit int, fn func(statestore.Task)) error {
	seen := map[string]bool{}
	for next := ""; ; {
		page, token, err := o.InFlight(ctx, Search{}, 500, next)
		if err != nil {
			return err
		}
		for _, t := range page {
			if len(seen) >= limit {
				return nil
			}
			if !seen[t.OrderID] {
				seen[t.OrderID] = true
				fn(t)
			}
		}
		if next = token; next == "" {
			return nil
		}
	}
}
