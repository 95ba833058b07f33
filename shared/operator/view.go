package operator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The views below are what sasctl prints with --output json and what the
// console shows: camelCase keys, durations as Go durations in a string
// ("20s"), times in RFC 3339 (UTC) and absent when they never happened.
// output.schema.json is their JSON Schema; change them only with it.

// The states a record is shown in beyond its stored ones: in an ended order,
// a record still Pending will never run.
const (
	// NotNeeded: an undo action whose step has nothing to undo (the order
	// was Processed, or the step never completed).
	NotNeeded workflow.State = "NotNeeded"
	// Skipped: a step the order never reached (it failed or was cancelled
	// before).
	Skipped workflow.State = "Skipped"
)

// Duration is a duration that reads and writes JSON as a Go duration's
// text without its zero tails ("20s", "1m", "72h").
type Duration time.Duration

// MarshalJSON writes the duration's text.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(deployment.ShortDuration(time.Duration(d)))
}

// UnmarshalJSON reads a duration's text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string like \"20s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// String is the duration's text.
func (d Duration) String() string { return deployment.ShortDuration(time.Duration(d)) }

// Order is an order's task: its state and what happened to it as a whole.
type Order struct {
	OrderID      string            `json:"orderId"`
	Workflow     string            `json:"workflow"`
	Version      string            `json:"version,omitempty"`
	State        workflow.State    `json:"state"`
	Round        int               `json:"round"`
	Steps        int               `json:"steps"`
	ReplyQueue   string            `json:"replyQueue,omitempty"`
	LastError    string            `json:"lastError,omitempty"`
	CreatedAt    time.Time         `json:"createdAt,omitzero"`
	UpdatedAt    time.Time         `json:"updatedAt,omitzero"`
	CompletedAt  time.Time         `json:"completedAt,omitzero"` // when it ended
	CancelledBy  string            `json:"cancelledBy,omitempty"`
	CancelledAt  time.Time         `json:"cancelledAt,omitzero"`
	CancelReason string            `json:"cancelReason,omitempty"`
	Events       map[string]string `json:"events,omitempty"` // the round's events received: their eventId, by name
	// HeldAt and HeldUntil, for a Held order: since when, and when its
	// hold ends (it is undone then, unless the operator decided before).
	HeldAt    time.Time `json:"heldAt,omitzero"`
	HeldUntil time.Time `json:"heldUntil,omitzero"`
	// FlowWaiting counts the steps that wait for their agent's flow control
	// (their attempt given back before its call), FlowWhy why the first
	// waits: waiting, not failing.
	FlowWaiting int    `json:"flowWaiting,omitempty"`
	FlowWhy     string `json:"flowWhy,omitempty"`
	// Moves are its moves to other versions of its workflow (sasctl
	// migrate): when, from which version to which, by whom.
	Moves []Moved `json:"moves,omitempty"`
	// At are the records it is at (statestore.Spot): what a search by
	// step, agent or reason matches.
	At []At `json:"at,omitempty"`
}

// At is a record an order is at: its step (an undo action's, if Undo),
// agent, state (Pending: ready or waiting; Processing; Error: failed for
// good), an Error's cause, why a ready record waits, and its last error.
type At struct {
	Step  string         `json:"step"`
	Undo  bool           `json:"undo,omitempty"`
	Agent string         `json:"agent,omitempty"`
	State workflow.State `json:"state"`
	Cause string         `json:"cause,omitempty"`
	Why   string         `json:"why,omitempty"`
	Error string         `json:"error,omitempty"`
}

// String is the record in a word or two: its step, and why it failed or
// waits (its cause, its wait, or its error).
func (a At) String() string {
	s := a.Step
	if a.Undo {
		s = "undo " + s
	}
	if why := cmp.Or(a.Cause, a.Why, a.Error); why != "" {
		s += " (" + why + ")"
	}
	return s
}

func atOf(spots []statestore.Spot) []At {
	var out []At
	for _, s := range spots {
		out = append(out, At{Step: s.Step, Undo: s.Undo, Agent: s.Agent, State: s.State, Cause: string(s.Cause), Why: s.Why, Error: s.Error})
	}
	return out
}

// Moved is one move of an order to another version of its workflow.
type Moved struct {
	At   time.Time `json:"at"`
	What string    `json:"what"`
}

// OrderOf is the view of a stored task.
func OrderOf(t statestore.Task) Order {
	return Order{OrderID: t.OrderID, Workflow: t.Workflow, Version: t.Version, State: t.State, Round: t.Round,
		Steps: t.StepCount, ReplyQueue: t.ReplyQueue, LastError: t.LastError, CreatedAt: utc(t.CreatedAt),
		UpdatedAt: utc(t.UpdatedAt), CompletedAt: utc(t.CompletedAt), CancelledBy: t.CancelledBy,
		CancelledAt: utc(t.CancelledAt), CancelReason: t.CancelReason, Events: t.Events, HeldAt: utc(t.HeldAt), HeldUntil: utc(t.HeldUntil),
		FlowWaiting: t.FlowWaiting, FlowWhy: t.FlowWhy, Moves: movesOf(t.Moves), At: atOf(t.At)}
}

func movesOf(events []statestore.Event) []Moved {
	var out []Moved
	for _, e := range events {
		out = append(out, Moved{At: utc(e.At), What: e.What})
	}
	return out
}

// Record is one step or undo action of an order as the operator reads it:
// the record as the store keeps it (statestore.Step: its ref, action,
// attempts, times and last error), and what the view works out of it and of
// its order: its name for people, the state it is shown in, its kind in a
// word, what it waits for and its result. Its JSON (MarshalJSON) is the view
// output.schema.json describes.
type Record struct {
	statestore.Step
	// Name is the record's name for people: its action's, and for one
	// item of a forEach step, #item after it (pack-item#2).
	Name string
	// State is the state it is shown in: its own, but for a Pending record
	// of an ended order, which never runs: NotNeeded or Skipped.
	State workflow.State
	// Kind is what it does, in a word: "agent", "event" (a wait) or
	// "timer".
	Kind string
	// Waiting is what it waits for, while it waits (nil: nothing).
	Waiting *Waiting
	// Result is its service's answer, or its event's data (nil: none).
	Result json.RawMessage
}

// KindText is what the record is, in a word: step, undo, wait (for an
// event), timer, or async (a step whose service answers later).
func (r Record) KindText() string {
	switch {
	case r.Undo:
		return "undo"
	case r.Kind == string(workflow.KindEvent):
		return "wait"
	case r.Kind == string(workflow.KindTimer):
		return "timer"
	case r.Async:
		return "async"
	}
	return "step"
}

// Waiting is what a record waits for while it waits: an event, a time, or
// its service's callback.
type Waiting struct {
	For   string    `json:"for"`             // "event", "timer" or "callback"
	Event string    `json:"event,omitempty"` // the event's name
	Since time.Time `json:"since"`           // when it began to wait (a wait or timer armed; a callback's call claimed)
	Until time.Time `json:"until,omitzero"`  // its timeout, its wake time, or the callback's CompleteBy
	// Why, for "flow" (its agent's flow control holds its call), is for
	// what, and Times how often it has waited so.
	Why   string `json:"why,omitempty"`
	Times int    `json:"times,omitempty"`
}

// What says in words what it waits for: event "approved", a timer, a
// callback.
func (w Waiting) What() string {
	switch w.For {
	case "event":
		return fmt.Sprintf("event %q", w.Event)
	case "timer":
		return "a timer"
	case "flow":
		if w.Times > 0 {
			return fmt.Sprintf("its agent's flow control (%s; given back %d time(s))", w.Why, w.Times)
		}
		return fmt.Sprintf("its agent's flow control (%s)", w.Why)
	}
	return "its service's callback"
}

// recordOf is the view of a stored record of an order in state.
func recordOf(s statestore.Step, task workflow.State, steps map[workflow.Ref]workflow.State) Record {
	s.ReadyAt, s.ClaimedAt, s.CompleteBy = utc(s.ReadyAt), utc(s.ClaimedAt), utc(s.CompleteBy)
	s.DueAt, s.DoneAt = utc(s.DueAt), utc(s.DoneAt)
	return Record{Step: s, Name: s.RecordName(), State: shownState(s, task, steps), Kind: kindName(s.Rec.Kind),
		Waiting: waitingOf(s)}
}

// shownState is the record's state, but for a Pending record of an ended
// order, which will never run: an undo action with nothing to undo is
// NotNeeded, a step never reached Skipped. (In a CompensationFailed order,
// a Pending undo action of a completed step is what a resubmission runs:
// it stays Pending, as do the steps after a pivot that a resubmission
// runs again.)
func shownState(s statestore.Step, task workflow.State, steps map[workflow.Ref]workflow.State) workflow.State {
	if s.Rec.State != workflow.Pending || !task.Ended() {
		return s.Rec.State
	}
	switch {
	case s.Undo && (task == workflow.Processed || steps[workflow.Ref{Index: s.Index, Item: s.Item}] != workflow.Processed):
		return NotNeeded
	case !s.Undo && (task == workflow.Failed || task == workflow.Cancelled):
		return Skipped
	}
	return s.Rec.State
}

// waitingOf says what the record waits for, if it waits: a wait or timer
// the Scheduler armed, or an async step's claimed attempt.
func waitingOf(s statestore.Step) *Waiting {
	switch f := s.WaitsFor(); f {
	case statestore.ForEvent, statestore.ForTimer:
		return &Waiting{For: string(f), Event: s.Event, Since: utc(s.Armed), Until: utc(s.DueAt)}
	case statestore.ForCallback:
		return &Waiting{For: string(f), Since: utc(s.ClaimedAt), Until: utc(s.CompleteBy)}
	case statestore.ForFlow:
		// Its agent's flow control gave its attempt back before the call:
		// it waits for its rate turn, a slot of its key, a pause's end or
		// its service's back-off, and is claimed again then.
		return &Waiting{For: string(f), Why: s.FlowWhy, Times: s.FlowWaits, Since: utc(s.ReadyAt)}
	}
	return nil
}

// Clock is t in UTC for a table: its time of day if it is on now's day,
// else its day too (a wait's end may be days away); "-" if it never
// happened.
func Clock(t, now time.Time) string {
	switch t, now = t.UTC(), now.UTC(); {
	case t.IsZero():
		return "-"
	case t.YearDay() == now.YearDay() && t.Year() == now.Year():
		return t.Format("15:04:05.000")
	}
	return t.Format("01-02 15:04:05")
}

// utc is t in UTC, or the zero time.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// waitEvent is the timeline's line for a record that began to wait.
func waitEvent(name string, w Waiting) Event {
	what := "waits for " + w.What()
	if !w.Until.IsZero() {
		what += " until " + w.Until.Format(time.RFC3339)
	}
	return Event{At: w.Since, Record: name, What: strings.TrimSpace(what)}
}
