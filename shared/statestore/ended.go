package statestore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// IndexedEnds are the end states the end index (topology.EndIndex) holds:
// every end but Processed, so that the happy path writes no entry, and the
// orders an operator looks for by why they ended are read without a scan.
var IndexedEnds = []workflow.State{workflow.Failed, workflow.CompensationFailed, workflow.Cancelled}

// endEntry puts the order, as the change ends it in state to, in the end
// index (a state IndexedEnds holds): its partition is the state and the
// order's shard of the deadline index (stateItem.shard: every reader of
// either index reads the same shards), its sort key the end time the
// change sets.
func (s *Store) endEntry(ch *change, it stateItem, to workflow.State) {
	if !slices.Contains(IndexedEnds, to) {
		return
	}
	ch.b.Set(ch.attr(topology.KeyEndShard), ch.b.String(topology.EndPartition(string(to), it.shard(s.shards))))
}

// Ended returns up to limit orders that ended in state (one IndexedEnds
// holds) after after and before before (zero: no bound), from the page
// token next ("" for the first page); the token returned is "" after the
// last page. It reads the end index, keys only, shard after shard, then
// the orders' items (one BatchGetItem a hundred, eventually consistent):
// a page costs in proportion to the orders of that state ended in that
// time, never to the rest of the table. Pages are in end-time order
// within a shard, not across shards.
func (s *Store) Ended(ctx context.Context, state workflow.State, after, before time.Time, limit int, next string) ([]Task, string, error) {
	if !slices.Contains(IndexedEnds, state) {
		return nil, "", fmt.Errorf("the end index holds no %s order", cmp.Or(string(state), "unnamed state's"))
	}
	ids := func(ctx context.Context, pos indexPos, want int) ([]string, indexPos, error) {
		return s.endPage(ctx, state, pos, after, before, want)
	}
	kept := func(ctx context.Context, ids []string) ([]Task, error) { return s.endedOf(ctx, ids, state) }
	return s.sharded(ctx, limit, next, ids, kept)
}

// endPage reads up to limit order ids of one shard of state's end-index
// partitions after pos, ended within [after, before] to the millisecond
// (the caller tests the bounds exactly), and where the next page starts.
func (s *Store) endPage(ctx context.Context, state workflow.State, pos indexPos, after, before time.Time, limit int) ([]string, indexPos, error) {
	b := x.New()
	part := topology.EndPartition(string(state), strconv.Itoa(pos.Shard))
	keys := []x.Cond{x.Equal(b.Plain(topology.KeyEndShard), b.String(part))}
	ended := b.Plain(topology.KeyEndedAt)
	switch {
	case !after.IsZero() && !before.IsZero():
		keys = append(keys, x.Between(ended, b.Int(after.UnixMilli()), b.Int(before.UnixMilli()+1)))
	case !after.IsZero():
		keys = append(keys, x.GreaterOrEqual(ended, b.Int(after.UnixMilli())))
	case !before.IsZero():
		keys = append(keys, x.LessOrEqual(ended, b.Int(before.UnixMilli()+1)))
	}
	return s.shardPage(ctx, shardIndex{topology.EndIndex, topology.KeyEndShard, part, topology.KeyEndedAt}, b, keys, pos, limit)
}

// endedOf reads the orders' items and keeps those still ended in state
// (a resubmitted one left the index since it was read), in the order
// given.
func (s *Store) endedOf(ctx context.Context, ids []string, state workflow.State) ([]Task, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	items, err := s.items(ctx, ids, false)
	if err != nil {
		return nil, fmt.Errorf("read ended orders: %w", err)
	}
	var out []Task
	for _, id := range ids {
		if it, ok := items[id]; ok && it.State == string(state) {
			out = append(out, it.task())
		}
	}
	return out, nil
}
