package keyline

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/topology"
)

// DB is the part of the DynamoDB client a key's line uses.
type DB interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Store reads and writes the agents' key items in the state table, each
// one conditional write decided on the item as it was.
type Store struct {
	db    DB
	table string
}

// NewStore is the key items of the state table stateTable.
func NewStore(db DB, stateTable string) Store { return Store{db: db, table: stateTable} }

// itemKey is the key of agent's key's item.
func itemKey(agent, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		topology.KeyOrderID: &types.AttributeValueMemberS{Value: topology.AgentPartition(agent)},
		topology.KeySort:    &types.AttributeValueMemberS{Value: slotsSK(key)},
	}
}

// Hold takes one of the limit slots of agent's key for holder (an attempt)
// until until, if one is free at now; a holder that holds one already holds
// it still, and one whose call (WaiterOf) was handed a slot takes it. A
// call not in line takes no slot while others wait in line (Hold.Position
// is 0: it may Wait), a call in line only when its turn came. Holds and
// reservations whose time has passed are removed on the way and their slots
// handed on (Hold.Handed: hand them on).
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

// Release gives holder's slot of agent's key back (nothing if it holds
// none: released already, or its hold ended and was removed). The slot
// goes, in the same write, to the first waiter in line, reserved for it for
// ReserveFor: Release returns it (with any other waiter handed a slot freed
// on the way by a hold that had ended).
//
// The caller hands each returned waiter its slot at once (HandOff): its
// Hold takes the reserved slot. A request not sent costs the waiter its
// place: the reservation lapses and goes to the next in line (the waiter,
// coming back at its fallback poll, joins the line again).
func (s Store) Release(ctx context.Context, agent, key, holder string, now time.Time) ([]Waiter, error) {
	r, err := s.run(ctx, agent, key, op{kind: opRelease, holder: holder, now: now})
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
// the next in line (Hold, Release and Wait remove it on the way). A holder
// that holds none passes nothing; a call a slot is reserved for already
// has holder's released (returned as Release's are: hand them on).
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
// handed to the first in line: Place.Reserved if that is w (its Hold takes
// it now), else Place.Handed (to be handed on at once). A full line
// (MaxWaiters, MaxLineBytes) does not take w (Place.Position 0, not
// Reserved). Lines.Acquire is the walk a call makes through Hold and Wait.
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
// next in line, returned as Release's are (hand them on at once).
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
	it, err := s.read(ctx, itemKey(agent, key))
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
