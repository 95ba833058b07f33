package flow_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/workflow"
)

// mostIn is the most of the sorted moments in any half-open window [t,
// t+d).
func mostIn(at []time.Time, d time.Duration) int {
	best := 0
	for i, j := 0, 0; j < len(at); j++ {
		for at[j].Sub(at[i]) >= d {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}

// admissions are what a run of callers was admitted: the moments (sorted),
// when each caller saw its admission on the real clock (sorted), and how
// long the run took.
type admissions struct {
	at, seen []time.Time
	took     time.Duration
}

// admitted runs callers callers on each of gates instances of agent, on
// the real clock, each asking for a turn of limit again as soon as it had
// one (a call told to wait asks again after its wait, as its request would
// come back), until n were admitted between them.
func admitted(t testing.TB, s flow.Store, agent string, limit workflow.Rate, gates, callers, n int) admissions {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute+time.Duration(n)*limit.Interval())
	defer cancel()
	var (
		mu   sync.Mutex
		out  admissions
		errs []error
		wg   sync.WaitGroup
	)
	began := time.Now()
	for range gates {
		g := &flow.Gate{Store: s}
		for range callers {
			wg.Go(func() {
				for ctx.Err() == nil {
					v, err := g.Turn(ctx, agent, limit, time.Time{}, time.Now())
					seen := time.Now()
					mu.Lock()
					switch {
					case err != nil && ctx.Err() == nil:
						errs = append(errs, err)
						cancel()
					case v.Turned && len(out.at) < n:
						out.at, out.seen = append(out.at, v.At), append(out.seen, seen)
						if len(out.at) == n {
							out.took = time.Since(began)
							cancel()
						}
					}
					mu.Unlock()
					if v.Wait > 0 {
						sleepCtx(ctx, v.Wait)
					}
				}
			})
		}
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Len(t, out.at, n, "admitted in time")
	slices.SortFunc(out.at, time.Time.Compare)
	slices.SortFunc(out.seen, time.Time.Compare)
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// Many callers on several instances, on the real clock against a real
// engine: the moments their calls are admitted never put more than the
// limit into any window of its period (3/s: never a fourth in a second), a
// burst's extra turns on top (burst - 1 more), whether each turn is a
// write or instances take leases of many (200/s: a lease a write, a few
// dozen writes for hundreds of turns).
func TestNoWindowHoldsMoreThanTheLimit(t *testing.T) {
	eachTable(t, func(t *testing.T, _ flow.Store, tb table) {
		for _, c := range []struct {
			agent string
			limit workflow.Rate
			n     int
		}{
			{"three", workflow.Rate{Calls: 3, Per: time.Second}, 8},
			{"burst", workflow.Rate{Calls: 5, Per: time.Second, Burst: 3}, 14},
			{"leases", workflow.Rate{Calls: 200, Per: time.Second}, 500},
			{"leases-burst", workflow.Rate{Calls: 200, Per: time.Second, Burst: 20}, 500},
		} {
			db := &writeCounter{DB: tb.db}
			at := admitted(t, flow.NewStore(db, tb.name), c.agent, c.limit, 3, 6, c.n).at
			most := mostIn(at, c.limit.Per)
			t.Logf("%s: %d admitted in %s, at most %d in any %s, %d writes", c.limit, len(at), at[len(at)-1].Sub(at[0]).Round(time.Millisecond),
				most, c.limit.Per, db.writes.Load())
			require.LessOrEqual(t, most, c.limit.Most(), "%s: %s", c.limit, c.limit.Meaning())
			if c.limit.Calls >= 100 {
				require.Less(t, db.writes.Load(), int64(len(at)/4), "%s: turns taken in leases", c.limit)
			}
		}
	})
}
