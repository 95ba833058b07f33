package workflow

import "time"

// MaxRecoveryDelay caps the supervisor's backoffs and its intervals between
// looks at a waiting record; it is also the longest delay an SQS message can
// carry.
const MaxRecoveryDelay = 15 * time.Minute

// The Supervisor keeps three clocks apart (Temporal's vocabulary):
//
//   - queue wait, from ready to claimed: the record's message waits in the
//     scheduler queue or its agent's request queue, or was lost. Never a
//     failure: the Supervisor re-sends the message at growing intervals, and
//     holds back while a queue it may wait in is backlogged;
//   - an attempt, from claimed to completed, judged by its CompleteBy: an
//     attempt not completed by then failed (FailureCount + 1, retried after a
//     growing backoff, or at the threshold Error). Its Agent records its
//     outcome before replying, so no outcome of it can be waiting in a queue;
//   - the order's deadline: past it the order fails for good. It is the one
//     clock that fails an order without a fault seen.

// Found is what the Supervisor knows of a record it found due.
type Found struct {
	Action       Action
	State        State // Pending: ready, not claimed; Processing: claimed
	FailureCount int
	Waited       time.Duration // how long it has been ready (Pending)
	Overdue      time.Duration // how long past its CompleteBy it is (Processing)
	PastDeadline bool          // the order's deadline passed
	Cancelled    bool          // the order is being cancelled: nothing starts again
	// Backlogged: a queue the message that starts the ready record
	// (Pending) may be waiting in holds a backlog.
	Backlogged bool
	// BacklogEnds: the backlog is its agent holding its calls (paused, or
	// slowed by its service), which may end this soon; the next look comes
	// then and a pickup later, not at the growing interval.
	BacklogEnds time.Duration
	// Parked: a wait or a timer armed by the Scheduler, due now: a timer's
	// time came, or a wait's timeout passed (Continue: the order goes on).
	Parked   Kind
	Continue bool
	// EventKept: the wait's event was received but its delivery lost.
	EventKept bool
	// SinceWoken: a parked record the Supervisor woke this long ago and
	// finds again (0: not woken): its wake waits in the scheduler queue
	// (Backlogged) or was lost.
	SinceWoken time.Duration
}

// Verdict is what the Supervisor does with a record found due.
type Verdict int

// The verdicts, from the mildest.
const (
	Resend Verdict = iota // not claimed, no backlog to explain it: re-send its message (a lost one is repaired)
	Hold                  // a backlog explains the wait: send nothing, look again later
	Retry                 // the attempt failed: FailureCount + 1, ready again after a backoff
	GiveUp                // the threshold or the order's deadline is reached: Error, alert, compensation
	Wake                  // a timer's time came, or a wait that goes on timed out: the Scheduler completes it
)

// Decision is the Supervisor's decision for a record found due.
type Decision struct {
	Verdict      Verdict
	FailureCount int           // the record's FailureCount after the decision
	After        time.Duration // Resend, Hold: when to look again; Retry: the backoff before it is ready
}

// Decide returns what the Supervisor does with a record found due; pickup is
// the deployment's pickup timeout, the unit of its intervals between looks.
// FailureCount never passes MaxFailures, and only an attempt that did not
// complete adds to it.
func Decide(f Found, pickup time.Duration) Decision {
	switch {
	case f.PastDeadline:
		return Decision{Verdict: GiveUp, FailureCount: f.FailureCount}
	case f.SinceWoken > 0 && f.Backlogged:
		// Its wake waits behind a backlog: as a ready step's start does.
		return Decision{Verdict: Hold, FailureCount: f.FailureCount, After: WaitInterval(pickup, f.SinceWoken)}
	case f.Parked == KindTimer || (f.Parked == KindEvent && (f.Continue || f.EventKept)):
		// Wake it (again, if the wake was lost), and look again later, at
		// growing intervals, in case this wake is lost too.
		return Decision{Verdict: Wake, FailureCount: f.FailureCount, After: WaitInterval(pickup, f.SinceWoken)}
	case f.Parked == KindEvent:
		return Decision{Verdict: GiveUp, FailureCount: f.FailureCount} // no event by its timeout
	case f.State == Pending && f.Backlogged:
		after := WaitInterval(pickup, f.Waited)
		if f.BacklogEnds > 0 {
			after = min(after, f.BacklogEnds+pickup)
		}
		return Decision{Verdict: Hold, FailureCount: f.FailureCount, After: after}
	case f.State == Pending:
		return Decision{Verdict: Resend, FailureCount: f.FailureCount, After: WaitInterval(pickup, f.Waited)}
	case f.Cancelled:
		// Nothing starts again: an attempt that did not complete is given
		// up on (its outcome unknown, its own undo runs).
		return Decision{Verdict: GiveUp, FailureCount: f.FailureCount}
	}
	n := f.FailureCount + 1
	if n >= f.Action.MaxFailures {
		return Decision{Verdict: GiveUp, FailureCount: f.Action.MaxFailures}
	}
	return Decision{Verdict: Retry, FailureCount: n, After: RecoveryDelay(f.Action.RetryBackoff, n)}
}

// WaitInterval is how long the Supervisor leaves a ready record it found
// unclaimed, having waited so far: as long again (at least pickup, at most
// MaxRecoveryDelay). So it looks at p, 2p, 4p, 8p… after the record became
// ready, and re-sends its message at most once per look: a few duplicates
// per step, however long the wait.
func WaitInterval(pickup, waited time.Duration) time.Duration {
	return min(max(pickup, waited), MaxRecoveryDelay)
}

// RecoveryDelay is base doubled for each earlier failure, capped at
// MaxRecoveryDelay: base, 2·base, 4·base, …
func RecoveryDelay(base time.Duration, failureCount int) time.Duration {
	if base <= 0 || failureCount < 1 {
		return 0
	}
	d := base
	for i := 1; i < failureCount; i++ {
		d *= 2
		if d >= MaxRecoveryDelay {
			return MaxRecoveryDelay
		}
	}
	return min(d, MaxRecoveryDelay)
}
