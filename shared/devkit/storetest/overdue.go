package storetest

import (
	"context"
	"errors"
	"time"

	"github.com/sas-go/sas/shared/statestore"
)

// Overdue returns up to limit records of s whose deadline is at or before
// now, and the records at work of orders whose own deadline passed: every
// shard's due pages in turn (Store.DuePage), each early order moved on as
// it is read (Store.MoveOn). The Supervisor reads the same pages itself,
// every shard at once; this is the whole sweep in one call, for tests and
// tools.
//
// An order's index entry is when the Supervisor must look next, which may be
// before its records' deadlines: the writes of the hot path do not move it (a
// claim, a step made ready) unless they set an earlier one, to save the index
// writes. Every write made on what this returns is conditional on the
// Version read.
func Overdue(ctx context.Context, s *statestore.Store, now time.Time, limit int) ([]statestore.Step, error) {
	var out []statestore.Step
	var errs []error
	for shard := 0; shard < s.Shards() && len(out) < limit; shard++ {
		q := statestore.DueQuery{Shard: shard, AsOf: now, Now: now, Limit: statestore.MaxDuePage}
		for more := true; more && len(out) < limit; {
			page, err := s.DuePage(ctx, q)
			if err != nil {
				return out, errors.Join(append(errs, err)...)
			}
			for _, e := range page.Early {
				if err := s.MoveOn(ctx, e, now); err != nil {
					errs = append(errs, err)
				}
			}
			for _, o := range page.Due {
				out = append(out, o.Steps[:min(len(o.Steps), max(limit-len(out), 0))]...)
			}
			q.After, more = page.Next, page.More
		}
	}
	return out, errors.Join(errs...)
}
