package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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

// MaxKeyBytes is the longest key value kept as it is in its item's sort key;
// a longer one is kept as its SHA-256.
const MaxKeyBytes = 200

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
	// message.Encode writes it), its key of MaxKeyBytes each escaped to six
	// bytes (a control byte: \u0001) and its other fields at their longest
	// (300 bytes: TestTheLongestRequestKeepsItsPlaceInLine), with room to
	// spare. A request over it would never get its place in line: every
	// later call with a shorter request would overtake it.
	MaxWaiterRequestBytes = 6*MaxKeyBytes + 512
)

// ErrWaiterTooLarge is Wait's answer to a waiter whose ID or request is over
// its bound: it polls instead.
var ErrWaiterTooLarge = errors.New("waiter too large to queue")

// ShortKey is what a key of value is kept, shown and logged by: the value,
// or for one longer than MaxKeyBytes, "sha256:" and its SHA-256 in hex, so
// that the records that wait for it (FlowWhy), an accepted call's record
// that holds its slot (its hk) and a request in its line stay small
// whatever the value. (A long value given as it is, as before the Agent
// kept keys short, is kept as its hash too, in an item of its own.)
func ShortKey(value string) string {
	if len(value) <= MaxKeyBytes {
		return value
	}
	sum := sha256.Sum256([]byte(value))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func slotsSK(key string) string {
	if len(key) > MaxKeyBytes {
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
	// holds that had ended): send their requests at once.
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
	// send their requests at once.
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

// Hold takes one of the limit slots of agent's key for holder (an attempt)
// until until, if one is free at now; a holder that holds one already holds
// it still, and one whose call (WaiterOf) was handed a slot takes it. A
// call not in line takes no slot while others wait in line (Hold.Position
// is 0: it may Wait), a call in line only when its turn came. Holds and
// reservations whose time has passed are removed on the way and their slots
// handed on (Hold.Handed: send their requests).
//
// It answers not Held only from a consistent state of the key in which its
// slots are all held by holds that have not ended (or kept for calls ahead
// of it); losing a race to another call is never an error (it tries again,
// pausing a little after a few losses, until ctx ends).
func (s Store) Hold(ctx context.Context, agent, key string, limit int, holder string, until, now time.Time) (Hold, error) {
	o := op{kind: opHold, holder: holder, waiter: WaiterOf(holder), until: until.UnixMilli(), limit: limit, now: now}
	r, err := s.run(ctx, agent, key, o)
	if err != nil {
		return Hold{}, fmt.Errorf("hold a slot of agent %s's key %q: %w", agent, key, err)
	}
	if r.done {
		return Hold{Held: true, Holders: r.it.N, Handed: r.handed}, nil
	}
	return Hold{Holders: r.it.N, Next: r.it.next(o.now), Position: r.it.position(o.waiter), Handed: r.handed}, nil
}

// Let gives holder's slot of agent's key back (nothing if it holds none: let
// go already, or its hold ended and was removed). The slot goes, in the same
// write, to the first waiter in line, reserved for it for ReserveFor: Let
// returns it (with any other waiter handed a slot freed on the way by a hold
// that had ended).
//
// The caller sends each returned waiter's Request at once: its Hold takes
// the reserved slot. A request not sent costs the waiter its place: the
// reservation lapses and goes to the next in line (the waiter, coming back
// at its fallback poll, joins the line again).
func (s Store) Let(ctx context.Context, agent, key, holder string, now time.Time) ([]Waiter, error) {
	r, err := s.run(ctx, agent, key, op{kind: opLet, holder: holder, now: now})
	if err != nil {
		return nil, fmt.Errorf("let go a slot of agent %s's key %q: %w", agent, key, err)
	}
	return r.handed, nil
}

// Pass hands holder's slot of agent's key to the call waiterID names
// (WaiterID), reserved for it until until, in one write: no other call
// takes it between. A cancel passes an accepted async call's slot to its
// undo (of the same agent and key), whose Hold takes it: the service, which
// drops the accepted call when its undo comes, has no call of the key more
// in flight than its limit meanwhile, and the undo does not wait for the
// call's CompleteBy. A reservation not taken lapses at until and goes to
// the next in line (Hold, Let and Wait remove it on the way). A holder
// that holds none passes nothing; a call a slot is reserved for already
// has holder's let go (returned as Let's are: send their requests).
func (s Store) Pass(ctx context.Context, agent, key, holder, waiterID string, until, now time.Time) ([]Waiter, error) {
	r, err := s.run(ctx, agent, key, op{kind: opPass, holder: holder, waiter: waiterID, until: until.UnixMilli(), now: now})
	if err != nil {
		return nil, fmt.Errorf("pass a slot of agent %s's key %q to %q: %w", agent, key, waiterID, err)
	}
	return r.handed, nil
}

// Wait puts w in agent's key's line, after a Hold that found the key full
// (Hold.Position 0), and says where it stands (Place). It is idempotent: a
// waiter in line already keeps its place; one a slot is reserved for is told
// so. A slot found free (let go since the Hold, or a hold that ended) is
// handed to the first in line: Place.Reserved if that is w, else
// Place.Handed. A full line (MaxWaiters, MaxLineBytes) does not take w
// (Place.Position 0, not Reserved).
//
// The caller, an Agent whose claimed attempt found its key full:
//   - calls Wait with the call's WaiterID and its compact request;
//   - if Reserved, Holds again at once (it takes the reserved slot);
//   - otherwise gives its claim back, once, no failure counted, and sends
//     its own request again delayed to Place.Next (its fallback poll: a
//     hold that ends without being let go frees a slot then; if Next is
//     zero or far, a bounded delay), and sends the Handed waiters' requests
//     at once;
//   - when the request comes back, handed on by a Let or at its fallback
//     poll, Holds again; if still not Held (its turn not come), it Waits
//     again (it keeps its place) and repeats;
//   - calls Leave if its order is cancelled or ends while it waits.
//
// The holder that lets go (Let, or Hold's Handed) sends the returned
// waiters' requests at once.
func (s Store) Wait(ctx context.Context, agent, key string, limit int, w Waiter, now time.Time) (Place, error) {
	if len(w.ID) > MaxWaiterIDBytes || len(w.Request) > MaxWaiterRequestBytes {
		return Place{}, fmt.Errorf("queue %q for agent %s's key %q: %w (ID %d bytes, request %d)", w.ID, agent, key,
			ErrWaiterTooLarge, len(w.ID), len(w.Request))
	}
	o := op{kind: opWait, waiter: w.ID, join: waiting{Request: string(w.Request), Since: now.UnixMilli()}, limit: limit, now: now}
	r, err := s.run(ctx, agent, key, o)
	if err != nil {
		return Place{}, fmt.Errorf("queue %q for agent %s's key %q: %w", w.ID, agent, key, err)
	}
	if r.done {
		return Place{Reserved: true, Handed: r.handed}, nil
	}
	return Place{Position: r.it.position(w.ID), Next: r.it.next(o.now), Handed: r.handed}, nil
}

// Leave takes waiterID out of agent's key's line (its order was cancelled,
// or ended): nothing if it is not in it. A slot reserved for it goes to the
// next in line, returned as Let's are (send their requests at once).
func (s Store) Leave(ctx context.Context, agent, key, waiterID string, now time.Time) ([]Waiter, error) {
	r, err := s.run(ctx, agent, key, op{kind: opLeave, waiter: waiterID, now: now})
	if err != nil {
		return nil, fmt.Errorf("take %q out of agent %s's key %q's line: %w", waiterID, agent, key, err)
	}
	return r.handed, nil
}

// Holders is who holds agent's key's slots, and until when: the attempts,
// and the waiters a slot is reserved for (under their WaiterID).
func (s Store) Holders(ctx context.Context, agent, key string) (map[string]time.Time, error) {
	k, err := s.Key(ctx, agent, key)
	if err != nil {
		return nil, err
	}
	holders := k.Holders
	for w, end := range k.Reserved {
		holders[w] = end
	}
	return holders, nil
}

// Key reads agent's key's slots and line (strongly consistent).
func (s Store) Key(ctx context.Context, agent, key string) (Slots, error) {
	it, err := s.read(ctx, agentKey(agent, slotsSK(key)))
	if err != nil {
		return Slots{}, fmt.Errorf("read agent %s's key %q: %w", agent, key, err)
	}
	k := Slots{Limit: it.Limit, Holders: times(it.Holders), Reserved: times(it.Reserved)}
	for _, w := range it.line() {
		k.Waiters = append(k.Waiters, it.waiter(w))
	}
	return k, nil
}

func times(ms map[string]int64) map[string]time.Time {
	out := make(map[string]time.Time, len(ms))
	for name, end := range ms {
		out[name] = time.UnixMilli(end).UTC()
	}
	return out
}
