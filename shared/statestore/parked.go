package statestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// A wait for an event and a timer are parked records: made ready like any
// step (due at a pickup deadline, in case the start is lost), then armed by
// the Scheduler in one write, due at the wait's timeout or the timer's wake
// time. While parked, nothing runs and nothing circulates: the order's
// deadline-index entry says when the Supervisor looks next. The Supervisor
// marks a timer whose time came (and a wait that times out into going on)
// woken and has the Scheduler complete it; an event completes a wait
// (Complete with Parked and Event), or, arriving before the order reached
// the wait, is kept in the order's Events until it does.

// Arm parks a ready, unarmed wait or timer until due (for a wait with no
// timeout: the order's deadline). It returns the record armed and the
// round's events received so far (a kept event completes the wait at once).
// A record not ready, already armed, or of another kind gets ErrStale.
func (s *Store) Arm(ctx context.Context, orderID string, r workflow.Ref, kind workflow.Kind, due, now time.Time, version string) (Step, map[string]string, error) {
	ch := newChange(now)
	rec := ch.rec(r)
	ch.require(rec, recState(workflow.Pending), recHas("d"), recLacks("wa"), recIs("ki", text(string(kind))),
		orderIs(workflow.Pending))
	ch.runs(version)
	ch.b.Set(ch.field(rec, "wa"), ch.at())
	if !due.IsZero() {
		ch.b.Set(ch.field(rec, "d"), ch.b.Int(ms(due)))
	} else {
		ch.b.Set(ch.field(rec, "d"), ch.attr("Dl"))
	}
	in, err := s.fieldsInput(ch, orderID)
	if err != nil {
		return Step{}, nil, err
	}
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.updateItem(ctx, ch, in)
	if isConditionFailed(err) {
		return Step{}, nil, ErrStale
	}
	if err != nil {
		return Step{}, nil, fmt.Errorf("arm %s/%s: %w", orderID, sortKey(r), err)
	}
	var it stateItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return Step{}, nil, fmt.Errorf("decode armed %s/%s: %w", orderID, sortKey(r), err)
	}
	st := it.step(sortKey(r), it.view())
	// A timeout or a wake time earlier than the order's next look pulls
	// that look in: else a short timer would wake at the look before it.
	return st, it.Events, s.pullIn(ctx, it, ms(st.DueAt))
}

// ErrEventRefused says why an event cannot be taken: the order ended, no
// step of it waits for the event, or the round already received it under
// another eventId.
type ErrEventRefused struct{ Reason string }

func (e *ErrEventRefused) Error() string { return e.Reason }

// IsEventRefused reports whether err is an *ErrEventRefused.
func IsEventRefused(err error) bool {
	var e *ErrEventRefused
	return errors.As(err, &e)
}

// EventState is where an order stands for an event it is sent.
type EventState struct {
	Round     int
	Workflow  string // the order's workflow and its version
	WfVersion string
	// Waiting: the wait record is ready (or armed): the event completes it.
	Waiting bool
	// Received is the eventId the round already took for the event ("":
	// none).
	Received string
	// EndsAt, for an armed wait, is when it times out (or the order's
	// deadline passes): an event later than it is too late.
	EndsAt time.Time
}

// EventState is where the order stands for an event of the wait at r: an
// *ErrEventRefused if it can take none.
func (s Snapshot) EventState(r workflow.Ref, event string) (EventState, error) {
	it := s.it
	st := EventState{Round: it.Round, Workflow: it.Workflow, WfVersion: it.WfVersion, Received: it.Events[event]}
	rec, ok := it.Recs[sortKey(r)]
	switch {
	case workflow.State(it.State).Ended():
		return st, &ErrEventRefused{fmt.Sprintf("order %s is %s: it waits for nothing", it.OrderID, it.State)}
	case it.State == string(workflow.Compensating):
		return st, &ErrEventRefused{fmt.Sprintf("order %s is being undone (%s): it waits for nothing", it.OrderID, it.State)}
	case !ok || rec.Kind != string(workflow.KindEvent):
		return st, &ErrEventRefused{fmt.Sprintf("order %s's workflow waits for no event %q", it.OrderID, event)}
	case rec.State != string(workflow.Pending) && st.Received == "":
		return st, &ErrEventRefused{fmt.Sprintf("order %s no longer waits for %q: its step %s is %s", it.OrderID, event, rec.Name, rec.State)}
	}
	// A held order starts nothing: its event is kept for when it goes on.
	st.Waiting = rec.State == string(workflow.Pending) && rec.DueAt != 0 && it.State != string(workflow.Held)
	if st.Waiting && rec.Armed != 0 && rec.Woken == 0 {
		st.EndsAt = fromMs(rec.DueAt)
	}
	return st, nil
}

// KeepEvent keeps an event the order does not wait for yet (its wait
// record not ready), for the wait to take when the order reaches it. It is
// conditional on exactly that (the wait not ready, the order running
// forward, no event of the name kept): the order's other writes do not
// refuse it. A wait made ready meanwhile gets ErrStale, and the caller
// delivers the event instead.
func (s *Store) KeepEvent(ctx context.Context, orderID string, r workflow.Ref, event, eventID, version string, now time.Time) error {
	ch := newChange(now)
	ch.runs(version) // r is its wait in that version: a move since gets ErrStale, and the caller reads the order again
	// Not ready in an order running forward, or in a held one (where a
	// ready wait takes it when the order goes on).
	ch.require(ch.rec(r), recState(workflow.Pending), anyOf(allOf(recLacks("d"), orderIs(workflow.Pending)), orderIs(workflow.Held)),
		eventAbsent(event))
	ch.b.Set(ch.b.Key(ch.attr("Evt"), event), ch.b.String(eventID))
	return s.update(ctx, orderID, ch, fmt.Sprintf("keep event %s of %s", event, orderID))
}
