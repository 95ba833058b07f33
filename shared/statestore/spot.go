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
		out = append(out, Spot{Step: r.Name, Undo: refOf(sk).Undo, Agent: r.Agent, State: state,
			Cause: workflow.Cause(r.Cause), Why: r.FlowWhy, Error: r.LastError})
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
	"503":       func(s Spot) bool { return strings.Contains(s.Why, "asked for no calls") || s.has("503") },
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
