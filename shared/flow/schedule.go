package flow

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/workflow"
)

// An agent's rate schedule is one item of the state table ("~agent/AGENT",
// "rate"): the theoretical arrival time (TAT) of its next turn, kept
// exactly as a run of turns of its rate, TurnBase + Span(TurnsTaken):
//
//	TurnBase    N  the run's start, nanoseconds since the Unix epoch
//	TurnsTaken  N  the turns taken since (fewer than RateCalls: each write
//	               moves TurnBase on by whole periods, exactly)
//	RateCalls   N  the rate they are turns of: RateCalls every RatePer
//	RatePer     N  nanoseconds
//	NextAt      N  the TAT rounded up to the millisecond: all a version
//	               before this one kept (in milliseconds, its interval
//	               rounded down), read and moved on by it still
//	RateLimit   S  the limit as a file writes it, for an operator's view
//
// Why no window of Per holds more than Rate.Most() calls, across leases
// and instances. Let T = Per/Calls (a rational number of nanoseconds) and
// τ = Rate.Tolerance(), (Burst-1)·T rounded down.
//
// (A) Turns are granted in the order of the item's conditional writes,
// each write granting consecutive turns. Turn n of a run is at θ = TurnBase
// + ⌈n·T⌉ (Span); a write continues the run where its TAT is, or starts a
// new run at a TurnBase no earlier than the TAT (the schedule was idle, or
// an earlier version's NextAt was ahead). So for any two granted turns,
// i-th and j-th in that order, θj − θi ≥ ⌊(j−i)·T⌋: within a run, ⌈a⌉ −
// ⌈b⌉ ≥ ⌊a − b⌋; across runs the later start is at or past the earlier
// TAT, which only adds.
//
// (B) A turn is spent by one call, admitted at a moment m with θ − τ ≤ m ≤
// θ: Take's turn at its now (θ = max(TAT, now) ≤ now + τ); a Gate's leased
// turn at the later of θ − τ and the moment its instance handed it out,
// which is never past θ (a turn whose time passed is dropped, never spent
// late), the lease's first at the later of θ − τ and its write's moment.
//
// Take any window [w, w+Per). Its calls' turns have θ ≥ m ≥ w and θ ≤ m +
// τ < w + Per + τ (B). Were Most+1 = Calls+Burst of them in it, the first
// and the last would be at least ⌊(Calls+Burst−1)·T⌋ = Per + τ apart (A,
// Calls·T = Per being whole nanoseconds), more than [w, w+Per+τ) spans.
// So no window holds more than Most: Calls, or Calls+Burst−1 with a burst,
// however many instances take turns, one a write or a lease of many. The
// moments are on the instances' clocks (Lambda's are NTP-synchronised); a
// service receives each call a request's latency later.
type schedule struct {
	exists bool  // the item exists
	base   int64 // TurnBase (ns)
	taken  int64 // TurnsTaken
	calls  int64 // RateCalls (0: an earlier version's item, NextAt alone)
	per    int64 // RatePer (ns)
	nextAt int64 // NextAt (ms)
}

// scheduleItem is the schedule as stored.
type scheduleItem struct {
	TurnBase   *int64 `dynamodbav:"TurnBase"`
	TurnsTaken int64  `dynamodbav:"TurnsTaken"`
	RateCalls  int64  `dynamodbav:"RateCalls"`
	RatePer    int64  `dynamodbav:"RatePer"`
	NextAt     *int64 `dynamodbav:"NextAt"`
	RateLimit  string `dynamodbav:"RateLimit"`
}

// decodeSchedule is the schedule of an item as read (nil or empty: none),
// and its RateLimit.
func decodeSchedule(item map[string]types.AttributeValue) (schedule, string, error) {
	var it scheduleItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return schedule{}, "", err
	}
	if it.NextAt == nil && it.TurnBase == nil {
		return schedule{}, it.RateLimit, nil
	}
	s := schedule{exists: true}
	if it.NextAt != nil {
		s.nextAt = *it.NextAt
	}
	if it.TurnBase != nil && it.RateCalls > 0 && it.RatePer > 0 {
		s.base, s.taken, s.calls, s.per = *it.TurnBase, it.TurnsTaken, it.RateCalls, it.RatePer
	}
	return s, it.RateLimit, nil
}

// ceilMs is ns rounded up to the millisecond.
func ceilMs(ns int64) int64 { return (ns + int64(time.Millisecond) - 1) / int64(time.Millisecond) }

// ownTAT is the TAT the item's own turns make: its run's end, exactly (up
// to the ns), or NextAt for an earlier version's item; 0: none.
func (s schedule) ownTAT() int64 {
	if s.calls == 0 {
		return s.nextAt * int64(time.Millisecond)
	}
	return s.base + int64(workflow.Rate{Calls: int(s.calls), Per: time.Duration(s.per)}.Span(s.taken))
}

// cont is where limit's turns continue the schedule: the base of the run
// and the index of its next turn; its TAT is base + limit.Span(from).
func (s schedule) cont(limit workflow.Rate) (base, from int64) {
	switch {
	case !s.exists:
		return 0, 0
	case s.calls == 0: // an earlier version's: a run from its NextAt
		return s.nextAt * int64(time.Millisecond), 0
	case s.nextAt > ceilMs(s.ownTAT()):
		// An earlier version took turns since (it moves NextAt alone).
		return s.nextAt * int64(time.Millisecond), 0
	case s.calls == int64(limit.Calls) && s.per == int64(limit.Per):
		return s.base, s.taken
	}
	return s.ownTAT(), 0 // another rate's turns: a run of this one from their end
}

// tat is the schedule's theoretical arrival time, in ns (0: none): its own
// turns' end, exactly, or NextAt if an earlier version moved it past that.
func (s schedule) tat() int64 {
	switch own := s.ownTAT(); {
	case !s.exists:
		return 0
	case s.nextAt > ceilMs(own):
		return s.nextAt * int64(time.Millisecond)
	default:
		return own
	}
}

// plan is what a write of the schedule decides.
type plan struct {
	lease Lease    // the turns granted (none: not now)
	next  int64    // none granted: when the first may go, TAT − τ (ns)
	after schedule // granted: the item as the write leaves it
	idle  bool     // granted: a new run, the schedule's TAT at most its start
	start int64    // the new run's start (idle)
}

// take plans a lease of up to turns turns of limit at now (ns), its first
// due no later than ahead past now (the write's round trip: its turns are
// handed out once it returns). A run in use goes on where it is (its first
// turn, between now and now + ahead, is the writer's, decided at now); an
// idle schedule, its TAT past, starts a new run at now, the writer's turn
// (GCRA's: no gap is left in the schedule, and the turns after it that
// pass before the write returns are gone).
func (s schedule) take(limit workflow.Rate, turns int, now, ahead int64) plan {
	base, from := s.cont(limit)
	tat := base + int64(limit.Span(from))
	if due := tat - int64(limit.Tolerance()); due > now+ahead {
		return plan{next: due}
	}
	p := plan{}
	if tat < now {
		base, from, p.idle, p.start = now, 0, true, now
	}
	p.lease = Lease{limit: limit, base: base, from: from, Turns: turns}
	to := from + int64(turns)
	fold := to / int64(limit.Calls) // whole periods: the run's start moves on exactly
	base, to = base+fold*int64(limit.Per), to-fold*int64(limit.Calls)
	p.after = schedule{exists: true, base: base, taken: to, calls: int64(limit.Calls), per: int64(limit.Per)}
	p.after.nextAt = ceilMs(p.after.ownTAT())
	return p
}

// update is the write of p: the schedule after it, on the condition that
// the item is still s (exact), or, for an idle plan not yet checked
// against a read, that its TAT is not past the new run's start.
func (p plan) update(s schedule, exact bool, limit workflow.Rate) *dynamoexpr.Builder {
	b := dynamoexpr.New()
	a := p.after
	base, taken, nextAt := b.Plain("TurnBase"), b.Plain("TurnsTaken"), b.Plain("NextAt")
	b.Set(base, b.Int(a.base))
	b.Set(taken, b.Int(a.taken))
	b.Set(b.Plain("RateCalls"), b.Int(a.calls))
	b.Set(b.Plain("RatePer"), b.Int(a.per))
	b.Set(nextAt, b.Int(a.nextAt))
	b.Set(b.Plain("RateLimit"), b.String(limit.String()))
	switch {
	case p.idle && !exact:
		// NextAt is the TAT rounded up (or an earlier version's TAT): at
		// most the start's millisecond, the TAT is at most the start.
		b.If(dynamoexpr.Or(dynamoexpr.NotExists(nextAt), dynamoexpr.LessOrEqual(nextAt, b.Int(p.start/int64(time.Millisecond)))))
	case !s.exists:
		b.If(dynamoexpr.NotExists(nextAt), dynamoexpr.NotExists(base))
	case s.calls == 0:
		b.If(dynamoexpr.NotExists(base), dynamoexpr.Equal(nextAt, b.Int(s.nextAt)))
	default:
		b.If(dynamoexpr.Equal(base, b.Int(s.base)), dynamoexpr.Equal(taken, b.Int(s.taken)), dynamoexpr.Equal(nextAt, b.Int(s.nextAt)))
	}
	return b
}

// Lease is consecutive turns of an agent's rate limit taken in one write:
// turn i is due At(i).
type Lease struct {
	limit workflow.Rate
	base  int64 // its run's start (ns)
	from  int64 // the index of its first turn in the run
	// Turns is how many turns it holds (0: none).
	Turns int
}

// At is when turn i of the lease is due.
func (l Lease) At(i int) time.Time {
	return time.Unix(0, l.base+int64(l.limit.Span(l.from+int64(i)))).UTC()
}
