package keyline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/topology"
)

// QueryDB is a DB that also queries (the DynamoDB client is one): Keys
// needs it.
type QueryDB interface {
	DB
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// HashedKeyDigits is how many hex digits of a hashed key's SHA-256 KeyInUse
// shows.
const HashedKeyDigits = 12

// KeyInUse is a key of an agent's perKey with calls in flight, a slot
// reserved or calls waiting in its line, as its operator sees it (the
// operator's JSON: #/$defs/keyInUse).
type KeyInUse struct {
	// Key is the key's value, or for a value longer than
	// keyname.MaxKeyBytes (its item keeps only its SHA-256) "sha256:" and
	// the hash's first HashedKeyDigits hex digits, Hashed.
	Key    string `json:"key"`
	Hashed bool   `json:"hashed,omitempty"`
	// Limit is its calls in flight at most (0: not known yet).
	Limit int `json:"limit"`
	// InFlight counts its holders and reservations that have not ended.
	InFlight int `json:"inFlight"`
	// Holders are the calls holding a slot, the earliest to end first.
	Holders []KeyHolder `json:"holders"`
	// Reserved are the calls a slot was handed to and that have not taken
	// it yet, the earliest to lapse first.
	Reserved []KeyHolder `json:"reserved,omitempty"`
	// Waiters is the key's line, its first first.
	Waiters []KeyWaiter `json:"waiters"`
}

// KeyHolder is a call holding a slot of a key (or one reserved for it).
type KeyHolder struct {
	OrderID string `json:"orderId"`
	// ID names the attempt (Holder) or, for a reservation, the call
	// (WaiterID).
	ID string `json:"id"`
	// Until is when its hold ends by itself (its CompleteBy), or its
	// reservation lapses.
	Until time.Time `json:"until"`
	// Ended: Until has passed (its Agent crashed, or its request was
	// lost): the next call to the key removes it.
	Ended bool `json:"ended,omitempty"`
}

// KeyWaiter is a call waiting in a key's line.
type KeyWaiter struct {
	OrderID  string    `json:"orderId"`
	ID       string    `json:"id"`       // the call (WaiterID)
	Since    time.Time `json:"since"`    // when it joined the line
	Position int       `json:"position"` // 1: next
}

// Calls is how many calls the key has: holding a slot, a slot reserved
// for them, or waiting in line (ended holds included).
func (k KeyInUse) Calls() int { return len(k.Holders) + len(k.Reserved) + len(k.Waiters) }

// KeysInUse are an agent's keys in use (Store.Keys).
type KeysInUse struct {
	// Keys are the busiest keys, at most the limit asked for: the most
	// calls first (Calls), then the longest line, then by Key.
	Keys []KeyInUse
	// Count is how many keys are in use, Waiting how many calls wait in
	// their lines, all keys counted (Keys may show fewer).
	Count, Waiting int
	// Oldest is when the call waiting longest, of all keys, joined its
	// line (zero: none waits).
	Oldest time.Time
}

// Keys reads agent's keys in use as they are at now (strongly
// consistent): one Query of the agent's partition, its key items only,
// every page. A key whose item is empty (no holder, no reservation, no one
// in line) is not in use. Holds and reservations past their end are shown
// Ended: the next call to the key removes them. limit bounds
// len(KeysInUse.Keys) (0: no bound).
func (s Store) Keys(ctx context.Context, agent string, limit int, now time.Time) (KeysInUse, error) {
	q, ok := s.db.(QueryDB)
	if !ok {
		return KeysInUse{}, fmt.Errorf("read agent %s's keys: %w", agent, errNoQuery)
	}
	in, err := s.keysQuery(agent)
	if err != nil {
		return KeysInUse{}, fmt.Errorf("read agent %s's keys: %w", agent, err)
	}
	var keys KeysInUse
	pages := dynamodb.NewQueryPaginator(q, in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return KeysInUse{}, fmt.Errorf("read agent %s's keys: %w", agent, err)
		}
		for _, raw := range out.Items {
			k, err := keyInUse(raw, now)
			if err != nil {
				return KeysInUse{}, fmt.Errorf("read agent %s's keys: %w", agent, err)
			}
			keys.add(k)
		}
	}
	keys.trim(limit)
	return keys, nil
}

var errNoQuery = errors.New("the store's DB does not query (not a keyline.QueryDB)")

// keysQuery is the Query of agent's key items.
func (s Store) keysQuery(agent string) (*dynamodb.QueryInput, error) {
	b := dynamoexpr.New()
	b.If(dynamoexpr.Equal(b.Name(topology.KeyOrderID), b.String(topology.AgentPartition(agent))),
		dynamoexpr.BeginsWith(b.Name(topology.KeySort), b.String("key")))
	e, err := b.Build()
	if err != nil {
		return nil, err
	}
	return &dynamodb.QueryInput{TableName: &s.table, ConsistentRead: aws.Bool(true), KeyConditionExpression: &e.Condition,
		ExpressionAttributeNames: e.Names, ExpressionAttributeValues: e.Values}, nil
}

// keyInUse is a key's item as Keys shows it at now.
func keyInUse(raw map[string]types.AttributeValue, now time.Time) (KeyInUse, error) {
	sk, _ := raw[topology.KeySort].(*types.AttributeValueMemberS)
	if sk == nil {
		return KeyInUse{}, fmt.Errorf("a key's item has no sort key %s", topology.KeySort)
	}
	it, err := decode(raw)
	if err != nil {
		return KeyInUse{}, fmt.Errorf("key item %q: %w", sk.Value, err)
	}
	key, hashed := KeyOfSK(sk.Value)
	return it.inUse(key, hashed, now), nil
}

// inUse is the item of key as its operator sees it at now.
func (it snapshot) inUse(key string, hashed bool, now time.Time) KeyInUse {
	k := KeyInUse{Key: key, Hashed: hashed, Limit: it.Limit, Holders: holders(it.Holders, now),
		Reserved: holders(it.Reserved, now), Waiters: []KeyWaiter{}}
	for _, h := range slices.Concat(k.Holders, k.Reserved) {
		if !h.Ended {
			k.InFlight++
		}
	}
	for i, id := range it.line() {
		w := it.waiter(id)
		k.Waiters = append(k.Waiters, KeyWaiter{OrderID: OrderOf(id), ID: id, Since: w.Since, Position: i + 1})
	}
	return k
}

// holders are the holds (or reservations) of m, ends in Unix ms, the
// earliest to end first.
func holders(m map[string]int64, now time.Time) []KeyHolder {
	out := []KeyHolder{}
	for _, id := range slices.Sorted(maps.Keys(m)) {
		until := time.UnixMilli(m[id]).UTC()
		out = append(out, KeyHolder{OrderID: OrderOf(id), ID: id, Until: until, Ended: !until.After(now)})
	}
	slices.SortStableFunc(out, func(a, b KeyHolder) int { return cmp.Compare(a.Until.UnixNano(), b.Until.UnixNano()) })
	return out
}

// KeyOfSK is the key a key item's sort key names: its value ("key/VALUE"),
// or for a hashed one ("key#SHA256") "sha256:" and the hash's first
// HashedKeyDigits digits, hashed true.
func KeyOfSK(sk string) (key string, hashed bool) {
	if v, ok := strings.CutPrefix(sk, "key/"); ok {
		return v, false
	}
	sum := strings.TrimPrefix(sk, "key#")
	return "sha256:" + sum[:min(len(sum), HashedKeyDigits)], true
}

// add counts k, and keeps it if it is in use.
func (in *KeysInUse) add(k KeyInUse) {
	if k.Calls() == 0 {
		return
	}
	in.Count++
	in.Waiting += len(k.Waiters)
	for _, w := range k.Waiters {
		if in.Oldest.IsZero() || w.Since.Before(in.Oldest) {
			in.Oldest = w.Since
		}
	}
	in.Keys = append(in.Keys, k)
}

// trim sorts the keys, the busiest first, and keeps the first limit (0:
// all).
func (in *KeysInUse) trim(limit int) {
	slices.SortFunc(in.Keys, func(a, b KeyInUse) int {
		return cmp.Or(cmp.Compare(b.Calls(), a.Calls()), cmp.Compare(len(b.Waiters), len(a.Waiters)), cmp.Compare(a.Key, b.Key))
	})
	if limit > 0 && len(in.Keys) > limit {
		in.Keys = slices.Clip(in.Keys[:limit])
	}
}

// OrderOf is the order a WaiterID or a Holder names: id up to its last
// "/" (id itself if it has none).
func OrderOf(id string) string {
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		return id[:i]
	}
	return id
}
