package flow_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/workflow"
)

var engines = map[string]emulatortest.Engine{}

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithEngines(m, engines)) }

// each runs fn on a fresh state table of every engine.
func each(t *testing.T, fn func(t *testing.T, s flow.Store)) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topo := storetest.NewTables(t, e.Clients.DynamoDB)
			fn(t, flow.NewStore(e.Clients.DynamoDB, topo.StateTable()))
		})
	}
}

// table is a test's state table, to look at an agent's items as stored.
type table struct {
	db   *dynamodb.Client
	name string
}

// eachTable runs fn on a fresh state table of every engine.
func eachTable(t *testing.T, fn func(t *testing.T, s flow.Store, tb table)) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topo := storetest.NewTables(t, e.Clients.DynamoDB)
			fn(t, flow.NewStore(e.Clients.DynamoDB, topo.StateTable()), table{e.Clients.DynamoDB, topo.StateTable()})
		})
	}
}

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

// A pause holds every call of the agent, across instances, until resumed:
// each conditional write says whether it changed anything.
func TestAPauseHoldsTheAgentsCallsUntilResumed(t *testing.T) {
	each(t, func(t *testing.T, s flow.Store) {
		ctx := context.Background()
		g := &flow.Gate{Store: s}
		v, err := g.Admit(ctx, "payment", workflow.Rate{}, time.Time{}, t0)
		require.NoError(t, err)
		require.Zero(t, v.Wait)
		changed, err := s.Pause(ctx, "payment", "ops", t0)
		require.NoError(t, err)
		require.True(t, changed)
		changed, err = s.Pause(ctx, "payment", "ops", t0)
		require.NoError(t, err)
		require.False(t, changed, "paused already")
		other := &flow.Gate{Store: s} // another instance
		v, err = other.Admit(ctx, "payment", workflow.Rate{}, time.Time{}, t0)
		require.NoError(t, err)
		require.Equal(t, flow.PausedWait, v.Wait)
		require.Equal(t, "agent payment is paused (by ops)", v.Why)
		v, err = other.Admit(ctx, "inventory", workflow.Rate{}, time.Time{}, t0)
		require.NoError(t, err)
		require.Zero(t, v.Wait, "another agent's calls go on")
		c, err := s.Control(ctx, "payment")
		require.NoError(t, err)
		require.Equal(t, flow.Control{Agent: "payment", Paused: true, PausedBy: "ops", PausedAt: t0}, c)

		changed, err = s.Resume(ctx, "payment")
		require.NoError(t, err)
		require.True(t, changed)
		changed, err = s.Resume(ctx, "payment")
		require.NoError(t, err)
		require.False(t, changed, "running already")
		// The instance's cached control, older than ControlTTL, answers
		// while it is read again in the background; then the resume is seen.
		require.Eventually(t, func() bool {
			v, err := other.Admit(ctx, "payment", workflow.Rate{}, time.Time{}, t0.Add(flow.ControlTTL))
			return err == nil && v.Wait == 0
		}, 10*time.Second, 10*time.Millisecond, "resumed: seen within ControlTTL and a read")
	})
}

// A Retry-After slows every instance down until it passes; an earlier one
// does not shorten it.
func TestASlowDownHoldsCallsUntilItPasses(t *testing.T) {
	each(t, func(t *testing.T, s flow.Store) {
		ctx := context.Background()
		require.NoError(t, s.SlowDown(ctx, "payment", t0.Add(20*time.Second)))
		require.NoError(t, s.SlowDown(ctx, "payment", t0.Add(5*time.Second)), "an earlier one changes nothing")
		c, err := s.Control(ctx, "payment")
		require.NoError(t, err)
		require.Equal(t, t0.Add(20*time.Second), c.SlowUntil)
		g := &flow.Gate{Store: s}
		v, err := g.Admit(ctx, "payment", workflow.Rate{}, time.Time{}, t0.Add(time.Second))
		require.NoError(t, err)
		require.GreaterOrEqual(t, v.Wait, 19*time.Second)
		require.Less(t, v.Wait, 20*time.Second)
		v, err = g.Admit(ctx, "payment", workflow.Rate{}, time.Time{}, t0.Add(20*time.Second))
		require.NoError(t, err)
		require.Zero(t, v.Wait, "passed")
	})
}

// A rate limit of 20 a second decided at the moment of each call (GCRA),
// three instances asking every 10 ms for 2.5 s: a call goes exactly every
// 50 ms, never two in one interval, and no turn is booked ahead and lost:
// the service sees the whole rate.
func TestARateLimitDecidesEachCallAtItsMoment(t *testing.T) {
	each(t, func(t *testing.T, s flow.Store) {
		ctx := context.Background()
		limit := workflow.Rate{Calls: 20, Per: time.Second}
		now := t0.Add(300 * time.Millisecond)
		var went []int
		for tick := range 250 {
			at := now.Add(time.Duration(tick) * 10 * time.Millisecond)
			var wg sync.WaitGroup
			var oks, failed atomic.Int32
			for range 3 {
				wg.Go(func() {
					ok, next, err := s.Take(ctx, "payment", limit, at)
					switch {
					case err != nil:
						failed.Add(1)
					case ok:
						oks.Add(1)
					case !next.After(at) || next.After(at.Add(50*time.Millisecond)):
						failed.Add(1) // told a time that is not the next turn
					}
				})
			}
			wg.Wait()
			require.Zero(t, failed.Load())
			require.LessOrEqual(t, oks.Load(), int32(1), "one call an interval at %s", at.Sub(now))
			if oks.Load() == 1 {
				went = append(went, tick)
			}
		}
		require.Len(t, went, 50, "every turn of 2.5 s taken")
		for i, tick := range went {
			require.Equal(t, 5*i, tick, "call %d at its moment", i)
		}
		require.Equal(t, "50/s 600/m", fmt.Sprint(workflow.Rate{Calls: 50, Per: time.Second}, " ", workflow.Rate{Calls: 600, Per: time.Minute}))
	})
}

// An instance idle for a while reads its agent's control afresh before it
// answers: a call that comes back after a pause it waited out is not told
// the pause again (in between, a busy instance answers from what it read
// within MaxStale, refreshed in the background).
func TestAnIdleInstanceReadsItsControlAfresh(t *testing.T) {
	each(t, func(t *testing.T, s flow.Store) {
		ctx := context.Background()
		_, err := s.Pause(ctx, "payment", "ops", t0)
		require.NoError(t, err)
		g := &flow.Gate{Store: s}
		v, err := g.Admit(ctx, "payment", workflow.Rate{}, time.Time{}, t0)
		require.NoError(t, err)
		require.Equal(t, flow.PausedWait, v.Wait)
		_, err = s.Resume(ctx, "payment")
		require.NoError(t, err)
		v, err = g.Admit(ctx, "payment", workflow.Rate{}, time.Time{}, t0.Add(flow.PausedWait))
		require.NoError(t, err)
		require.Zero(t, v.Wait, "resumed while it was idle: read before it answers")
	})
}

// A call waits in its Agent for its turn up to MaxTurnWait, then is told to
// come back.
func TestACallWaitsInItsAgentForItsTurn(t *testing.T) {
	each(t, func(t *testing.T, s flow.Store) {
		ctx := context.Background()
		limit := workflow.Rate{Calls: 10, Per: time.Second}
		var slept time.Duration
		g := &flow.Gate{Store: s, Sleep: func(_ context.Context, d time.Duration) error { slept += d; return nil }}
		turned := 0
		for range 40 {
			v, err := g.Turn(ctx, "ocr", limit, time.Time{}, t0)
			require.NoError(t, err)
			if v.Turned {
				turned++
				continue
			}
			require.Greater(t, v.Wait, flow.MaxTurnWait-time.Second, "told to come back for a turn further off")
			require.Contains(t, v.Why, "waiting for its rate turn")
		}
		require.Equal(t, 31, turned, "the turns of MaxTurnWait (and the one now)")
		ok, next, err := s.Take(ctx, "ocr", limit, t0.Add(3*time.Second))
		require.NoError(t, err)
		require.False(t, ok, "the 31 turns reach past 3 s")
		require.Equal(t, t0.Add(3100*time.Millisecond), next)
	})
}

// A burst: after a quiet spell, that many calls go at once, then each an
// interval after the one before.
func TestABurstLetsThatManyCallsGoAtOnce(t *testing.T) {
	each(t, func(t *testing.T, s flow.Store) {
		ctx := context.Background()
		limit := workflow.Rate{Calls: 10, Per: time.Second, Burst: 4} // 100 ms apart, 4 at once
		for i := range 4 {
			ok, _, err := s.Take(ctx, "payment", limit, t0)
			require.NoError(t, err)
			require.True(t, ok, "call %d of the burst goes at once", i)
		}
		ok, next, err := s.Take(ctx, "payment", limit, t0)
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, t0.Add(100*time.Millisecond), next, "then an interval apart")
		ok, _, err = s.Take(ctx, "payment", limit, next)
		require.NoError(t, err)
		require.True(t, ok)
		later := t0.Add(10 * time.Second) // quiet again: a whole burst
		for i := range 4 {
			ok, _, err := s.Take(ctx, "payment", limit, later)
			require.NoError(t, err)
			require.True(t, ok, "after a quiet spell, call %d goes at once", i)
		}
		ok, next, err = s.Take(ctx, "payment", limit, later)
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, later.Add(100*time.Millisecond), next)
	})
}
