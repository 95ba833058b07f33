package flow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

// KeyInUse is a key of an agent with calls holding its slots, slots
// reserved or calls waiting in its line: its slots and line as stored.
type KeyInUse struct {
	// Key is the key's value; for a value longer than MaxKeyBytes, which
	// its item keeps only as its SHA-256 (the value is not stored),
	// "sha256:" and the hash's first HashedKeyDigits hex digits.
	Key string
	// Hashed: Key is a hash's prefix, not the value.
	Hashed bool
	Slots
}

// Calls is how many calls the key has: holding a slot, a slot reserved
// for them, or waiting in line.
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

// Keys reads agent's keys in use (strongly consistent): one Query of the
// agent's partition, its key items only, every page. A key whose item is
// empty (no holder, no reservation, no one in line) is not in use. Holds
// and reservations past their end are shown as stored: the next call to
// the key removes them. limit bounds len(KeysInUse.Keys) (0: no bound).
func (s Store) Keys(ctx context.Context, agent string, limit int) (KeysInUse, error) {
	q, ok := s.db.(QueryDB)
	if !ok {
		return KeysInUse{}, fmt.Errorf("read agent %s's keys: %w", agent, errNoQuery)
	}
	var in KeysInUse
	pages := dynamodb.NewQueryPaginator(q, s.keysQuery(agent))
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return KeysInUse{}, fmt.Errorf("read agent %s's keys: %w", agent, err)
		}
		for _, raw := range out.Items {
			k, err := keyInUse(raw)
			if err != nil {
				return KeysInUse{}, fmt.Errorf("read agent %s's keys: %w", agent, err)
			}
			in.add(k)
		}
	}
	in.trim(limit)
	return in, nil
}

var errNoQuery = errors.New("the store's DB does not query (not a flow.QueryDB)")

// keysQuery is the Query of agent's key items.
func (s Store) keysQuery(agent string) *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName:              &s.table,
		ConsistentRead:         aws.Bool(true),
		KeyConditionExpression: aws.String("#pk = :pk AND begins_with(#sk, :key)"),
		ExpressionAttributeNames: map[string]string{
			"#pk": topology.KeyOrderID, "#sk": topology.KeySort},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":  &types.AttributeValueMemberS{Value: "~agent/" + agent},
			":key": &types.AttributeValueMemberS{Value: "key"}},
	}
}

// keyInUse is a key's item as Keys shows it.
func keyInUse(raw map[string]types.AttributeValue) (KeyInUse, error) {
	sk, _ := raw[topology.KeySort].(*types.AttributeValueMemberS)
	if sk == nil {
		return KeyInUse{}, fmt.Errorf("a key's item has no sort key %s", topology.KeySort)
	}
	it, err := decode(raw)
	if err != nil {
		return KeyInUse{}, fmt.Errorf("key item %q: %w", sk.Value, err)
	}
	key, hashed := KeyOfSK(sk.Value)
	k := KeyInUse{Key: key, Hashed: hashed, Slots: Slots{Limit: it.Limit, Holders: times(it.Holders), Reserved: times(it.Reserved)}}
	for _, id := range it.line() {
		k.Waiters = append(k.Waiters, it.waiter(id))
	}
	return k, nil
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
