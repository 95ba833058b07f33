package resilience_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/resilience"
)

func TestBackoffCeilingDoublesUpToMax(t *testing.T) {
	t.Parallel()
	b := resilience.Backoff{Base: 50 * time.Millisecond, Max: time.Second}
	want := []time.Duration{50, 100, 200, 400, 800, 1000, 1000}
	for n, w := range want {
		require.Equal(t, w*time.Millisecond, b.Ceiling(n), "try %d", n)
	}
}

func TestBackoffDelayIsFullJitter(t *testing.T) {
	t.Parallel()
	r := 0.0
	b := resilience.Backoff{Base: 100 * time.Millisecond, Max: time.Second, Rand: func() float64 { return r }}
	require.Zero(t, b.Delay(3))
	r = 0.5
	require.Equal(t, 400*time.Millisecond, b.Delay(3))
	r = 0.999
	require.Less(t, b.Delay(3), 800*time.Millisecond)
	real := resilience.Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for range 100 {
		d := real.Delay(2)
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.Less(t, d, 400*time.Millisecond)
	}
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestBreakerOpensAfterThresholdAndHalfOpensAfterCooldown(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(0, 0)}
	b := &resilience.Breaker{Threshold: 3, Cooldown: time.Second, Now: c.now}
	for range 2 {
		require.NoError(t, b.Allow())
		b.Record(true)
	}
	require.Equal(t, resilience.Closed, b.State())
	require.NoError(t, b.Allow())
	b.Record(true)
	require.Equal(t, resilience.Open, b.State())
	require.ErrorIs(t, b.Allow(), resilience.ErrOpen)

	c.t = c.t.Add(time.Second)
	require.Equal(t, resilience.HalfOpen, b.State())
	require.NoError(t, b.Allow(), "one trial call")
	require.ErrorIs(t, b.Allow(), resilience.ErrOpen, "only one trial at a time")
	b.Record(true)
	require.Equal(t, resilience.Open, b.State(), "a failed trial opens it again")

	c.t = c.t.Add(time.Second)
	require.NoError(t, b.Allow())
	b.Record(false)
	require.Equal(t, resilience.Closed, b.State(), "a successful trial closes it")
	require.NoError(t, b.Allow())
}

func TestBreakerSuccessResetsTheCount(t *testing.T) {
	t.Parallel()
	b := &resilience.Breaker{Threshold: 2, Cooldown: time.Second}
	require.NoError(t, b.Allow())
	b.Record(true)
	require.NoError(t, b.Allow())
	b.Record(false)
	require.NoError(t, b.Allow())
	b.Record(true)
	require.Equal(t, resilience.Closed, b.State(), "failures must be consecutive")
	require.Equal(t, "closed", b.State().String())
}

// RetryIn says how long until the breaker may let a call through: what is
// left of its cooldown, a whole cooldown while a trial call decides, none
// when closed.
func TestBreakerSaysWhenItMayLetACallThrough(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(0, 0)}
	b := &resilience.Breaker{Threshold: 1, Cooldown: 2 * time.Second, Now: c.now}
	require.Zero(t, b.RetryIn(), "closed")
	require.NoError(t, b.Allow())
	b.Record(true)
	c.t = c.t.Add(500 * time.Millisecond)
	require.Equal(t, 1500*time.Millisecond, b.RetryIn(), "open: the rest of its cooldown")
	c.t = c.t.Add(1500 * time.Millisecond)
	require.Zero(t, b.RetryIn(), "half-open, no trial yet: now")
	require.NoError(t, b.Allow())
	require.Equal(t, 2*time.Second, b.RetryIn(), "a trial in flight decides: a cooldown")
	b.Record(false)
	require.Zero(t, b.RetryIn(), "closed again")
}

// A call that told nothing of the service changes no count, and lets a
// half-open breaker's trial go so that another call may be the trial.
func TestAForgoneCallCountsNothingAndFreesTheTrial(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(0, 0)}
	b := &resilience.Breaker{Threshold: 2, Cooldown: time.Second, Now: c.now}
	require.NoError(t, b.Allow())
	b.Record(true)
	require.NoError(t, b.Allow())
	b.Forgo()
	require.Equal(t, resilience.Closed, b.State(), "one failure counted, the forgone call none")
	require.NoError(t, b.Allow())
	b.Record(true)
	require.Equal(t, resilience.Open, b.State())
	c.t = c.t.Add(time.Second)
	require.NoError(t, b.Allow(), "the trial")
	require.ErrorIs(t, b.Allow(), resilience.ErrOpen, "one trial at a time")
	b.Forgo()
	require.NoError(t, b.Allow(), "the forgone trial let another through")
}
