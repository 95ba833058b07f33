package keyline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Items are the writes of a key's item a call's walk makes (Store's).
type Items interface {
	Hold(ctx context.Context, agent, key string, limit int, holder string, until, now time.Time) (Hold, error)
	Wait(ctx context.Context, agent, key string, limit int, w Waiter, now time.Time) (Place, error)
	Release(ctx context.Context, agent, key, holder string, now time.Time) ([]Waiter, error)
	Leave(ctx context.Context, agent, key, waiterID string, now time.Time) ([]Waiter, error)
}

// Lines is a handler's door to its agent's key lines: a call acquires a
// slot of its key or a place in its line, and releases the slot or leaves
// the line; every slot freed on the way is handed on (HandOff) before it
// returns, and what it could not do on the way is logged.
type Lines struct {
	Items   Items
	HandOff HandOff
	// Log logs what could not be done (nil: slog's default).
	Log *slog.Logger
	// Now is the time (nil: time.Now); each write reads it afresh.
	Now func() time.Time
}

// NotOutOfLine is what is logged when a call could not be taken out of
// its key's line (the state store failed; waiter attribute: which): a slot
// reserved for it is free after ReserveFor, and one handed to it finds
// nothing to run.
const NotOutOfLine = "a call not taken out of its key's line: its reservation ends by itself"

// undoFor bounds a release or a leave made after the caller's ctx ended.
const undoFor = 5 * time.Second

// Call is a claimed attempt's call that asks for a slot of its key.
type Call struct {
	Agent, Key string
	// Limit is the key's slots (workflow.PerKey.InFlight).
	Limit int
	// Holder names the attempt (Holder); Until is when its hold ends by
	// itself (its CompleteBy).
	Holder string
	Until  time.Time
	// Request is what makes the call again when a slot is handed to it,
	// kept in line: compact JSON, asked for only if the call must wait. An
	// error wrapping ErrWaiterTooLarge: too large for a line (TooLarge).
	Request func() (json.RawMessage, error)
}

// Acquired is what Acquire found: the slot held, or else a place in line
// or none.
type Acquired struct {
	Held bool
	// Position, when not Held, is its place in line (1: next); 0: none
	// (the line is full, or its request TooLarge): it looks again soon.
	Position int
	// TooLarge: its request is too large to keep in line.
	TooLarge bool
	// Next, when not Held, is the earliest time a hold ends by itself
	// (zero: none does): a slot is free by then at the latest.
	Next time.Time
}

// Acquire takes a slot of c's key for its attempt (Hold), or else a place
// in the key's line (Wait): a call already in line keeps its place, and
// takes the slot handed to it when its request comes back; a slot found
// free as it joins, reserved for it, it takes at once. Not Held, its
// caller gives the attempt back: a holder's Release hands the slot to the
// first in line (its request, sent by HandOff, makes the call again), and
// the call looks again by itself at Next (a hold that ends without a
// release). An error leaves it holding nothing and out of line (undone
// best effort, as Release and Leave are).
func (l Lines) Acquire(ctx context.Context, c Call) (Acquired, error) {
	if held, err := l.hold(ctx, c); err != nil || held {
		return Acquired{Held: held}, err
	}
	line, err := c.Request()
	if errors.Is(err, ErrWaiterTooLarge) {
		return Acquired{TooLarge: true}, nil
	}
	if err != nil {
		return Acquired{}, fmt.Errorf("make %s's place in line: %w", c.Holder, err)
	}
	id := WaiterOf(c.Holder)
	place, err := l.Items.Wait(ctx, c.Agent, c.Key, c.Limit, Waiter{ID: id, Request: line}, l.now())
	switch {
	case errors.Is(err, ErrWaiterTooLarge):
		return Acquired{}, nil
	case err != nil:
		// Its place may have been written, its answer lost.
		l.Leave(ctx, c.Agent, c.Key, id)
		return Acquired{}, err
	}
	l.handOn(ctx, c.Agent, c.Key, place.Handed)
	if place.Reserved { // a slot came free meanwhile, and it is first
		held, err := l.hold(ctx, c)
		if err != nil {
			l.Leave(ctx, c.Agent, c.Key, id)
			return Acquired{}, err
		}
		if held {
			return Acquired{Held: true}, nil
		}
	}
	return Acquired{Position: place.Position, Next: place.Next}, nil
}

// hold holds a slot of c's key, handing on what it freed on the way; a
// hold that failed is released (its write may have been made, its answer
// lost).
func (l Lines) hold(ctx context.Context, c Call) (bool, error) {
	h, err := l.Items.Hold(ctx, c.Agent, c.Key, c.Limit, c.Holder, c.Until, l.now())
	if err != nil {
		l.Release(ctx, Slot{Agent: c.Agent, Key: c.Key, Holder: c.Holder})
		return false, err
	}
	l.handOn(ctx, c.Agent, c.Key, h.Handed)
	return h.Held, nil
}

// Release lets sl's slot go, if its holder holds it, and hands it on: best
// effort, up to a few seconds past ctx's end. A slot not let go is logged
// (NotLetGo): it is free at its attempt's CompleteBy.
func (l Lines) Release(ctx context.Context, sl Slot) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoFor)
	defer cancel()
	handed, err := l.Items.Release(ctx, sl.Agent, sl.Key, sl.Holder, l.now())
	if err != nil {
		l.log().Warn(NotLetGo, "order_id", OrderOf(sl.Holder), "key", sl.Key, "holder", sl.Holder, "err", err)
		return
	}
	l.handOn(ctx, sl.Agent, sl.Key, handed)
}

// Leave takes waiterID out of agent's key's line, if it is in it, handing
// on a slot reserved for it: best effort as Release. A call not taken out
// is logged (NotOutOfLine).
func (l Lines) Leave(ctx context.Context, agent, key, waiterID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoFor)
	defer cancel()
	handed, err := l.Items.Leave(ctx, agent, key, waiterID, l.now())
	if err != nil {
		l.log().Warn(NotOutOfLine, "order_id", OrderOf(waiterID), "key", key, "waiter", waiterID, "err", err)
		return
	}
	l.handOn(ctx, agent, key, handed)
}

// handOn hands the slots handed to waiters on; one not sent is logged.
func (l Lines) handOn(ctx context.Context, agent, key string, handed []Waiter) {
	if err := l.HandOff.Hand(ctx, agent, key, handed); err != nil {
		l.log().Warn(NotHandedOn, "agent", agent, "key", key, "err", err)
	}
}

func (l Lines) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l Lines) log() *slog.Logger {
	if l.Log != nil {
		return l.Log
	}
	return slog.Default()
}
