package outcome

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Event is an event sent to an order (a message on the orders queue, or
// sasctl signal): to the step that waits for it by name, or, with a token,
// to an async step's attempt (its service's callback).
type Event struct {
	OrderID string
	Name    string // the event a wait waits for
	EventID string // a repeat of one eventId is a no-op
	Token   string // an async attempt's callback
	Data    json.RawMessage
	// DataBytes is the data's size as sent, when Data is its claim check or
	// it sealed (0: len(Data)): the result limit is the sender's data's.
	DataBytes int
	Error     string // a callback's refusal: the step fails for good
	Sender    string // who sent it, as its queue says (SQS's SenderId)
	Now       time.Time
	// RepeatOnly: the event was taken before, and what it was sent with is
	// no longer to be had (a body sent by pointer that Submission wrote over
	// once it took it): a repeat of the event taken is a no-op; anything
	// else is refused, never taken without its data.
	RepeatOnly bool
}

// gone refuses a RepeatOnly event that is not a repeat.
func (e Event) gone() error {
	what, then := fmt.Sprintf("event %q (eventId %s)", e.Name, e.EventID), "send it again to take it"
	if e.Token != "" {
		what, then = "callback", "its token is spent"
	}
	return &Refused{fmt.Sprintf("%s for order %s: it was taken before, and the body its pointer names holds its data no longer "+
		"(written over once taken), so it cannot be taken again: %s", what, e.OrderID, then)}
}

// size is the event's data's size as sent.
func (e Event) size() int { return cmp.Or(e.DataBytes, len(e.Data)) }

// Delivered is what an event did.
type Delivered struct {
	Recorded
	Ref  workflow.Ref // the record it completes (or will)
	Name string       // that record's action
	// Outcome is what was recorded for that record, when Recorded: its
	// attempt (a callback's) and its refusal (the callback's, or its answer
	// over the result limit), for the reply that follows it (Reply).
	Outcome Attempt
	// Kept: the order does not wait for the event yet; the wait takes it
	// when the order reaches it. Repeat: the event was taken before.
	Kept, Repeat bool
	// Slot, for a callback recorded, is the slot of its agent's calls in
	// flight its attempt held (Key "": none), to let go.
	Slot keyline.Slot
}

// Refused says why an event cannot be taken: the reason goes with it to the
// dead-letter queue.
type Refused struct{ Reason string }

func (e *Refused) Error() string { return e.Reason }

// IsRefused reports whether err refuses an event for good.
func IsRefused(err error) bool {
	var r *Refused
	return errors.As(err, &r) || statestore.IsEventRefused(err)
}

// Event takes an event for an order running def: completes the wait for it
// (its data the step's result) and moves the order on, or keeps it for the
// wait, or, with a token, records the async attempt's outcome. An event
// meets the order's other writes as any outcome does: it is decided again on
// the newer order, never refused for losing a race.
func (r Recorder) Event(ctx context.Context, def workflow.Definition, e Event) (Delivered, error) {
	if e.Token != "" {
		return r.callback(ctx, def, e)
	}
	if e.size() > def.Limit() {
		return Delivered{}, &Refused{fmt.Sprintf("event for order %s: its data is %d bytes, over workflow %s's %d-byte result limit",
			e.OrderID, e.size(), def.Name, def.Limit())}
	}
	i, ok := def.WaitFor(e.Name)
	if !ok {
		return Delivered{}, &Refused{fmt.Sprintf("workflow %s waits for no event %q", def.Name, e.Name)}
	}
	if w := def.Steps[i].Wait; !w.Accepts(e.Sender) {
		return Delivered{}, &Refused{fmt.Sprintf("event %q for order %s: its sender %q is not one step %s takes it from (senders: %s)",
			e.Name, e.OrderID, e.Sender, def.Steps[i].Name, strings.Join(w.Senders, ", "))}
	}
	d := Delivered{Ref: workflow.Ref{Index: i}, Name: def.Steps[i].Name}
	d.Outcome = Attempt{OrderID: e.OrderID, Ref: d.Ref, Name: d.Name, Now: e.Now}
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	stored := false
	for try := 0; ; try++ {
		snap, err := r.Store.Read(ctx, e.OrderID)
		if err != nil {
			return d, err
		}
		if err := runs(snap, def); err != nil {
			// Moved since its definition was read: its wait may be another
			// record now, and a move leaves behind the data of an event not
			// yet kept. The caller takes it again on the version it runs.
			return d, err
		}
		st, err := snap.EventState(d.Ref, e.Name)
		if st.Received == e.EventID && (err == nil || statestore.IsEventRefused(err)) {
			// A repeat of the event the order took is a no-op, also once
			// the order moved on or ended (a webhook retried, a redelivery).
			d.Repeat = true
			return d, nil
		}
		switch {
		case err != nil:
			return d, err
		case e.RepeatOnly:
			return d, e.gone()
		case st.Received != "":
			return d, &Refused{fmt.Sprintf("order %s already received event %q (eventId %s)", e.OrderID, e.Name, st.Received)}
		case !st.EndsAt.IsZero() && !st.EndsAt.After(e.Now):
			// Too late, whether or not the Supervisor has swept since: the
			// timeout decides, and no retry changes that.
			return d, &Refused{fmt.Sprintf("event %q for order %s is too late: step %s's wait ended at %s",
				e.Name, e.OrderID, d.Name, st.EndsAt.UTC().Format(time.RFC3339))}
		}
		if !stored {
			err = r.Store.PutResult(ctx, statestore.Result{OrderID: e.OrderID, Ref: d.Ref, Name: d.Name, Round: st.Round,
				EventID: e.EventID, JSON: data, Now: e.Now, Lifetime: def.Lifetime(), Keep: snap.Retention()})
			if errors.Is(err, statestore.ErrStale) {
				return d, &Refused{fmt.Sprintf("order %s is taking another event %q", e.OrderID, e.Name)}
			}
			if err != nil {
				return d, err
			}
			stored = true
		}
		if st.Waiting {
			f := &statestore.Fence{Ref: d.Ref, Parked: workflow.KindEvent, Event: e.Name, EventID: e.EventID}
			d.Recorded, err = r.settle(ctx, def, e.OrderID, &snap, f, result{bytes: len(data)}, e.Now)
			if err != nil || !d.Recorded.Stale {
				return d, err
			}
		} else if err = r.Store.KeepEvent(ctx, e.OrderID, d.Ref, e.Name, e.EventID, def.Version, e.Now); !errors.Is(err, statestore.ErrStale) {
			d.Kept = err == nil
			return d, err
		}
		// The wait became ready meanwhile, or was taken, or the order moved
		// on: where it stands now decides.
		if err := pause(ctx, try); err != nil {
			return d, err
		}
	}
}

// Wake completes a parked record the Supervisor found due (marked woken):
// a timer whose time came; a wait whose timeout lets the order go on (its
// result null), or whose event was kept (its data the result).
func (r Recorder) Wake(ctx context.Context, def workflow.Definition, orderID string, ref workflow.Ref, now time.Time) (Recorded, error) {
	if ref.Undo || ref.Index >= len(def.Steps) || def.Steps[ref.Index].Kind() == workflow.KindAgent {
		return Recorded{Stale: true}, nil
	}
	st := def.Steps[ref.Index]
	snap, err := r.Store.Read(ctx, orderID)
	if errors.Is(err, statestore.ErrNotFound) {
		return Recorded{Stale: true}, nil
	}
	if err != nil {
		return Recorded{}, err
	}
	f := &statestore.Fence{Ref: ref, Parked: st.Kind(), Due: true}
	res := result{}
	if st.Wait != nil {
		es, err := snap.EventState(ref, st.Wait.Event)
		if statestore.IsEventRefused(err) {
			return Recorded{Stale: true}, nil
		}
		switch {
		case es.Received != "": // its event came: its data was stored when it was kept
			f.Event, f.EventID, f.Due, res.bytes = st.Wait.Event, es.Received, false, 1
		case !st.Wait.Continue:
			// No event and no going on at the timeout: only its failure
			// (the Supervisor's) can end it. A stale wake changes nothing.
			return Recorded{Stale: true}, nil
		}
	}
	return r.settle(ctx, def, orderID, &snap, f, res, now)
}

// Refuse fails parked record ref (armed due now) for good, with reason:
// what it needs from the order cannot be had (a timer's until that gives no
// time).
func (r Recorder) Refuse(ctx context.Context, def workflow.Definition, orderID string, ref workflow.Ref, reason string, now time.Time) (Recorded, error) {
	f := &statestore.Fence{Ref: ref, Parked: def.Steps[ref.Index].Kind(), Due: true}
	return r.settle(ctx, def, orderID, nil, f, result{refusal: reason}, now)
}

// callback records an async attempt's outcome from its service's event,
// fenced by the attempt and the token's nonce: a token is single-use, and
// refused once its attempt was recovered or the order ended. The token is
// checked against the record before anything is written, so a token that
// names another attempt writes no result; a repeat of the callback that
// recorded the attempt's outcome is a no-op. An answer over the workflow's
// result limit fails the step for good (its effect happened: its own undo
// runs), as an Agent's would.
func (r Recorder) callback(ctx context.Context, def workflow.Definition, e Event) (Delivered, error) {
	t, err := ParseToken(e.Token)
	if err != nil || t.OrderID != e.OrderID {
		return Delivered{}, &Refused{fmt.Sprintf("event for order %s: its token is not one this pipeline gave (%v)", e.OrderID, err)}
	}
	a, ok := def.Action(t.Ref)
	if !ok {
		return Delivered{}, &Refused{fmt.Sprintf("event for order %s: its token names no step of workflow %s", e.OrderID, def.Name)}
	}
	d := Delivered{Ref: t.Ref, Name: a.Name}
	verdict, rec, err := r.tokenVerdict(ctx, t)
	if verdict == tokenCurrent {
		d.Slot = keyline.Slot{Agent: a.Agent, Key: rec.Slot, Holder: keyline.Holder(e.OrderID, t.Ref, rec.Round, t.Attempt)}
	}
	switch {
	case err != nil:
		return d, err
	case verdict == tokenRepeat:
		d.Repeat = true
		return d, nil
	case e.RepeatOnly:
		return d, e.gone()
	case verdict == tokenRefused:
		return d, &Refused{fmt.Sprintf("event for order %s: the token of attempt %d of %s was used, or its attempt recovered, or the order ended",
			e.OrderID, t.Attempt, a.Name)}
	}
	at := Attempt{OrderID: e.OrderID, Ref: t.Ref, Name: a.Name, Attempt: t.Attempt, Round: t.Round, Token: t.Nonce,
		Refusal: e.Error, Now: e.Now}
	switch {
	case e.Error == "" && e.size() > def.Limit():
		at.Refusal, at.Ran = fmt.Sprintf("%s answered %d bytes, over workflow %s's %d-byte result limit",
			a.Name, e.size(), def.Name, def.Limit()), true
	case e.Error == "" && len(e.Data) > 0:
		err := r.Store.PutResult(ctx, statestore.Result{OrderID: e.OrderID, Ref: t.Ref, Name: a.Name, Round: t.Round,
			Attempt: t.Attempt, JSON: e.Data, Now: e.Now, Lifetime: def.Lifetime(), Keep: rec.Retention()})
		if errors.Is(err, statestore.ErrStale) {
			return d, &Refused{fmt.Sprintf("event for order %s: the token's attempt %d of %s is no longer current", e.OrderID, t.Attempt, a.Name)}
		}
		if err != nil {
			return d, err
		}
		at.ResultBytes = e.size()
	}
	d.Outcome = at
	d.Recorded, err = r.Record(ctx, def, at)
	if err == nil && !d.Recorded.Stale && d.Recorded.Slot != "" {
		// The slot as the write found it noted: the Agent may have noted its
		// acceptance after this callback's token was read.
		d.Slot = keyline.Slot{Agent: a.Agent, Key: d.Recorded.Slot, Holder: keyline.Holder(e.OrderID, t.Ref, max(t.Round, 1), t.Attempt)}
	}
	if err != nil || !d.Recorded.Stale {
		return d, err
	}
	// Not recorded: a duplicate of this callback recorded it meanwhile (a
	// repeat), or the attempt was recovered, or the order moved on.
	if v, _, err := r.tokenVerdict(ctx, t); err != nil || v == tokenRepeat {
		d.Repeat, d.Recorded = err == nil, Recorded{}
		return d, err
	}
	return d, &Refused{fmt.Sprintf("event for order %s: the token of attempt %d of %s was used, or its attempt recovered, or the order ended",
		e.OrderID, t.Attempt, a.Name)}
}

// tokenVerdict is what the record says of a callback's token.
type tokenVerdict int

const (
	tokenCurrent tokenVerdict = iota // the record's running attempt, with its nonce
	tokenRepeat                      // the attempt's outcome is recorded already
	tokenRefused                     // another attempt's, or one recovered, or the order ended
)

func (r Recorder) tokenVerdict(ctx context.Context, t Token) (tokenVerdict, statestore.Step, error) {
	rec, err := r.Store.Record(ctx, t.OrderID, t.Ref)
	if errors.Is(err, statestore.ErrNotFound) {
		return tokenRefused, rec, nil
	}
	if err != nil {
		return tokenRefused, rec, err
	}
	sameAttempt := rec.Round == max(t.Round, 1) && rec.Attempt == t.Attempt
	switch {
	case sameAttempt && (rec.State == workflow.Processed || (rec.State == workflow.Error && (rec.Cause == workflow.Refused || rec.Cause == workflow.Oversized))):
		return tokenRepeat, rec, nil
	case sameAttempt && rec.State == workflow.Processing && rec.Token == t.Nonce:
		return tokenCurrent, rec, nil
	}
	return tokenRefused, rec, nil
}

// Token names one async attempt: its service's callback carries it back.
// It names its record whole, a forEach item's included (a token of an
// earlier version, with no item, names a step that runs once).
type Token struct {
	OrderID string
	Ref     workflow.Ref
	Round   int
	Attempt int
	Nonce   string // stored with the claim: only the current attempt's token is taken
}

// String encodes the token.
func (t Token) String() string {
	b, _ := json.Marshal([]any{t.OrderID, t.Ref.Index, t.Ref.Undo, t.Round, t.Attempt, t.Nonce, t.Ref.Item})
	return "sas1." + base64.RawURLEncoding.EncodeToString(b)
}

// ParseToken decodes a token String made.
func ParseToken(s string) (Token, error) {
	var t Token
	body, ok := strings.CutPrefix(s, "sas1.")
	if !ok || len(s) > 512 {
		return t, errors.New("not a sas1 token")
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return t, fmt.Errorf("token: %w", err)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) < 6 || len(parts) > 7 {
		return t, errors.New("token: not six or seven fields")
	}
	for i, dst := range []any{&t.OrderID, &t.Ref.Index, &t.Ref.Undo, &t.Round, &t.Attempt, &t.Nonce, &t.Ref.Item}[:len(parts)] {
		if err := json.Unmarshal(parts[i], dst); err != nil {
			return t, fmt.Errorf("token field %d: %w", i, err)
		}
	}
	if t.OrderID == "" || t.Nonce == "" || t.Attempt < 1 || t.Ref.Index < 0 || t.Ref.Item < 0 {
		return t, errors.New("token: incomplete")
	}
	return t, nil
}
