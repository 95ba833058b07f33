package statestore

import (
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Fence is what makes an outcome the record's to record: it is from the
// record's latest attempt in its round (for an async attempt, with its
// token's nonce), and the record is still claimed by it, or ready to be
// claimed again (the Supervisor gave the attempt back while its outcome was
// on its way: the outcome of a latest attempt stands as long as no later
// attempt began). For a wait or a timer, it is its being parked, in an
// order that runs forward.
type Fence struct {
	Ref     workflow.Ref
	Attempt int
	Round   int    // the round the attempt ran in (0 for 1)
	Token   string // an async attempt's nonce: a token is refused once its attempt was recovered
	// Parked, for a wait or a timer. Due: only once the Supervisor found its
	// time passed (a timer woken, a wait's timeout let go on). Event, for a
	// wait: the event received, recorded in the same write (the round's
	// Events[Event] = EventID).
	Parked         workflow.Kind
	Due            bool
	Event, EventID string
}

// checks are the fence, at now, written once: the condition of the write
// that records the outcome (condition), and the test of an order as read
// (Holds).
func (f Fence) checks(now time.Time) []check {
	if f.Parked == "" {
		out := []check{recIs("k", number(int64(f.Attempt))), recIs("r", number(int64(max(f.Round, 1)))),
			anyOf(recState(workflow.Processing), allOf(recState(workflow.Pending), recHas("d")))}
		if f.Token != "" {
			out = append(out, recIs("tk", text(f.Token)))
		}
		return out
	}
	out := []check{recState(workflow.Pending), recHas("d"), recIs("ki", text(string(f.Parked))), orderIs(workflow.Pending)}
	if f.Due {
		out = append(out, anyOf(recHas("wk"), recAtMost("d", number(ms(now)))))
	}
	if f.Event != "" {
		out = append(out, anyOf(eventAbsent(f.Event), eventIs(f.Event, f.EventID)))
		if !f.Due {
			// An event after the wait's timeout is too late, whether or not
			// the Supervisor has swept since: the timeout decides.
			out = append(out, anyOf(recLacks("wa"), recAbove("d", number(ms(now))), recHas("wk")))
		}
	}
	return out
}

// Holds reports whether the fence holds on the order as snap has it, at now.
func (f Fence) Holds(snap Snapshot, now time.Time) bool { return f.holds(snap.it, now) }

func (f Fence) holds(it stateItem, now time.Time) bool {
	r, ok := it.Recs[sortKey(f.Ref)]
	return ok && allHold(f.checks(now), it, r)
}

// condition adds the fence to ch, and, for a wait's event, the event
// received.
func (f Fence) condition(ch *change) {
	r := ch.rec(f.Ref)
	ch.require(r, f.checks(ch.now)...)
	if f.Parked != "" && f.Event != "" {
		ch.b.Set(ch.b.Key(ch.attr("Evt"), f.Event), ch.b.String(f.EventID))
	}
}
