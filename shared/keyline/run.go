package keyline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/resilience"
)

// result is what a call did to a key's item.
type result struct {
	// done: it holds (a hold), a slot is reserved for it (a wait), or its
	// write was made (a release, a pass, a leave).
	done   bool
	it     snapshot // the item it last saw (a done call's may be older than its write)
	handed []Waiter // waiters it handed a slot: their requests are to be sent
}

// run makes o on the key's item: a first write made blind for a hold or a
// release (the usual case: a slot free and no one in line, or no one to
// hand the slot to), then, until o is done or finds nothing to do, a write
// decided on the item as the last one found it (or left it). A write that
// loses a race says what the item is now (ALL_OLD); after a few in a row,
// it pauses a little first. Only ctx bounds the tries.
func (s Store) run(ctx context.Context, agent, key string, o op) (result, error) {
	k := itemKey(agent, key)
	it, done, err := s.first(ctx, k, o)
	if err != nil || done {
		return result{done: done, it: it}, err
	}
	var r result
	for losses := 0; ; {
		c, write, done := o.decide(it)
		if !write {
			r.done, r.it = r.done || done, it
			return r, nil
		}
		ok, lost, err := s.write(ctx, k, o, it, c)
		if err != nil {
			return r, err
		}
		if !ok {
			it, losses = lost, losses+1
			if err := pause(ctx, losses); err != nil {
				return r, err
			}
			continue
		}
		r.handed = append(r.handed, o.handed(it, c)...)
		it, losses = o.apply(it, c), 0
		switch {
		case done && (o.kind == opRelease || o.kind == opLeave || o.kind == opPass && c.let):
			// Made; what one write could not hand on (maxTouch), the
			// next does.
			r.done, o = true, op{kind: opSettle, now: o.now}
		case done:
			r.done, r.it = true, it
			return r, nil
		}
	}
}

// write makes c, decided on it, on the item at k: the item's first write
// if there is none; else one update (after one giving an item written
// before the line existed its attributes). It reports whether it did, and
// if not what it found.
func (s Store) write(ctx context.Context, k map[string]types.AttributeValue, o op, it snapshot, c change) (bool, snapshot, error) {
	if !it.exists {
		return s.put(ctx, k, o.fresh(c))
	}
	if !it.current {
		if ok, lost, err := s.update(ctx, k, upgrade()); !ok || err != nil {
			return false, lost, err
		}
		it = upgraded(it) // no one waits in an item without a line: c holds
	}
	return s.update(ctx, k, o.update(it, c))
}

// first is o's first write, made blind when it is a hold or a let: done if
// it was all o had to do; else the item as the write found it (or as read,
// for a wait or a leave).
func (s Store) first(ctx context.Context, k map[string]types.AttributeValue, o op) (snapshot, bool, error) {
	var e *dynamoexpr.Builder
	switch o.kind {
	case opHold:
		e = o.fastHold()
	case opRelease:
		e = o.fastRelease()
	default:
		it, err := s.read(ctx, k)
		return it, false, err
	}
	ok, it, err := s.update(ctx, k, e)
	return it, ok, err
}

// update makes e on the item at k. It reports whether it did, and if not
// the item as the condition check found it (read again if the engine did
// not say).
func (s Store) update(ctx context.Context, k map[string]types.AttributeValue, e *dynamoexpr.Builder) (bool, snapshot, error) {
	in, err := e.UpdateInput(s.table, k)
	if err != nil {
		return false, snapshot{}, err
	}
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err = s.db.UpdateItem(ctx, in)
	if err == nil {
		return true, snapshot{}, nil
	}
	it, err := s.lost(ctx, k, err)
	return false, it, err
}

// put writes a key's first item, unless another call did first.
func (s Store) put(ctx context.Context, k map[string]types.AttributeValue, item map[string]types.AttributeValue) (bool, snapshot, error) {
	for name, v := range k {
		item[name] = v
	}
	b := dynamoexpr.New()
	b.If(dynamoexpr.NotExists(b.Name(attrN)))
	e, err := b.Build()
	if err != nil {
		return false, snapshot{}, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item, ConditionExpression: &e.Condition,
		ExpressionAttributeNames: e.Names, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	if err == nil {
		return true, snapshot{}, nil
	}
	it, err := s.lost(ctx, k, err)
	return false, it, err
}

// lost is the item a conditional write found, when err says its
// condition failed: the engine's ALL_OLD, or else read again.
func (s Store) lost(ctx context.Context, k map[string]types.AttributeValue, err error) (snapshot, error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return snapshot{}, err
	}
	if len(ccf.Item) > 0 {
		return decode(ccf.Item)
	}
	return s.read(ctx, k)
}

// read is the item at k, strongly consistent.
func (s Store) read(ctx context.Context, k map[string]types.AttributeValue) (snapshot, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return snapshot{}, err
	}
	return decode(out.Item)
}

// pause waits a little, at random, after the third race lost in a row (more
// the more are lost, up to 20 ms), so that racing calls spread out.
func pause(ctx context.Context, losses int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("after %d races lost: %w", losses, err)
	}
	if losses < 3 {
		return nil
	}
	d := time.Duration(rand.Int64N(int64(min(losses, 10)) * int64(2*time.Millisecond)))
	if err := resilience.Sleep(ctx, d); err != nil {
		return fmt.Errorf("after %d races lost: %w", losses, err)
	}
	return nil
}
