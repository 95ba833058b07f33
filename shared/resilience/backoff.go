// Package resilience holds the failure-handling rules: exponential backoff
// with jitter and a circuit breaker (pure), and Sleep, the one
// context-aware wait every retry loop, lost race and rate turn sleeps with.
// It does no I/O.
package resilience

import (
	"math/rand/v2"
	"time"
)

// Backoff computes "full jitter" exponential delays: attempt n waits a random
// duration in [0, min(Max, Base·2^n)).
type Backoff struct {
	Base time.Duration
	Max  time.Duration
	Rand func() float64 // in [0,1); nil uses math/rand/v2
}

// Ceiling is the upper bound of the delay after the n-th failed try (n from 0).
func (b Backoff) Ceiling(n int) time.Duration {
	d := b.Base
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Delay is the jittered delay after the n-th failed try (n from 0).
func (b Backoff) Delay(n int) time.Duration {
	r := b.Rand
	if r == nil {
		r = rand.Float64
	}
	return time.Duration(r() * float64(b.Ceiling(n)))
}
