package flow

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/topology"
)

// result is what a call did to a key's item.
type result struct {
	// done: it holds (a hold), a slot is reserved for it (a wait), or its
	// write was made (a let, a leave).
	done   bool
	it     snapshot // the item it last saw (a done call's may be older than its write)
	handed []Waiter // waiters it handed a slot: their requests are to be sent
}

// run makes o on the key's item at k: a first write made blind for a hold
// or a let (the usual case: a slot free and no one in line, or no one to
// hand the slot to), then, until o is done or finds nothing to do, a write
// decided on the item as the last one found it (or left it). A write that
// loses a race says what the item is now (ALL_OLD); after a few in a row,
// it pauses a little first. Only ctx bounds the tries.
func (s Store) run(ctx context.Context, agent, key string, o op) (result, error) {
	k := agentKey(agent, slotsSK(key))
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
		case done && (o.kind == opLet || o.kind == opLeave || o.kind == opPass && c.let):
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
	var e *expr
	switch o.kind {
	case opHold:
		e = o.fastHold()
	case opLet:
		e = o.fastLet()
	default:
		it, err := s.read(ctx, k)
		return it, false, err
	}
	ok, it, err := s.update(ctx, k, e)
	return it, ok, err
}

// fastHold takes a free slot of a key no one waits for, if its call has no
// slot reserved, moving the item's time to live later only.
func (o op) fastHold() *expr {
	e := newExpr()
	h, n, limit, ttl := e.name(attrHolders)+"."+e.name(o.holder), e.name(attrN), e.num(int64(o.limit)), e.num(o.expires(change{take: true}))
	exp, waiting := e.name(topology.KeyExpires), e.name(attrWaiting)
	e.set = append(e.set, h+" = "+e.num(o.until), n+" = "+n+" + "+e.num(1), e.name(attrLimit)+" = "+limit, exp+" = "+ttl)
	e.cond = append(e.cond, n+" < "+limit, "attribute_not_exists("+h+")",
		"attribute_not_exists("+e.name(attrReserved)+"."+e.name(o.waiter)+")",
		"(attribute_not_exists("+waiting+") OR size("+waiting+") = "+e.num(0)+")",
		"(attribute_not_exists("+exp+") OR "+exp+" <= "+ttl+")")
	return e
}

// fastLet lets a slot go on a key no one waits for.
func (o op) fastLet() *expr {
	e := newExpr()
	h, n, waiting := e.name(attrHolders)+"."+e.name(o.holder), e.name(attrN), e.name(attrWaiting)
	e.remove = append(e.remove, h)
	e.set = append(e.set, n+" = "+n+" - "+e.num(1))
	e.cond = append(e.cond, "attribute_exists("+h+")",
		"(attribute_not_exists("+waiting+") OR size("+waiting+") = "+e.num(0)+")")
	return e
}

// update makes e on the item at k. It reports whether it did, and if not
// the item as the condition check found it (read again if the engine did
// not say).
func (s Store) update(ctx context.Context, k map[string]types.AttributeValue, e *expr) (bool, snapshot, error) {
	_, err := s.db.UpdateItem(ctx, e.input(s.table, k))
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
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item,
		ConditionExpression:                 aws.String("attribute_not_exists(#n)"),
		ExpressionAttributeNames:            map[string]string{"#n": attrN},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	if err == nil {
		return true, snapshot{}, nil
	}
	it, err := s.lost(ctx, k, err)
	return false, it, err
}

// upgrade gives an item written before the line existed its attributes.
func upgrade() *expr {
	e := newExpr()
	empty := e.val(&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}})
	for _, a := range []string{attrReserved, attrWaiting} {
		p := e.name(a)
		e.set = append(e.set, p+" = if_not_exists("+p+", "+empty+")")
	}
	t := e.name(attrTail)
	e.set = append(e.set, t+" = if_not_exists("+t+", "+e.num(0)+")")
	e.cond = append(e.cond, "attribute_exists("+e.name(attrN)+")")
	return e
}

// upgraded is it after upgrade.
func upgraded(it snapshot) snapshot {
	if it.Reserved == nil {
		it.Reserved = map[string]int64{}
	}
	if it.Waiting == nil {
		it.Waiting = map[string]waiting{}
	}
	it.current = true
	return it
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

// expr is an update expression being built: its clauses and placeholders.
type expr struct {
	set, remove, cond []string
	names             map[string]string // placeholder → name
	byName            map[string]string // name → placeholder
	values            map[string]types.AttributeValue
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, byName: map[string]string{}, values: map[string]types.AttributeValue{}}
}

// name is the placeholder of an attribute or map key name.
func (e *expr) name(n string) string {
	if p, ok := e.byName[n]; ok {
		return p
	}
	p := "#" + strconv.Itoa(len(e.names))
	e.names[p], e.byName[n] = n, p
	return p
}

// val is the placeholder of a value.
func (e *expr) val(v types.AttributeValue) string {
	p := ":" + strconv.Itoa(len(e.values))
	e.values[p] = v
	return p
}

func (e *expr) num(n int64) string { return e.val(num(n)) }

// expires moves the item's time to live to ttl if that is later than the
// item's (have), and only if it still is: never earlier.
func (e *expr) expires(ttl, have int64) {
	if ttl <= have {
		return
	}
	exp, v := e.name(topology.KeyExpires), e.num(ttl)
	e.set = append(e.set, exp+" = "+v)
	e.cond = append(e.cond, "(attribute_not_exists("+exp+") OR "+exp+" < "+v+")")
}

// input is e as an UpdateItem of the item at k that says what it found
// when its condition fails.
func (e *expr) input(table string, k map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	var clauses []string
	if len(e.set) > 0 {
		clauses = append(clauses, "SET "+strings.Join(e.set, ", "))
	}
	if len(e.remove) > 0 {
		clauses = append(clauses, "REMOVE "+strings.Join(e.remove, ", "))
	}
	update, cond := strings.Join(clauses, " "), strings.Join(e.cond, " AND ")
	in := &dynamodb.UpdateItemInput{TableName: &table, Key: k, UpdateExpression: &update, ConditionExpression: &cond,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	// DynamoDB refuses placeholders the expressions do not use.
	used := func(p string) bool { return placeholder(update, p) || placeholder(cond, p) }
	in.ExpressionAttributeNames = map[string]string{}
	for p, name := range e.names {
		if used(p) {
			in.ExpressionAttributeNames[p] = name
		}
	}
	for p, v := range e.values {
		if used(p) {
			if in.ExpressionAttributeValues == nil {
				in.ExpressionAttributeValues = map[string]types.AttributeValue{}
			}
			in.ExpressionAttributeValues[p] = v
		}
	}
	return in
}

// placeholder says whether p is in expression x (#1 is not in #12).
func placeholder(x, p string) bool {
	for i := strings.Index(x, p); i >= 0; {
		end := i + len(p)
		if end == len(x) || x[end] < '0' || x[end] > '9' {
			return true
		}
		next := strings.Index(x[end:], p)
		if next < 0 {
			return false
		}
		i = end + next
	}
	return false
}
