package statestore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/topology"
)

// ErrBadPageToken means a page token was not one a list call returned.
var ErrBadPageToken = errors.New("bad page token")

// InFlight returns up to limit orders with work in flight (Pending or
// Compensating), starting after the page token from an earlier call ("" for
// the first page); the returned token is "" after the last page.
//
// It reads the sparse deadline index, not the table: it queries each shard in
// turn (keys only) until it has limit orders, then reads their items with
// one BatchGetItem (eventually consistent). So a page costs in proportion to the page and to
// the work in flight, never to the finished orders the table holds. The index
// also holds orders that ended with an alert not yet confirmed: they are left
// out, so a page may hold fewer than limit orders with more to come. An order
// whose index entry moves (its next deadline changes) between two pages may
// be listed twice or not at all: a live view, not a snapshot.
func (s *Store) InFlight(ctx context.Context, limit int, token string) ([]Task, string, error) {
	return s.sharded(ctx, limit, token, s.indexIDs, s.inFlightOf)
}

// sharded pages up to limit orders of a sharded index from the page token
// (""; the first page): ids reads up to want order ids from a place on,
// shard after shard, and kept reads and keeps their orders.
func (s *Store) sharded(ctx context.Context, limit int, token string,
	ids func(ctx context.Context, pos indexPos, want int) ([]string, indexPos, error),
	kept func(ctx context.Context, ids []string) ([]Task, error)) ([]Task, string, error) {
	pos, err := decodeIndexToken(token, s.shards)
	if err != nil {
		return nil, "", err
	}
	limit = max(limit, 1)
	var out []Task
	for pos.Shard < s.shards && len(out) < limit {
		var page []string
		if page, pos, err = ids(ctx, pos, limit-len(out)); err != nil {
			return nil, "", err
		}
		tasks, err := kept(ctx, page)
		if err != nil {
			return nil, "", err
		}
		out = append(out, tasks...)
	}
	if pos.Shard >= s.shards {
		return out, "", nil
	}
	return out, pos.encode(), nil
}

// indexIDs reads up to want order ids of the deadline index from pos on,
// shard after shard, and returns where the next read starts.
func (s *Store) indexIDs(ctx context.Context, pos indexPos, want int) ([]string, indexPos, error) {
	var ids []string
	for pos.Shard < s.shards && len(ids) < want {
		page, next, err := s.indexPage(ctx, pos, want-len(ids), 0)
		if err != nil {
			return nil, pos, err
		}
		ids, pos = append(ids, page...), next
	}
	return ids, pos, nil
}

// indexPos is a place in a sharded index (the deadline index, the end
// index): a shard, and the entry read last in it (none: its start), with
// its sort key (DueAt, or the end time).
type indexPos struct {
	Shard   int    `json:"s"`
	OrderID string `json:"o,omitempty"`
	DueAt   int64  `json:"d,omitempty"`
}

func (p indexPos) encode() string {
	b, _ := json.Marshal(p)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeIndexToken(token string, shards int) (indexPos, error) {
	var p indexPos
	if token == "" {
		return p, nil
	}
	err := decodeJSONToken(token, &p)
	if err != nil || p.Shard < 0 || p.Shard >= shards || (p.OrderID == "" && p.DueAt != 0) {
		return p, fmt.Errorf("%w %q: not one an in-flight list returned", ErrBadPageToken, token)
	}
	return p, nil
}

// indexPage reads up to limit order ids of one shard of the deadline index
// after pos (only those due by dueBy, Unix ms, unless it is zero), and
// returns where the next page starts.
func (s *Store) indexPage(ctx context.Context, pos indexPos, limit int, dueBy int64) ([]string, indexPos, error) {
	b := x.New()
	keys := []x.Cond{x.Equal(b.Plain(topology.KeyDueShard), b.String(strconv.Itoa(pos.Shard)))}
	if dueBy != 0 {
		keys = append(keys, x.LessOrEqual(b.Plain(topology.KeyDueAt), b.Int(dueBy)))
	}
	return s.shardPage(ctx, shardIndex{topology.DeadlineIndex, topology.KeyDueShard, strconv.Itoa(pos.Shard), topology.KeyDueAt},
		b, keys, pos, limit)
}

// shardIndex is one partition of a sharded, keys-only index of the state
// table: the index, its partition key's attribute and value, and its sort
// key's attribute.
type shardIndex struct{ name, partAttr, part, sortAttr string }

// shardPage reads up to limit order ids of partition ix after pos, by the
// key conditions keys (built with b), and where the next page starts.
func (s *Store) shardPage(ctx context.Context, ix shardIndex, b *x.Builder, keys []x.Cond, pos indexPos, limit int) ([]string, indexPos, error) {
	e, err := condition(b, keys...)
	if err != nil {
		return nil, pos, err
	}
	in := &dynamodb.QueryInput{
		TableName: &s.state, IndexName: aws.String(ix.name),
		KeyConditionExpression: &e.Condition, ExpressionAttributeValues: e.Values,
		Limit: aws.Int32(int32(min(limit, 100))),
	}
	if pos.OrderID != "" {
		in.ExclusiveStartKey = key(pos.OrderID, taskSK)
		in.ExclusiveStartKey[ix.partAttr] = str(ix.part)
		in.ExclusiveStartKey[ix.sortAttr] = num(pos.DueAt)
	}
	page, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, pos, fmt.Errorf("query the index %s, %s: %w", ix.name, ix.part, err)
	}
	var ids []string
	for _, item := range page.Items {
		if id, ok := item[topology.KeyOrderID].(*types.AttributeValueMemberS); ok {
			ids = append(ids, id.Value)
		}
	}
	next, err := nextPosBy(pos, page.LastEvaluatedKey, ix.sortAttr)
	return ids, next, err
}

// nextPos is where the page after one that ended at last (nil: the shard's
// end) starts: further in pos's shard, or at the next shard's start.
func nextPos(pos indexPos, last map[string]types.AttributeValue) (indexPos, error) {
	return nextPosBy(pos, last, topology.KeyDueAt)
}

// nextPosBy is nextPos in an index whose sort key is sortKey.
func nextPosBy(pos indexPos, last map[string]types.AttributeValue, sortKey string) (indexPos, error) {
	if last == nil {
		return indexPos{Shard: pos.Shard + 1}, nil
	}
	next := indexPos{Shard: pos.Shard}
	if id, ok := last[topology.KeyOrderID].(*types.AttributeValueMemberS); ok {
		next.OrderID = id.Value
	}
	if d, ok := last[sortKey].(*types.AttributeValueMemberN); ok {
		next.DueAt, _ = strconv.ParseInt(d.Value, 10, 64)
	}
	if next.OrderID == "" {
		return pos, fmt.Errorf("query an index, shard %d: a page key without %s", pos.Shard, topology.KeyOrderID)
	}
	return next, nil
}

// inFlightOf reads the orders' items and keeps the tasks not ended, in the
// order given.
func (s *Store) inFlightOf(ctx context.Context, ids []string) ([]Task, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	items, err := s.items(ctx, ids, false)
	if err != nil {
		return nil, fmt.Errorf("read in-flight orders: %w", err)
	}
	var out []Task
	for _, id := range ids {
		if it, ok := items[id]; ok && !it.task().State.Ended() {
			out = append(out, it.task())
		}
	}
	return out, nil
}

// CountInFlight counts the entries of the sparse deadline index: the orders
// with work in flight (Pending, Compensating), and the few that ended with an
// alert not yet confirmed (the Supervisor sends it within a run or two). It
// is a keys-only Query per shard with Select COUNT, billed by the index
// entries read (about 150 bytes each, half a read unit per 4 KB): a thousand
// orders in flight cost about 19 read units, whatever the table holds.
func (s *Store) CountInFlight(ctx context.Context) (int, error) {
	n := 0
	for shard := range s.shards {
		b := x.New()
		e, err := condition(b, x.Equal(b.Plain(topology.KeyDueShard), b.String(strconv.Itoa(shard))))
		if err != nil {
			return n, err
		}
		p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
			TableName: &s.state, IndexName: aws.String(topology.DeadlineIndex), Select: types.SelectCount,
			KeyConditionExpression: &e.Condition, ExpressionAttributeValues: e.Values,
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return n, fmt.Errorf("count the deadline index, shard %d: %w", shard, err)
			}
			n += int(page.Count)
		}
	}
	return n, nil
}
