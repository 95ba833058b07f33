package resilience

import (
	"errors"
	"sync"
	"time"
)

// ErrOpen is returned by Allow while the breaker is open.
var ErrOpen = errors.New("circuit breaker open")

// BreakerState is the state of a Breaker.
type BreakerState int

// The breaker's states.
const (
	Closed BreakerState = iota
	Open
	HalfOpen
)

// String names the state.
func (s BreakerState) String() string {
	return [...]string{"closed", "open", "half-open"}[s]
}

// Breaker opens after Threshold consecutive failures, refuses calls for
// Cooldown, then lets one trial call through (half-open): its success closes
// the breaker, its failure opens it again. Safe for concurrent use.
type Breaker struct {
	Threshold int
	Cooldown  time.Duration
	Now       func() time.Time // nil uses time.Now

	mu       sync.Mutex
	state    BreakerState
	failures int
	openedAt time.Time
	trial    bool // a half-open trial call is in flight
}

func (b *Breaker) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// State returns the breaker's current state.
func (b *Breaker) State() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	return b.state
}

func (b *Breaker) advance() {
	if b.state == Open && b.now().Sub(b.openedAt) >= b.Cooldown {
		b.state, b.trial = HalfOpen, false
	}
}

// RetryIn is how long until the breaker may let a call through: what is
// left of its cooldown while open; a cooldown while half-open with its
// trial call in flight (that call decides); zero otherwise.
func (b *Breaker) RetryIn() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	switch {
	case b.state == Open:
		return b.Cooldown - b.now().Sub(b.openedAt)
	case b.state == HalfOpen && b.trial:
		return b.Cooldown
	}
	return 0
}

// Allow reports whether a call may go ahead now; it returns ErrOpen if not.
// Every allowed call must be followed by Record or Forgo.
func (b *Breaker) Allow() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance()
	switch b.state {
	case Open:
		return ErrOpen
	case HalfOpen:
		if b.trial {
			return ErrOpen
		}
		b.trial = true
	}
	return nil
}

// Forgo reports an allowed call that told nothing of the service (its
// caller's own deadline cut it short): no failure is counted and none
// forgotten; a half-open breaker's trial is let go, so that another call
// may be the trial.
func (b *Breaker) Forgo() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == HalfOpen {
		b.trial = false
	}
}

// Record reports the outcome of an allowed call. Only failures of the remote
// service (transient faults) should count; a permanent 4xx is a success here.
func (b *Breaker) Record(failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !failed {
		b.state, b.failures, b.trial = Closed, 0, false
		return
	}
	b.failures++
	if b.state == HalfOpen || b.failures >= b.Threshold {
		b.state, b.openedAt, b.trial = Open, b.now(), false
	}
}
