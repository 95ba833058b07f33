package keyline

import (
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/topology"
)

// update is c as one conditional UpdateItem on it: each thing it removes or
// hands on is conditioned on being as it found it, and N on being what it
// counted (a slot that changes hands keeps N as it is).
func (o op) update(it snapshot, c change) *dynamoexpr.Builder {
	b := dynamoexpr.New()
	p := paths{b}
	switch {
	case c.convert:
		w, h := p.reserved(o.waiter), p.holder(o.holder)
		b.Remove(w)
		b.Set(h, b.Int(o.until))
		b.If(dynamoexpr.Exists(w), dynamoexpr.NotExists(h))
	case c.pass:
		h, w := p.holder(o.holder), p.reserved(o.waiter)
		b.Remove(h)
		b.Set(w, b.Int(o.until))
		b.If(dynamoexpr.Exists(h), dynamoexpr.NotExists(w))
		if _, waits := it.Waiting[o.waiter]; waits { // its call leaves the line: it has its slot
			b.Remove(p.waiting(o.waiter))
			b.If(dynamoexpr.Exists(p.waiting(o.waiter)))
		} else {
			b.If(dynamoexpr.NotExists(p.waiting(o.waiter)))
		}
	default:
		o.counted(b, it, c)
	}
	p.expires(o.expires(c), it.exp)
	return b
}

// counted is the part of c's write that changes who holds, is reserved or
// waits, on the condition that N is what it counted.
func (o op) counted(b *dynamoexpr.Builder, it snapshot, c change) {
	p := paths{b}
	n := b.Name(attrN)
	b.If(dynamoexpr.Equal(n, b.Int(int64(it.N))))
	if c.n != it.N {
		b.Set(n, b.Int(int64(c.n)))
	}
	for _, x := range c.ended {
		e := b.Key(b.Name(x.attr), x.name)
		b.Remove(e)
		b.If(dynamoexpr.Equal(e, b.Int(x.end)))
	}
	if c.let {
		b.Remove(p.holder(o.holder))
		b.If(dynamoexpr.Exists(p.holder(o.holder)))
	}
	if c.leave != "" {
		w := b.Key(b.Name(c.leave), o.waiter)
		b.Remove(w)
		b.If(dynamoexpr.Exists(w))
	}
	tail := b.Name(attrTail)
	if c.join {
		entry := o.join
		entry.Seq = it.Tail
		b.Set(p.waiting(o.waiter), b.Value(entryValue(entry)))
		b.Set(tail, b.Int(it.Tail+1))
		// Nor one a slot was passed to meanwhile (Pass writes neither N nor
		// Tail): it would hold two.
		b.If(dynamoexpr.NotExists(p.waiting(o.waiter)), dynamoexpr.NotExists(p.reserved(o.waiter)))
	}
	if c.join || c.lineServed {
		b.If(dynamoexpr.Equal(tail, b.Int(it.Tail)))
	}
	lapse := b.Int(o.now.Add(ReserveFor).UnixMilli())
	for _, id := range c.reserve {
		b.Set(p.reserved(id), lapse)
		b.If(dynamoexpr.NotExists(p.reserved(id)))
		if _, ok := it.Waiting[id]; ok {
			b.Remove(p.waiting(id))
			b.If(dynamoexpr.Exists(p.waiting(id)))
		} else { // o's waiter, as it joins
			b.If(dynamoexpr.NotExists(p.waiting(id)))
		}
	}
	if c.take {
		b.Set(p.holder(o.holder), b.Int(o.until))
		b.If(dynamoexpr.NotExists(p.holder(o.holder)), dynamoexpr.NotExists(p.reserved(o.waiter)))
		if _, ok := it.Waiting[o.waiter]; ok {
			b.Remove(p.waiting(o.waiter))
			b.If(dynamoexpr.Exists(p.waiting(o.waiter)))
		}
	}
	if o.limit > 0 && o.limit != it.Limit {
		b.Set(b.Name(attrLimit), b.Int(int64(o.limit)))
	}
}

// paths names a key's item's attributes in a write being built.
type paths struct{ b *dynamoexpr.Builder }

// holder is the hold of an attempt (Holders.ID).
func (p paths) holder(id string) dynamoexpr.Path { return p.b.Key(p.b.Name(attrHolders), id) }

// reserved is the reservation of a call (Reserved.ID).
func (p paths) reserved(id string) dynamoexpr.Path { return p.b.Key(p.b.Name(attrReserved), id) }

// waiting is the place in line of a call (Waiting.ID).
func (p paths) waiting(id string) dynamoexpr.Path { return p.b.Key(p.b.Name(attrWaiting), id) }

// expires moves the item's time to live to ttl if that is later than the
// item's (have), and only if it still is: never earlier.
func (p paths) expires(ttl, have int64) {
	if ttl <= have {
		return
	}
	exp, v := p.b.Name(topology.KeyExpires), p.b.Int(ttl)
	p.b.Set(exp, v)
	p.b.If(dynamoexpr.Or(dynamoexpr.NotExists(exp), dynamoexpr.Less(exp, v)))
}

// fresh is c as the item's first write (there is none): the whole item.
func (o op) fresh(c change) map[string]types.AttributeValue {
	holders := map[string]types.AttributeValue{}
	if c.take {
		holders[o.holder] = num(o.until)
	}
	reserved := map[string]types.AttributeValue{}
	for _, id := range c.reserve {
		reserved[id] = num(o.now.Add(ReserveFor).UnixMilli())
	}
	waiting, tail := map[string]types.AttributeValue{}, int64(0)
	if c.join {
		waiting[o.waiter], tail = entryValue(o.join), 1
	}
	return map[string]types.AttributeValue{
		attrHolders:         &types.AttributeValueMemberM{Value: holders},
		attrReserved:        &types.AttributeValueMemberM{Value: reserved},
		attrWaiting:         &types.AttributeValueMemberM{Value: waiting},
		attrN:               num(int64(c.n)),
		attrLimit:           num(int64(o.limit)),
		attrTail:            num(tail),
		topology.KeyExpires: num(o.expires(c)),
	}
}

func entryValue(w waiting) types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"s": num(w.Seq), "r": &types.AttributeValueMemberS{Value: w.Request}, "a": num(w.Since)}}
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// fastHold takes a free slot of a key no one waits for, if its call has no
// slot reserved, moving the item's time to live later only.
func (o op) fastHold() *dynamoexpr.Builder {
	b := dynamoexpr.New()
	p := paths{b}
	h, n, limit, ttl := p.holder(o.holder), b.Name(attrN), b.Int(int64(o.limit)), b.Int(o.expires(change{take: true}))
	exp := b.Name(topology.KeyExpires)
	b.Set(h, b.Int(o.until))
	b.Set(n, dynamoexpr.Plus(n, b.Int(1)))
	b.Set(b.Name(attrLimit), limit)
	b.Set(exp, ttl)
	b.If(dynamoexpr.Less(n, limit), dynamoexpr.NotExists(h), dynamoexpr.NotExists(p.reserved(o.waiter)), p.nobodyWaits(),
		dynamoexpr.Or(dynamoexpr.NotExists(exp), dynamoexpr.LessOrEqual(exp, ttl)))
	return b
}

// fastRelease lets a slot go on a key no one waits for.
func (o op) fastRelease() *dynamoexpr.Builder {
	b := dynamoexpr.New()
	p := paths{b}
	h, n := p.holder(o.holder), b.Name(attrN)
	b.Remove(h)
	b.Set(n, dynamoexpr.Minus(n, b.Int(1)))
	b.If(dynamoexpr.Exists(h), p.nobodyWaits())
	return b
}

// nobodyWaits is the condition that the key's line is empty (or was never
// made).
func (p paths) nobodyWaits() dynamoexpr.Cond {
	w := p.b.Name(attrWaiting)
	return dynamoexpr.Or(dynamoexpr.NotExists(w), dynamoexpr.Equal(dynamoexpr.Size(w), p.b.Int(0)))
}

// upgrade gives an item written before the line existed its attributes.
func upgrade() *dynamoexpr.Builder {
	b := dynamoexpr.New()
	empty := b.Value(&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}})
	for _, a := range []string{attrReserved, attrWaiting} {
		b.Set(b.Name(a), dynamoexpr.IfNotExists(b.Name(a), empty))
	}
	b.Set(b.Name(attrTail), dynamoexpr.IfNotExists(b.Name(attrTail), b.Int(0)))
	b.If(dynamoexpr.Exists(b.Name(attrN)))
	return b
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
