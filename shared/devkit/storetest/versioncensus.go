package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
)

// versionCensusTests are the cases of the census of versions in flight:
// its item claimed by one supervisor at a time, and its cursor.
var versionCensusTests = map[string]func(*testing.T, *statestore.Store){
	"VersionCensusIsClaimedByOneOncePerPeriod": versionCensusClaimedOnce,
	"VersionCensusResumesFromItsCursor":        versionCensusResumes,
}

func censusClaim(owner string, now time.Time) statestore.VersionCensusClaim {
	return statestore.VersionCensusClaim{Owner: owner, Now: now, Every: time.Hour, Lease: time.Minute}
}

// versionCensusClaimedOnce: of supervisors claiming the census at once, one
// has it; nobody else while its lease runs; once its pass ended, nobody
// until the period since it began has passed, then one again, for a new
// pass.
func versionCensusClaimedOnce(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	oneWins(t, s, t0) // no census yet
	_, ok, err := s.ClaimVersionCensus(ctx, censusClaim("late", t0.Add(59*time.Second)))
	require.NoError(t, err)
	require.False(t, ok, "its lease runs")
	c, ok, err := s.ClaimVersionCensus(ctx, censusClaim("next", t0.Add(time.Minute)))
	require.NoError(t, err)
	require.True(t, ok, "its owner stopped: its lease ran out")
	require.Equal(t, t0, c.Started, "the same pass, resumed")
	done, err := s.VersionCensusPage(ctx, &c, 10)
	require.NoError(t, err)
	require.True(t, done, "no order in flight: one page")
	_, err = s.SaveVersionCensus(ctx, c, true, t0.Add(time.Minute))
	require.NoError(t, err)
	_, ok, err = s.ClaimVersionCensus(ctx, censusClaim("soon", t0.Add(time.Hour-time.Millisecond)))
	require.NoError(t, err)
	require.False(t, ok, "this period's pass ended")
	c = oneWins(t, s, t0.Add(time.Hour)) // the census item there, ended
	require.Equal(t, t0.Add(time.Hour), c.Started, "the next period's pass")
	require.Empty(t, c.Tally)
	require.Empty(t, c.Cursor)
}

// oneWins has four supervisors claim the census at once, at now, and
// checks that one has it; it returns that one's census.
func oneWins(t *testing.T, s *statestore.Store, now time.Time) statestore.VersionCensus {
	t.Helper()
	var wg sync.WaitGroup
	got := make([]bool, 4)
	won := make([]statestore.VersionCensus, 4)
	for i := range got {
		wg.Go(func() {
			c, ok, err := s.ClaimVersionCensus(context.Background(), censusClaim(fmt.Sprintf("sup-%d", i), now))
			require.NoError(t, err)
			got[i], won[i] = ok, c
		})
	}
	wg.Wait()
	var out []statestore.VersionCensus
	for i, ok := range got {
		if ok {
			out = append(out, won[i])
		}
	}
	require.Len(t, out, 1, "one census at a time: %v", got)
	return out[0]
}

// versionCensusResumes: a pass read by three supervisors in turn, a page
// each, one of them stopping before it saved, counts each order in flight
// once, by workflow and version; the stopped one's late save is refused.
func versionCensusResumes(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	inFlightOrders(t, s) // five in flight of version def(2)
	other := def(1)
	other.Version = "v2"
	for i := range 3 { // three of another version
		id := fmt.Sprintf("p-%d", i)
		_, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`, Workflow: other, Now: t0})
		require.NoError(t, err)
	}
	a, ok, err := s.ClaimVersionCensus(ctx, censusClaim("a", t0))
	require.NoError(t, err)
	require.True(t, ok)
	done, err := s.VersionCensusPage(ctx, &a, 3)
	require.NoError(t, err)
	require.False(t, done)
	_, err = s.SaveVersionCensus(ctx, a, false, t0) // a's share of its sweep ended
	require.NoError(t, err)

	b, ok, err := s.ClaimVersionCensus(ctx, censusClaim("b", t0.Add(time.Second)))
	require.NoError(t, err)
	require.True(t, ok, "saved and let go: the next supervisor resumes at once")
	require.Equal(t, a.Cursor, b.Cursor)
	_, err = s.VersionCensusPage(ctx, &b, 3) // b stops here, unsaved
	require.NoError(t, err)
	_, ok, err = s.ClaimVersionCensus(ctx, censusClaim("c", t0.Add(30*time.Second)))
	require.NoError(t, err)
	require.False(t, ok, "b's lease runs")

	c, ok, err := s.ClaimVersionCensus(ctx, censusClaim("c", t0.Add(time.Minute+time.Second)))
	require.NoError(t, err)
	require.True(t, ok, "b's lease ran out")
	require.Equal(t, a.Cursor, c.Cursor, "from the cursor saved last")
	require.Equal(t, a.Tally.Counts(), c.Tally.Counts(), "with what was counted up to it")
	for pages := 0; !done; pages++ {
		require.Less(t, pages, 10, "the listing ends")
		done, err = s.VersionCensusPage(ctx, &c, 3)
		require.NoError(t, err)
	}
	_, err = s.SaveVersionCensus(ctx, c, true, t0.Add(time.Minute+2*time.Second))
	require.NoError(t, err)
	_, err = s.SaveVersionCensus(ctx, b, false, t0.Add(time.Minute+3*time.Second))
	require.ErrorIs(t, err, statestore.ErrCensusLost, "b was taken over")

	all, _, err := s.InFlight(ctx, 100, "")
	require.NoError(t, err)
	want := statestore.Tally{}
	want.Add(all)
	require.Len(t, c.Tally, 2, "two versions in flight")
	require.Equal(t, want.Counts(), c.Tally.Counts(), "each order counted once")
	require.Equal(t, 8, c.Tally.Orders())
}
