package statestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// MaxDuePage is the most orders one page of the deadline index may hold: a
// page's orders are read with one BatchGetItem, which takes at most 100 keys.
const MaxDuePage = 100

// DueQuery asks for one page of one shard's due orders.
type DueQuery struct {
	Shard int
	// AsOf bounds the page: orders whose index entry is due at or before
	// it. A sweep keeps one AsOf for all its pages, so it ends: what came
	// due since it started waits for the next sweep.
	AsOf time.Time
	// Now judges the records read (AsOf or later).
	Now   time.Time
	Limit int       // orders per page, 1 to MaxDuePage
	After DueCursor // where the shard's previous page ended (zero: its start)
}

// DueCursor is where a page of a shard's due orders ended.
type DueCursor struct{ pos indexPos }

// DuePage is one page of a shard's due orders, read consistently.
type DuePage struct {
	// Orders are the index entries the page read: the orders looked at.
	Orders int
	// Due are the orders with records due now, each as read: every write
	// made on them is conditional on the Version read.
	Due []DueOrder
	// Early are the orders found due in the index with no record due:
	// their entry is to be moved on (MoveOn).
	Early []Early
	// Next is where the next page starts; More says there may be one.
	Next DueCursor
	More bool
}

// DueOrder is an order with records due, as read.
type DueOrder struct {
	Read  Snapshot
	Steps []Step // its records due now
}

// Early is an order found due in the deadline index with no record due: an
// entry the hot path did not move (a claim or a step made ready writes no
// index entry unless it pulls it in).
type Early struct {
	OrderID string
	Version int       // as read: MoveOn is conditional on it
	Next    time.Time // when it is due next; zero: it leaves the index
	Shard   string    // the shard it was read in, where it stays
}

// Shards is the number of partitions of the deadline index.
func (s *Store) Shards() int { return s.shards }

// DuePage reads one page of shard q.Shard's due orders: a keys-only Query of
// the sparse deadline index for entries due by q.AsOf (so its read units
// follow the due entries, not the orders in flight, nor the table), then one
// consistent BatchGetItem of those orders. An order moved on since the index
// was read is left out; the records due at q.Now are returned, and an order
// with none is returned to be moved on.
func (s *Store) DuePage(ctx context.Context, q DueQuery) (DuePage, error) {
	if q.Shard < 0 || q.Shard >= s.shards || q.Limit < 1 || q.Limit > MaxDuePage {
		return DuePage{}, fmt.Errorf("due page: shard %d of %d, limit %d (1 to %d)", q.Shard, s.shards, q.Limit, MaxDuePage)
	}
	pos := q.After.pos
	pos.Shard = q.Shard
	ids, next, err := s.indexPage(ctx, pos, q.Limit, ms(q.AsOf))
	if err != nil {
		return DuePage{}, fmt.Errorf("due page: %w", err)
	}
	page := DuePage{Orders: len(ids), Next: DueCursor{next}, More: next.Shard == q.Shard}
	if len(ids) == 0 {
		return page, nil
	}
	items, err := s.items(ctx, ids, true)
	if err != nil {
		return DuePage{}, fmt.Errorf("read the due orders of shard %d: %w", q.Shard, err)
	}
	for _, id := range ids {
		it, ok := items[id]
		if !ok || it.DueAt == 0 || it.DueAt > ms(q.Now) {
			continue // moved on since the index was read
		}
		due := DueOrder{Read: Snapshot{it: it}}
		due.Steps = due.Read.Due(q.Now)
		if len(due.Steps) > 0 {
			page.Due = append(page.Due, due)
		} else {
			page.Early = append(page.Early, Early{OrderID: it.OrderID, Version: it.Version, Next: fromMs(it.nextDue()), Shard: it.DueShard})
		}
	}
	return page, nil
}

// MoveOn moves an order found due early on in the deadline index, to its
// next due time, or out of the index if nothing of it is due; conditional on
// the Version read. Lost to another write, it changes nothing and is no
// error: the order stays due and is read again.
func (s *Store) MoveOn(ctx context.Context, e Early, now time.Time) error {
	ch := newChange(now)
	ch.version(e.Version)
	if !e.Next.IsZero() {
		ch.index(cmp.Or(e.Shard, shardOf(e.OrderID, s.shards)), e.Next)
	} else {
		ch.leaveIndex()
	}
	if err := s.update(ctx, e.OrderID, ch, "move on "+e.OrderID); err != nil && !errors.Is(err, ErrStale) {
		return err
	}
	return nil
}

// Due are the order's records the Supervisor must act on at now (overdue);
// of an order whose hold ended, the records that held it.
func (s Snapshot) Due(now time.Time) []Step {
	var out []Step
	ended := s.HoldEnded(now)
	for _, st := range s.Steps() {
		if overdue(st, now) || (ended && !st.Undo && st.State == workflow.Error) {
			out = append(out, st)
		}
	}
	return out
}

// HoldEnded reports whether the order is held and its hold ended by now: it
// is undone.
func (s Snapshot) HoldEnded(now time.Time) bool {
	return s.it.State == string(workflow.Held) && s.it.HeldUntil != 0 && s.it.HeldUntil <= ms(now)
}

// overdue reports whether the Supervisor must act on st now: its own
// deadline passed, or it is at work and the order's deadline passed, or it
// is a wait whose event was kept and not delivered (its start was lost).
func overdue(st Step, now time.Time) bool {
	if st.DueAt.IsZero() || st.Stopped {
		return false
	}
	return !st.DueAt.After(now) || (!st.Deadline.IsZero() && !st.Deadline.After(now)) || (st.EventKept && !st.Armed.IsZero())
}
