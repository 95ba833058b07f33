// Package keyline is a key's line: the calls of an agent in flight per key
// value (workflow.Agent.PerKey: at most N at once), and the line of calls
// waiting for a slot. It owns the key's item in the state table, a call's
// walk through it (Lines: acquire a slot or a place in line, hold again when
// its turn comes, release), the hand-off of a freed slot to the first in
// line (HandOff, the one place that sends a waiter's request), and the
// listing of an agent's keys in use for its operator (Store.Keys). It
// imports nothing of the handlers: the Agent and dispatch call it through
// interfaces of their own.
package keyline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/workflow"
)

// The calls in flight per key (workflow.Agent.PerKey) are an item of the
// state table per agent and key value: Holders maps each attempt that holds a
// slot to when its hold ends (its CompleteBy); Reserved, each waiter a slot
// was handed to, to when it lapses if not taken; N counts both; Waiting is
// the line of calls that found every slot held, first come first served
// (Tail numbers them as they join). Every write is one conditional update of
// the item, decided on the item as it was (what the write that failed read,
// ReturnValuesOnConditionCheckFailure), and leaves no slot free while a call
// waits in line: a slot let go, or freed by a hold that ended, is reserved
// for the first in line at once.
//
// A hold that is not let go (its Agent crashed) ends at its time, and a
// reservation not taken (its request lost) lapses: the next call that finds
// the key full, or lets a slot go, removes it, so no crash leaks a slot.

// slotsIdle is how long a key's item outlives its last hold (DynamoDB's time
// to live removes it): one per customer is not kept for ever.
const slotsIdle = 24 * time.Hour

// NotLetGo is what a handler logs when the state store failed to let a slot
// go (holder attribute: whose): the slot is free at its attempt's
// CompleteBy, or when its reservation ends.
const NotLetGo = "a slot not let go: it is free at its attempt's CompleteBy, or its reservation ends"

// ReserveFor is how long a slot handed to a waiter is kept for it: its
// request, sent at once, comes back well within it; a request lost frees
// the slot for the next in line then.
const ReserveFor = 2 * time.Minute

// The line's bounds keep a key's item well under DynamoDB's 400 KB with
// MaxInFlightPerKey holders: a waiter beyond them is not queued (it polls).
const (
	// MaxWaiters is the longest line of a key.
	MaxWaiters = 1000
	// MaxLineBytes bounds the line's waiters, IDs and requests together.
	MaxLineBytes = 200 << 10
	// MaxWaiterIDBytes is the longest waiter ID (WaiterID's are shorter).
	MaxWaiterIDBytes = 128
	// MaxWaiterRequestBytes is the largest request a waiter keeps in line:
	// the largest an Agent makes (message.AgentRequest.Waiting, as
	// message.Encode writes it), its key of keyname.MaxKeyBytes bytes each
	// escaped to six (a control byte: \u0001) and its other fields at their longest
	// (300 bytes: TestTheLongestRequestKeepsItsPlaceInLine), with room to
	// spare. A request over it would never get its place in line: every
	// later call with a shorter request would overtake it.
	MaxWaiterRequestBytes = 6*keyname.MaxKeyBytes + 512
)

// ErrWaiterTooLarge is Wait's answer to a waiter whose ID or request is over
// its bound (and a Call's Request's, for one over MaxWaiterRequestBytes): it
// polls instead.
var ErrWaiterTooLarge = errors.New("waiter too large to queue")

// slotsSK is the sort key of key's item: "key/" and the key, or for one
// longer than keyname.MaxKeyBytes "key#" and its SHA-256.
func slotsSK(key string) string {
	if len(key) > keyname.MaxKeyBytes {
		sum := sha256.Sum256([]byte(key))
		return "key#" + hex.EncodeToString(sum[:])
	}
	return "key/" + key
}

// WaiterID names a call across its attempts: the order, its record and the
// round. Each attempt's Holder starts with it, so that any attempt of the
// call takes a slot handed to it.
func WaiterID(orderID string, ref workflow.Ref, round int) string {
	return fmt.Sprintf("%s/%d.%t.%d#%d", orderID, ref.Index, ref.Undo, ref.Item, round)
}

// Holder names an attempt holding a slot: its call's WaiterID and the
// attempt.
func Holder(orderID string, ref workflow.Ref, round, attempt int) string {
	return fmt.Sprintf("%s.%d", WaiterID(orderID, ref, round), attempt)
}

// WaiterOf is the call holder is an attempt of (WaiterID): holder without
// its attempt, or holder itself if it was not named by Holder.
func WaiterOf(holder string) string {
	hash := strings.LastIndexByte(holder, '#')
	if dot := strings.LastIndexByte(holder, '.'); hash >= 0 && dot > hash {
		return holder[:dot]
	}
	return holder
}

// Slot is a slot an attempt holds: its agent, its key and its holder; To,
// if set, is the call it is to be passed to (Pass), until Until.
type Slot struct {
	Agent, Key, Holder string
	To                 string
	Until              time.Time
}

// Hold is what Store.Hold found.
type Hold struct {
	Held bool
	// Holders is how many hold the key's slots, reservations included
	// (when not Held: all of them).
	Holders int
	// Next, when not Held, is the earliest time a holder's hold ends by
	// itself (its CompleteBy) or a reservation lapses: a slot is free by
	// then at the latest.
	Next time.Time
	// Position, when not Held, is its call's place in the key's line (1:
	// next); 0 if it is not in line (it may Wait).
	Position int
	// Handed are the waiters this call handed a slot on the way (freed by
	// holds that had ended): hand them on at once (HandOff).
	Handed []Waiter
}

// Waiter is a call waiting in a key's line for a slot.
type Waiter struct {
	// ID names the call across its attempts (WaiterID): an attempt whose
	// Holder starts with it takes the slot handed to it.
	ID string
	// Request is what makes the call again when a slot is handed to it:
	// compact JSON (its Agent's request without the order), at most
	// MaxWaiterRequestBytes.
	Request json.RawMessage
	// Since is when it joined the line (set by Wait).
	Since time.Time
}

// Place is where Store.Wait left a waiter: in line at Position, or a slot
// Reserved for it, or neither (the line is full: it polls at Next).
type Place struct {
	// Position is its place in line, 1 for the next; 0 when not in line.
	Position int
	// Reserved: a slot is kept for it (ReserveFor): its Hold takes it now.
	Reserved bool
	// Next is the earliest time a current hold ends by itself (zero: none
	// does): the time of its fallback poll.
	Next time.Time
	// Handed are the waiters ahead of it this call handed a free slot:
	// hand them on at once (HandOff).
	Handed []Waiter
}

// Slots is a key's slots and line as stored, for an operator (the console,
// status): "waiting for a slot of key K (3rd in line)".
type Slots struct {
	// Limit is the key's slots as the last Hold or Wait gave it (0: not
	// known yet).
	Limit int
	// Holders maps the attempts holding a slot to when their holds end.
	Holders map[string]time.Time
	// Reserved maps the waiters a slot was handed to, and not yet taken, to
	// when the reservation lapses.
	Reserved map[string]time.Time
	// Waiters is the line, its first first.
	Waiters []Waiter
}

// Position is waiterID's place in line (1: next), 0 if it is not in it.
func (k Slots) Position(waiterID string) int {
	for i, w := range k.Waiters {
		if w.ID == waiterID {
			return i + 1
		}
	}
	return 0
}
