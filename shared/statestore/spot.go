package statestore

import (
	"maps"
	"slices"
	"strings"

	"github.com/sas-go/sas/shared/workflow"
)

// Spot is a record an order is at: one at work (ready, waiting for its
// agent's flow control, claimed, parked) while the order is in flight, or
// one that failed for good, with why. A search by step, agent or reason
// keeps the orders one of whose spots matches (Task.At).
type Spot struct {
	Step  string         // the record's step (or undo action's step)
	Undo  bool           // an undo action's record
	Agent string         // its agent ("" for a wait or a timer)
	State workflow.State // Pending (ready or waiting), Processing, or Error
	Cause workflow.Cause // an Error's cause
	Why   string         // why a ready record waits (its agent's flow control)
	Error string         // its latest error, if any
	// Waits is what a record in flight waits for, if not for its own work
	// (ForWork); Event, for ForEvent, names the event.
	Waits WaitsFor
	Event string
}

// WaitsFor is what a record in flight waits for while it is not at work:
// what the record says of itself, read from its state, kind and parking.
type WaitsFor string

// What a record in flight waits for.
const (
	ForWork     WaitsFor = ""         // nothing but its own work: ready for its claim, or its call running
	ForEvent    WaitsFor = "event"    // a wait armed for its event (workflow.KindEvent), until its timeout
	ForTimer    WaitsFor = "timer"    // a timer armed (workflow.KindTimer), until its wake time
	ForCallback WaitsFor = "callback" // an async attempt claimed: its service answers later, with its token
	ForFlow     WaitsFor = "flow"     // ready again after its agent's flow control gave its attempt back (Why says why)
)

// waitSigns are what a record says of its wait: its state and kind,
// whether it is armed and woken (a wait, a timer), async, ready (due), and
// why its flow control gave it back.
type waitSigns struct {
	state                      workflow.State
	kind                       workflow.Kind
	armed, woken, async, ready bool
	flowWhy                    string
}

// waitsFor is what the record waits for: the one reading of a record's
// wait, for its Step (Step.WaitsFor) and its Spot.
func (w waitSigns) waitsFor() WaitsFor {
	parked := w.state == workflow.Pending && w.armed && !w.woken
	switch {
	case parked && w.kind == workflow.KindEvent:
		return ForEvent
	case parked && w.kind == workflow.KindTimer:
		return ForTimer
	case w.state == workflow.Processing && w.async:
		return ForCallback
	case w.state == workflow.Pending && w.flowWhy != "" && w.ready:
		return ForFlow
	}
	return ForWork
}

// waitsFor is what r waits for (waitSigns.waitsFor).
func (r recItem) waitsFor() WaitsFor {
	return waitSigns{state: workflow.State(r.State), kind: workflow.Kind(r.Kind), armed: r.Armed != 0, woken: r.Woken != 0,
		async: r.Async, ready: r.DueAt != 0, flowWhy: r.FlowWhy}.waitsFor()
}

// FlowClasses are the classes of ReasonClasses a flow control's wait is
// in, in the order FlowClass tries them.
var FlowClasses = []string{"pause", "line", "rate", "503"}

// FlowClass is the class of why a flow control holds a call (a record's
// Why, or its agent's hold): pause, line, rate or 503, as a search by
// reason names them; else why up to its first ":".
func FlowClass(why string) string {
	s := Spot{Why: why}
	for _, c := range FlowClasses {
		if ReasonClasses[c](s) {
			return c
		}
	}
	head, _, _ := strings.Cut(why, ":")
	return strings.TrimSpace(head)
}

// spots are the records it is at (Spot), by their sort key's order.
func (it stateItem) spots() []Spot {
	var out []Spot
	ended := workflow.State(it.State).Ended()
	for _, sk := range slices.Sorted(maps.Keys(it.Recs)) {
		r := it.Recs[sk]
		state := workflow.State(r.State)
		atWork := !ended && it.live(sk) && (state == workflow.Pending || state == workflow.Processing)
		if state != workflow.Error && !atWork {
			continue
		}
		sp := Spot{Step: r.Name, Undo: refOf(sk).Undo, Agent: r.Agent, State: state,
			Cause: workflow.Cause(r.Cause), Why: r.FlowWhy, Error: r.LastError}
		if atWork {
			sp.Waits = r.waitsFor()
			if sp.Waits == ForEvent {
				sp.Event = r.Event
			}
		}
		out = append(out, sp)
	}
	return out
}

// ReasonClasses are the reasons a search names by a word (any other word
// is looked for in a spot's cause, wait and error, in any case).
var ReasonClasses = map[string]func(Spot) bool{
	"timeout":   func(s Spot) bool { return s.Cause.GaveUp() || s.has("timeout", "timed out") },
	"refused":   func(s Spot) bool { return s.Cause == workflow.Refused },
	"oversized": func(s Spot) bool { return s.Cause == workflow.Oversized },
	"pause":     func(s Spot) bool { return strings.Contains(s.Why, " is paused") },
	"line":      func(s Spot) bool { return strings.Contains(s.Why, "slot of key") },
	"rate":      func(s Spot) bool { return strings.Contains(s.Why, "rate turn") },
	"503": func(s Spot) bool {
		return strings.Contains(s.Why, "asked for no calls") || strings.Contains(s.Why, "slowed it until") || s.has("503")
	},
}

// Matches reports whether reason (a class of ReasonClasses, or text) says
// why s failed or waits.
func (s Spot) Matches(reason string) bool {
	if class, ok := ReasonClasses[strings.ToLower(reason)]; ok && class(s) {
		return true
	}
	return s.has(reason)
}

// has reports whether s's cause, wait or error holds one of words, in any
// case.
func (s Spot) has(words ...string) bool {
	text := strings.ToLower(string(s.Cause) + "\n" + s.Why + "\n" + s.Error)
	for _, w := range words {
		if w != "" && strings.Contains(text, strings.ToLower(w)) {
			return true
		}
	}
	return false
}
