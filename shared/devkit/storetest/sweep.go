package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// sweepTests are the cases of the Supervisor's paged read of the deadline
// index.
var sweepTests = map[string]func(*testing.T, *statestore.Store){
	"DuePagesReadEachDueOrderOnceInDueOrder": duePages,
	"DuePageReturnsEarlyOrdersToMoveOn":      duePageEarly,
	"MoveOnIsConditionalOnTheVersionRead":    moveOnConditional,
}

// duePages: orders due at t0+1m … t0+10m (their first step's pickup
// deadline); read as of t0+5m in pages of 2, each shard from its start to
// its end, every order due by then is read once, in due order within its
// shard, and none due later.
func duePages(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	for i := range 10 {
		id := fmt.Sprintf("o-%d", i)
		_, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`,
			Workflow: pickupIn(time.Duration(i+1) * time.Minute), Now: t0})
		require.NoError(t, err)
	}
	asOf := t0.Add(5 * time.Minute)
	seen := map[string]bool{}
	for shard := range s.Shards() {
		q := statestore.DueQuery{Shard: shard, AsOf: asOf, Now: asOf, Limit: 2}
		var last time.Time
		for pages := 0; ; pages++ {
			require.Less(t, pages, 10, "paging ends")
			page, err := s.DuePage(ctx, q)
			require.NoError(t, err)
			require.LessOrEqual(t, page.Orders, 2)
			require.Len(t, page.Due, page.Orders, "each order read has its one step due")
			for _, o := range page.Due {
				require.Len(t, o.Steps, 1)
				st := o.Steps[0]
				require.False(t, seen[st.OrderID], "%s read once", st.OrderID)
				seen[st.OrderID] = true
				require.False(t, st.DueAt.After(asOf), "%s due by the page's bound", st.OrderID)
				require.False(t, st.DueAt.Before(last), "in due order within a shard")
				last = st.DueAt
			}
			if !page.More {
				break
			}
			q.After = page.Next
		}
	}
	require.Equal(t, map[string]bool{"o-0": true, "o-1": true, "o-2": true, "o-3": true, "o-4": true}, seen)
	_, err := s.DuePage(ctx, statestore.DueQuery{Shard: s.Shards(), AsOf: asOf, Now: asOf, Limit: 2})
	require.Error(t, err, "no such shard")
	_, err = s.DuePage(ctx, statestore.DueQuery{AsOf: asOf, Now: asOf, Limit: statestore.MaxDuePage + 1})
	require.Error(t, err, "more than a BatchGetItem reads")
}

// pickupIn is a one-step workflow whose step is looked at pickup after it
// is ready.
func pickupIn(pickup time.Duration) workflow.Definition {
	d := def(1)
	d.PickupTimeout = pickup
	d.Steps[0].Timeout = time.Hour
	return d
}

// duePageEarly: an order whose index entry is due while none of its
// records is (a claim set CompleteBy later and did not move the entry) is
// returned to be moved on, to its CompleteBy; MoveOn moves it, and a page
// as of the same time reads it no more.
func duePageEarly(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1) // due at its pickup deadline, t0+1m
	_, err := claim(ctx, s, "o-1", step0, "agent", t0.Add(55*time.Second))
	require.NoError(t, err) // CompleteBy t0+65s: the entry stays at t0+1m
	at := t0.Add(61 * time.Second)
	early := dueEarlyOrders(t, s, at)
	require.Len(t, early, 1)
	require.Equal(t, "o-1", early[0].OrderID)
	require.Equal(t, t0.Add(65*time.Second), early[0].Next, "its attempt's CompleteBy")
	require.NoError(t, s.MoveOn(ctx, early[0], at))
	require.Empty(t, dueEarlyOrders(t, s, at), "moved on")
	got, err := Overdue(ctx, s, t0.Add(66*time.Second), 10)
	require.NoError(t, err)
	require.Len(t, got, 1, "due again at its CompleteBy")
}

// dueEarlyOrders reads every shard's due pages as of at and returns the
// orders to move on (none of their records due).
func dueEarlyOrders(t *testing.T, s *statestore.Store, at time.Time) []statestore.Early {
	t.Helper()
	var out []statestore.Early
	for shard := range s.Shards() {
		page, err := s.DuePage(context.Background(), statestore.DueQuery{Shard: shard, AsOf: at, Now: at, Limit: 10})
		require.NoError(t, err)
		require.Empty(t, page.Due)
		out = append(out, page.Early...)
	}
	return out
}

// moveOnConditional: a move-on of an order written since it was read
// changes nothing and is no error; the order stays as the other write left
// it.
func moveOnConditional(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	submit(t, s, "o-1", 1)
	_, err := claim(ctx, s, "o-1", step0, "agent", t0.Add(55*time.Second))
	require.NoError(t, err)
	early := dueEarlyOrders(t, s, t0.Add(61*time.Second))
	require.Len(t, early, 1)
	_, err = complete(ctx, s, "o-1", step0, 1, t0.Add(61*time.Second))
	require.NoError(t, err)
	require.NoError(t, s.MoveOn(ctx, early[0], t0.Add(61*time.Second)), "a lost race is no error")
	task, _, err := s.Load(ctx, "o-1")
	require.NoError(t, err)
	require.Equal(t, workflow.Processed, task.State)
	n, err := s.CountInFlight(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the order left the index when it ended; the stale move-on did not put it back")
}
