package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/statestore"
)

// Sweep handles what is due now. Every shard of the deadline index is swept
// page by page, the shards taking turns (ShardParallelism pages read at once)
// so that none waits for another to finish, and the records of each page are
// handled Parallel at a time across all shards. It reads pages until every
// shard has none due as of the sweep's start, or the time budget is spent;
// every shard reads its first page either way, so a busy shard cannot starve
// the others, and what a sweep leaves comes first in the next one (each shard
// reads in order of due time).
//
// It returns an error when something could not be read or handled (it stays
// due for the next run), so the function's errors show in its metrics; a
// race lost to another supervisor is no error.
func (s *Supervisor) Sweep(ctx context.Context) (Report, error) {
	defer s.d.Metrics.Flush() // the invocation's metrics, one document
	sw := s.newSweep(ctx)
	census := s.census(ctx, sw.stopAt) // beside the sweep, for its own share of the time
	sw.run(ctx)
	rep, err := census()
	sw.rep.Census = rep
	if err != nil {
		sw.fail(err)
	}
	return sw.finish()
}

// sweep is one run of Sweep.
type sweep struct {
	s      *Supervisor
	asOf   time.Time // the index entries due by then are this sweep's
	start  time.Time // the wall clock's, for the budget
	stopAt time.Time
	depths *depths
	writes chan struct{} // the Parallel bound, shared by every shard

	mu   sync.Mutex
	rep  Report
	errs []error
}

func (s *Supervisor) newSweep(ctx context.Context) *sweep {
	start := time.Now()
	stopAt := start.Add(s.cfg.TimeBudget)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-sweepReserve).Before(stopAt) {
		stopAt = dl.Add(-sweepReserve)
	}
	return &sweep{s: s, asOf: s.Now(), start: start, stopAt: stopAt, depths: &depths{queues: s.d.Queues},
		writes: make(chan struct{}, s.cfg.Parallel), rep: Report{Shards: make([]ShardReport, s.d.Store.Shards())}}
}

// turn is a shard's next page to read.
type turn struct {
	shard int
	after statestore.DueCursor
}

// run sweeps every shard: each turn reads one page; a shard with more due
// goes to the back of the line.
func (sw *sweep) run(ctx context.Context) {
	n := len(sw.rep.Shards)
	turns := make(chan turn, n) // a shard is in the line at most once: a send never blocks
	var left sync.WaitGroup
	left.Add(n)
	for shard := range n {
		turns <- turn{shard: shard}
	}
	go func() { left.Wait(); close(turns) }()
	var workers sync.WaitGroup
	for range min(sw.s.cfg.ShardParallelism, n) {
		workers.Go(func() {
			for t := range turns {
				if next, more := sw.page(ctx, t); more {
					turns <- next
				} else {
					left.Done()
				}
			}
		})
	}
	workers.Wait()
}

// page reads and handles one page of a shard, and says whether the shard
// has another to read in this sweep.
func (sw *sweep) page(ctx context.Context, t turn) (turn, bool) {
	now := sw.s.Now()
	p, err := sw.s.d.Store.DuePage(ctx, statestore.DueQuery{Shard: t.shard, AsOf: sw.asOf, Now: now,
		Limit: sw.s.cfg.PageSize, After: t.after})
	if err != nil {
		sw.fail(fmt.Errorf("shard %d: %w", t.shard, err)) // its rest waits for the next sweep
		return t, false
	}
	sw.handle(ctx, p, now)
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sh := &sw.rep.Shards[t.shard]
	sh.Pages++
	sh.Orders += p.Orders
	sw.rep.Orders += p.Orders
	sh.Done = !p.More
	if p.More && (ctx.Err() != nil || !time.Now().Before(sw.stopAt)) {
		sw.rep.OutOfTime = true
		return t, false
	}
	return turn{shard: t.shard, after: p.Next}, p.More
}

// handle handles a page's due orders and moves its early orders on,
// Parallel at a time across the sweep, and returns when all are done.
func (sw *sweep) handle(ctx context.Context, p statestore.DuePage, now time.Time) {
	var wg sync.WaitGroup
	for _, o := range p.Due {
		sw.writes <- struct{}{}
		wg.Go(func() {
			defer func() { <-sw.writes }()
			outs, err := sw.s.handleSafely(ctx, o, now, sw.depths)
			sw.mu.Lock()
			defer sw.mu.Unlock()
			sw.rep.Overdue += len(o.Steps)
			for _, out := range outs {
				sw.rep.add(out)
			}
			if err != nil {
				sw.errs = append(sw.errs, err)
			}
		})
	}
	for _, e := range p.Early {
		sw.writes <- struct{}{}
		wg.Go(func() {
			defer func() { <-sw.writes }()
			err := sw.s.d.Store.MoveOn(ctx, e, now)
			sw.mu.Lock()
			defer sw.mu.Unlock()
			if err != nil {
				sw.errs = append(sw.errs, err)
				return
			}
			sw.rep.MovedOn++
		})
	}
	wg.Wait()
}

// count emits the sweep's looks, and a sweep the budget cut short: the
// Supervisor falling behind shows in its metrics, not only in late recoveries.
func (sw *sweep) count(rep Report) {
	if rep.Orders > 0 {
		sw.s.d.Metrics.Count(metrics.SweepLooks, float64(rep.Orders), nil)
	}
	if rep.OutOfTime {
		sw.s.d.Metrics.Count(metrics.SweepsOutOfTime, 1, map[string]any{"Orders": rep.Orders,
			"ElapsedMs": rep.Elapsed.Milliseconds(), "BudgetMs": sw.s.cfg.TimeBudget.Milliseconds()})
	}
}

func (sw *sweep) fail(err error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.errs = append(sw.errs, err)
}

// finish logs the sweep's report and returns it, with an error that joins
// every failure.
func (sw *sweep) finish() (Report, error) {
	rep := sw.rep
	rep.Elapsed = time.Since(sw.start)
	sw.count(rep)
	if rep.Orders > 0 || len(sw.errs) > 0 {
		sw.s.d.Log.Info("supervisor sweep", "orders", rep.Orders, "overdue", rep.Overdue, "moved_on", rep.MovedOn,
			"resent", rep.Resent, "held", rep.Held, "recovered", rep.Recovered, "gave_up", rep.GaveUp, "expired", rep.Expired,
			"alerted", rep.Alerted, "woken", rep.Woken, "lost_races", rep.Lost, "out_of_time", rep.OutOfTime,
			"elapsed", rep.Elapsed, "failures", len(sw.errs))
	}
	if len(sw.errs) > 0 {
		return rep, fmt.Errorf("supervisor sweep: %d failures; they stay due for the next run: %w", len(sw.errs), errors.Join(sw.errs...))
	}
	return rep, nil
}
