package flow

import (
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// MaxLeaseSpan is the longest span of turns one lease holds: an instance
// takes its turns in leases of several (one conditional write each) so that
// a rate of thousands a second costs a few writes a second, but never more
// than this many turns' worth at once, so that the other instances are not
// kept from turns a busy instance holds and a lease left unused costs the
// rate no more than this.
const MaxLeaseSpan = 200 * time.Millisecond

// maxLead bounds how far ahead of its first turn a lease is asked for (a
// write's round trip, measured).
const maxLead = 100 * time.Millisecond

// turns are an instance's leased turns of one agent's rate limit, handed
// out to its calls at their times, and what it knows of the schedule. The
// lease's size follows the instance's pace (resize): it grows while the
// instance hands out its whole lease, and shrinks to what it handed out
// when it left turns unused (dropped: a turn is never spent after its time,
// so an unused one is gone, never a call over the rate later). Guarded by
// the Gate's leases.
type turns struct {
	limit   workflow.Rate
	lease   Lease
	next    int           // the lease's first turn not handed out yet
	used    int           // the lease's turns handed out
	dropped int           // the lease's turns whose time passed here unused
	sized   bool          // the lease was weighed (resize)
	size    int           // the turns the next lease asks for
	known   schedule      // the schedule as this instance last wrote or read it
	rtt     time.Duration // a write's round trip from when it was meant to start, smoothed
	rttVar  time.Duration // and its mean deviation
}

// maxTurns is the most turns a lease of limit holds: MaxLeaseSpan's worth,
// at least one.
func maxTurns(limit workflow.Rate) int {
	return int(max(1, limit.Turns(MaxLeaseSpan)))
}

// handOut hands out the lease's next turn still due at now: the moment its
// call is admitted, the later of now and the turn's time less the burst's
// tolerance; or, if that is past until, how long the call would wait. ok
// false and no wait: no turn is left.
func (t *turns) handOut(now, until time.Time) (at time.Time, wait time.Duration, ok bool) {
	for t.next < t.lease.Turns {
		due := t.lease.At(t.next)
		if due.Before(now) {
			t.next++
			t.dropped++ // its time passed: gone
			continue
		}
		at = due.Add(-t.limit.Tolerance())
		if at.Before(now) {
			at = now
		}
		if at.After(until) {
			return time.Time{}, at.Sub(now), false
		}
		t.next++
		t.used++
		return at, 0, true
	}
	return time.Time{}, 0, false
}

// resize weighs the lease just used up, once, before the next is asked for:
// it grows while the instance hands out the whole lease (an eighth of it, or
// one turn, lost to late wake-ups aside), twice as large or to a write's
// round trip's turns, and shrinks to what it handed out when it left more
// than half unused.
func (t *turns) resize() {
	if t.sized || t.lease.Turns == 0 {
		return
	}
	t.sized = true
	switch {
	case t.dropped <= max(1, t.lease.Turns/8):
		// At least the turns of a write's round trip: fewer would leave the
		// schedule idle while the next lease travels.
		t.size = min(max(2*t.size, int(t.limit.Turns(t.lead()))), maxTurns(t.limit))
	case t.dropped > t.lease.Turns/2:
		t.size = max(1, min(t.size, t.used))
	}
}

// granted installs lease l at now, its first turn handed to the call that
// wrote it (decided at the write's moment). The turns whose time passed
// while the write travelled are gone; they say the write was slow (its
// round trip, measured, asks earlier next time), not that the instance
// leaves turns unused.
func (t *turns) granted(l Lease, now time.Time) {
	t.lease, t.next, t.used, t.dropped, t.sized = l, 1, 1, 0, false
	for t.next < l.Turns && l.At(t.next).Before(now) {
		t.next++
	}
}

// observe smooths a write's round trip into rtt and rttVar (as TCP's
// retransmission timer does).
func (t *turns) observe(d time.Duration) {
	if t.rtt == 0 {
		t.rtt, t.rttVar = d, d/2
		return
	}
	t.rttVar += (max(d-t.rtt, t.rtt-d) - t.rttVar) / 4
	t.rtt += (d - t.rtt) / 8
}

// lead is how far ahead of its first turn a lease is asked for: a write's
// round trip and four deviations, so that its turns are here by their time.
func (t *turns) lead() time.Duration { return min(t.rtt+4*t.rttVar, maxLead) }

// turnsOf is the instance's turns of agent's rate limit at limit (a new
// limit starts afresh, from the schedule as known).
func (g *Gate) turnsOf(agent string, limit workflow.Rate) *turns {
	g.leases.Lock()
	defer g.leases.Unlock()
	if g.rates == nil {
		g.rates = map[string]*turns{}
	}
	t := g.rates[agent]
	if t == nil || t.limit != limit {
		nt := &turns{limit: limit, size: 1}
		if t != nil {
			nt.known, nt.rtt, nt.rttVar = t.known, t.rtt, t.rttVar
		}
		t, g.rates[agent] = nt, nt
	}
	return t
}

// Turn gives the call a turn of agent's rate limit: one of the instance's
// lease still due, or, with none left, the first of a new lease it takes as
// the head of the instance's line (Store.lease), waiting for it up to
// MaxTurnWait (never past by, if set) from there. Turned, admitted At, once
// its moment came; or a Wait for the request to come back when its turn is
// further off.
func (g *Gate) Turn(ctx context.Context, agent string, limit workflow.Rate, by, now time.Time) (Verdict, error) {
	why := fmt.Sprintf("waiting for its rate turn (agent %s, %s)", agent, limit)
	c := &clock{at: now, began: time.Now(), virtual: g.Sleep != nil}
	t := g.turnsOf(agent, limit)
	if v, ok, err := g.leased(ctx, t, c, bound(ctx, by, c.now()), why); ok {
		return v, err
	}
	if !g.enterLine(ctx, by, now) {
		return Verdict{Wait: time.Second, Why: why}, nil // its time ran out in line
	}
	defer g.leaveLine()
	until := bound(ctx, by, c.now()) // from its place at the head of the line
	var aim time.Time                // when it means to write next (zero: now)
	for {
		if v, ok, err := g.leased(ctx, t, c, until, why); ok {
			return v, err
		}
		if v, ok, err := g.book(ctx, agent, t, c, until, why, &aim); ok {
			return v, err
		}
	}
}

// bound is how long a call waits for its turn from now: MaxTurnWait, never
// past by (if set) nor within a second of its invocation's end (its request
// is sent again before it ends).
func bound(ctx context.Context, by, now time.Time) time.Time {
	until := now.Add(MaxTurnWait)
	if !by.IsZero() && by.Before(until) {
		until = by
	}
	if d, ok := ctx.Deadline(); ok && d.Add(-time.Second).Before(until) {
		until = d.Add(-time.Second)
	}
	return until
}

// leased hands the call the instance's next leased turn still due and
// waits for its moment; ok false: none is left.
func (g *Gate) leased(ctx context.Context, t *turns, c *clock, until time.Time, why string) (Verdict, bool, error) {
	g.leases.Lock()
	at, wait, ok := t.handOut(c.now(), until)
	g.leases.Unlock()
	switch {
	case wait > 0:
		return Verdict{Wait: max(wait, time.Second), Why: why}, true, nil
	case !ok:
		return Verdict{}, false, nil
	}
	return g.admitAt(ctx, c, at)
}

// book takes a lease as the head of the instance's line, at the moment
// it meant to (aim, if set): granted, the call takes its first turn (ok);
// the schedule booked past until, a Wait (ok); else it sleeps until a
// write's round trip before the next turn is due (its new aim), to ask
// again (not ok).
func (g *Gate) book(ctx context.Context, agent string, t *turns, c *clock, until time.Time, why string,
	aim *time.Time) (Verdict, bool, error) {
	g.leases.Lock()
	t.resize()
	size, known, lead := t.size, t.known, t.lead()
	g.leases.Unlock()
	now := c.now()
	meant := *aim
	if meant.IsZero() || meant.After(now) {
		meant = now
	}
	l, next, writes, err := g.Store.lease(ctx, agent, t.limit, size, now, lead, &known)
	g.leases.Lock()
	t.known = known
	if writes > 0 {
		// From the moment it meant to write: a late wake-up delays the
		// lease as a slow write does (none passes on a virtual clock).
		t.observe(c.now().Sub(meant))
	}
	if l.Turns > 0 {
		t.granted(l, c.now())
	}
	g.leases.Unlock()
	switch {
	case err != nil:
		return Verdict{}, true, err
	case l.Turns > 0:
		// Its own write's moment decided its turn (B, schedule).
		at := l.At(0).Add(-t.limit.Tolerance())
		if at.Before(now) {
			at = now
		}
		return g.admitAt(ctx, c, at)
	case next.After(until):
		return Verdict{Wait: max(next.Sub(c.now()), time.Second), Why: why}, true, nil
	}
	*aim = next.Add(-lead)
	if err := g.sleepUntil(ctx, c, *aim); err != nil {
		return Verdict{}, true, err
	}
	return Verdict{}, false, nil
}

// admitAt admits the call at its turn's moment at, once it came.
func (g *Gate) admitAt(ctx context.Context, c *clock, at time.Time) (Verdict, bool, error) {
	if err := g.sleepUntil(ctx, c, at); err != nil {
		return Verdict{}, true, err
	}
	return Verdict{Turned: true, At: at.In(c.at.Location())}, true, nil
}

// clock is a call's time: the now it was asked with, moved on by the real
// time since; or, for a Gate whose Sleep is replaced (virtual: a test's or
// the explorer's clock, on which only sleeps pass time), by its sleeps.
type clock struct {
	at, began time.Time
	virtual   bool
	slept     time.Duration
}

func (c *clock) now() time.Time {
	if c.virtual {
		return c.at.Add(c.slept)
	}
	return c.at.Add(time.Since(c.began))
}

// sleepUntil waits until at on c.
func (g *Gate) sleepUntil(ctx context.Context, c *clock, at time.Time) error {
	d := at.Sub(c.now())
	if d <= 0 {
		return nil
	}
	if err := g.sleep(ctx, d); err != nil {
		return err
	}
	c.slept += d
	return nil
}
