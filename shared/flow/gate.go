package flow

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/workflow"
)

// Verdict is what Admit decided for one call.
type Verdict struct {
	// Wait > 0: not now: the request comes back after Wait (Why says
	// why). Otherwise the call may be made now, and Turned says it took a
	// turn of its rate limit, admitted At (on the clock of the now it was
	// asked with): the moment no window of the limit's period holds more
	// such moments than the limit allows (workflow.Rate.Most).
	Wait   time.Duration
	Why    string
	Turned bool
	At     time.Time
}

// Gate is one Agent instance's view of its flow items: the control cached
// for ControlTTL; and its calls' turns of the rate limit, taken a lease of
// several at a time and handed out here at their times (turns), the
// instance's calls waiting in line when none is left (so that only one of
// them at a time races the other instances for the next lease).
type Gate struct {
	Store      Store
	mu         sync.Mutex
	read       time.Time
	last       Control
	refreshing bool
	reading    sync.Mutex    // one read of the control at a time that calls wait for (control)
	line       chan struct{} // one call of this instance at a time asks for a turn (enterLine)
	lineOnce   sync.Once
	leases     sync.Mutex        // guards rates
	rates      map[string]*turns // each agent's leased turns (turnsOf)
	// Sleep waits for a turn (nil: resilience.Sleep; tests replace it).
	Sleep func(ctx context.Context, d time.Duration) error
	// Background runs a refresh of the cached control (nil: in a goroutine
	// of its own; a deterministic test runs it in the call that started it).
	Background func(refresh func())
}

// MaxTurnWait is how long a call at the head of its Agent instance's line
// waits for a turn of its rate limit before its request is sent again for
// later (never past its invocation's time): long enough that the instances'
// calls take every turn of a backlog between them, so few requests go round
// the queue again.
const MaxTurnWait = 3 * time.Second

// Admit says whether agent may call its service now, at most limit calls a
// period (zero: no limit). A pause or a back-off makes the call wait; a rate
// limit gives the call a turn (Turn), waiting for it in the Agent up to
// MaxTurnWait (never past by, if set), or else a Wait for the request to
// come back.
func (g *Gate) Admit(ctx context.Context, agent string, limit workflow.Rate, by, now time.Time) (Verdict, error) {
	c, err := g.control(ctx, agent, now)
	if err != nil {
		return Verdict{}, err
	}
	switch {
	case c.Paused:
		return Verdict{Wait: PausedWait, Why: fmt.Sprintf("agent %s is paused (by %s)", agent, c.PausedBy)}, nil
	case c.SlowUntil.After(now):
		jitter := time.Duration(rand.Int64N(int64(time.Second)))
		return Verdict{Wait: c.SlowUntil.Sub(now) + jitter, Why: fmt.Sprintf("agent %s's service asked for no calls before %s",
			agent, c.SlowUntil.UTC().Format(time.RFC3339))}, nil
	case limit.Calls == 0:
		return Verdict{}, nil
	}
	return g.Turn(ctx, agent, limit, by, now)
}

// Recheck is Admit's pause and back-off again (read afresh if the cached
// control is older than ControlTTL): a claimed call checks them right before
// it is made, so that a 429 another instance met while it waited for its
// claim or its turn holds it too.
func (g *Gate) Recheck(ctx context.Context, agent string, now time.Time) (Verdict, error) {
	return g.Admit(ctx, agent, workflow.Rate{}, time.Time{}, now)
}

// Forget drops the cached control: the next Admit reads it (after this
// instance slowed its agent down, say).
func (g *Gate) Forget() {
	g.mu.Lock()
	g.read = time.Time{}
	g.mu.Unlock()
}

// control is agent's control as this instance knows it. Read
// synchronously at first and after an idle spell (a read older than
// MaxStale: a call that comes back after its 30 s pause must not be told
// the pause it waited out); in between, a read older than ControlTTL is
// refreshed in the background while the cached one answers, so that no
// call of a busy instance waits on it. The calls of a batch start at once:
// one of them reads, the others wait for its read (begun at most a read's
// time before they asked) rather than each making its own (ten consistent
// reads an idle batch, as sasctl bench counted).
func (g *Gate) control(ctx context.Context, agent string, now time.Time) (Control, error) {
	if c, ok := g.fresh(agent, now); ok {
		return c, nil
	}
	g.reading.Lock()
	defer g.reading.Unlock()
	if c, ok := g.fresh(agent, now); ok { // read while this call waited
		return c, nil
	}
	c, err := g.Store.Control(ctx, agent)
	if err != nil {
		return c, err
	}
	g.mu.Lock()
	g.read, g.last = now, c
	g.mu.Unlock()
	return c, nil
}

// fresh is agent's control from the cache, if it was read within MaxStale
// of now, refreshed in the background (Background) past ControlTTL.
func (g *Gate) fresh(agent string, now time.Time) (Control, bool) {
	c, ok, stale := g.cached(agent, now)
	if stale {
		if g.Background != nil {
			g.Background(func() { g.refresh(agent, now) })
		} else {
			go g.refresh(agent, now)
		}
	}
	return c, ok
}

// cached is agent's control from the cache, if it was read within MaxStale
// of now, and whether this call is to refresh it (past ControlTTL, no
// refresh under way).
func (g *Gate) cached(agent string, now time.Time) (c Control, ok, stale bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.read.IsZero() || g.last.Agent != agent || now.Sub(g.read) >= MaxStale {
		return Control{}, false, false
	}
	if now.Sub(g.read) >= ControlTTL && !g.refreshing {
		g.refreshing = true
		stale = true
	}
	return g.last, true, stale
}

// refresh reads agent's control for the cache.
func (g *Gate) refresh(agent string, now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := g.Store.Control(ctx, agent)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refreshing = false
	if err == nil {
		g.read, g.last = now, c
	}
}

// enterLine waits for the head of the instance's line, no later than by
// (zero: no bound; by is on the clock of now) or ctx's end; it reports
// whether it got there.
func (g *Gate) enterLine(ctx context.Context, by, now time.Time) bool {
	g.lineOnce.Do(func() { g.line = make(chan struct{}, 1) })
	var timeout <-chan time.Time
	if !by.IsZero() {
		t := time.NewTimer(by.Sub(now))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case g.line <- struct{}{}:
		return true
	case <-timeout:
		return false
	case <-ctx.Done():
		return false
	}
}

func (g *Gate) leaveLine() { <-g.line }

func (g *Gate) sleep(ctx context.Context, d time.Duration) error {
	if g.Sleep != nil {
		return g.Sleep(ctx, d)
	}
	return resilience.Sleep(ctx, d)
}
