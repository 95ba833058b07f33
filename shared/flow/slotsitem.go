package flow

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/topology"
)

// A key's item's attributes.
const (
	attrHolders  = "Holders"
	attrReserved = "Reserved"
	attrWaiting  = "Waiting"
	attrN        = "N"
	attrLimit    = "Limit"
	attrTail     = "Tail"
)

// slotsItem is a key's item as stored.
type slotsItem struct {
	Holders  map[string]int64   `dynamodbav:"Holders"`
	Reserved map[string]int64   `dynamodbav:"Reserved"`
	Waiting  map[string]waiting `dynamodbav:"Waiting"`
	N        int                `dynamodbav:"N"`
	Limit    int                `dynamodbav:"Limit"`
	Tail     int64              `dynamodbav:"Tail"`
}

// waiting is a waiter in line as stored: its number in the line (Seq, from
// Tail), its request, and when it joined.
type waiting struct {
	Seq     int64  `dynamodbav:"s"`
	Request string `dynamodbav:"r"`
	Since   int64  `dynamodbav:"a"`
}

// bytes is about what w takes in the item (its ID twice: a map key, and
// the numbers' and names' overhead).
func (w waiting) bytes(id string) int { return len(id) + len(w.Request) + 32 }

// snapshot is a key's item in one consistent state: as a read, a write's
// result or a failed write's condition check saw it.
type snapshot struct {
	slotsItem
	exists bool
	// current: it has the line's attributes (an item written before the
	// line existed has only Holders and N).
	current bool
	exp     int64 // its time to live (topology.KeyExpires), Unix seconds
}

func decode(raw map[string]types.AttributeValue) (snapshot, error) {
	var it snapshot
	if len(raw) == 0 {
		return it, nil
	}
	if err := attributevalue.UnmarshalMap(raw, &it.slotsItem); err != nil {
		return it, fmt.Errorf("decode: %w", err)
	}
	if v, ok := raw[topology.KeyExpires]; ok {
		if err := attributevalue.Unmarshal(v, &it.exp); err != nil {
			return it, fmt.Errorf("decode its time to live: %w", err)
		}
	}
	_, r := raw[attrReserved]
	_, w := raw[attrWaiting]
	_, t := raw[attrTail]
	it.exists, it.current = true, r && w && t
	return it, nil
}

// line is the waiters' IDs, the first in line first.
func (it snapshot) line() []string {
	ids := make([]string, 0, len(it.Waiting))
	for id := range it.Waiting {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(it.Waiting[a].Seq, it.Waiting[b].Seq), cmp.Compare(a, b))
	})
	return ids
}

// position is id's place in line (1: next), 0 if not in it.
func (it snapshot) position(id string) int {
	w, ok := it.Waiting[id]
	if !ok {
		return 0
	}
	p := 1
	for other, v := range it.Waiting {
		if v.Seq < w.Seq || v.Seq == w.Seq && other < id {
			p++
		}
	}
	return p
}

func (it snapshot) waiter(id string) Waiter {
	w := it.Waiting[id]
	return Waiter{ID: id, Request: json.RawMessage(w.Request), Since: time.UnixMilli(w.Since).UTC()}
}

// next is the earliest end after now of a hold or a reservation (zero if
// none).
func (it snapshot) next(now time.Time) time.Time {
	var next int64
	for _, m := range []map[string]int64{it.Holders, it.Reserved} {
		for _, end := range m {
			if end > now.UnixMilli() && (next == 0 || end < next) {
				next = end
			}
		}
	}
	if next == 0 {
		return time.Time{}
	}
	return time.UnixMilli(next).In(now.Location())
}

// room says whether the line takes a waiter of b bytes more.
func (it snapshot) room(b int) bool {
	if len(it.Waiting) >= MaxWaiters {
		return false
	}
	for id, w := range it.Waiting {
		b += w.bytes(id)
	}
	return b <= MaxLineBytes
}

// opKind is what a call does to a key's item.
type opKind int

const (
	opHold opKind = iota
	opWait
	opLet
	opLeave
	opSettle // hands on what a let or a leave freed and could not hand on in its write
	opPass   // a holder's slot reserved for another call (its undo's) in the same write
)

// op is one call to a key's slots.
type op struct {
	kind   opKind
	holder string  // hold, let, pass: the attempt
	waiter string  // hold (WaiterOf(holder)), wait, leave: its call; pass: the call it passes to
	join   waiting // wait: the waiter as it joins
	until  int64   // hold: when its hold ends, Unix ms; pass: when the reservation lapses
	limit  int     // hold, wait: the key's slots (let, leave: the item's)
	now    time.Time
}

func (o op) ms() int64 { return o.now.UnixMilli() }

// maxTouch is the most holds, reservations and waiters one write changes
// (its expressions stay short); more is done by the next write.
const maxTouch = 25

// ended is a hold or a reservation past its end, removed if it is still
// that one.
type ended struct {
	attr, name string
	end        int64
}

// change is one write to a key's item: what it removes and hands on.
type change struct {
	ended []ended
	let   bool   // o.holder lets its slot go
	leave string // o.waiter leaves (attrWaiting: the line; attrReserved: its slot)
	join  bool   // o.waiter joins the line, at Tail
	// reserve are the waiters handed a slot (o.waiter's own for a wait
	// that found one free).
	reserve []string
	take    bool // o.holder takes a slot (out of the line, if its call is in it)
	convert bool // o.holder takes the slot reserved for its call
	pass    bool // o.holder's slot is reserved for o.waiter instead (out of the line, if it waits in it)
	// lineServed: every waiter in line is handed a slot (or takes one) and
	// slots are left, free or for a call not in line: no one may have
	// joined meanwhile (Tail unchanged).
	lineServed bool
	n          int // N after
}

// decide is o's next write on the item as it: none (write false) when o
// has nothing more to do; done says o reached its aim (a hold holds, a wait
// has its slot reserved, a let or a leave is made), once the write is made.
func (o op) decide(it snapshot) (c change, write, done bool) {
	switch o.kind {
	case opHold:
		if _, ok := it.Holders[o.holder]; ok {
			return c, false, true
		}
		if _, ok := it.Reserved[o.waiter]; ok {
			return change{convert: true, n: it.N}, true, true
		}
	case opWait:
		if _, ok := it.Reserved[o.waiter]; ok {
			return c, false, true
		}
	case opLet:
		if _, ok := it.Holders[o.holder]; !ok {
			return c, false, false // not a holder: nothing to let go
		}
	case opPass:
		if _, ok := it.Holders[o.holder]; !ok {
			return c, false, false // not a holder: nothing to pass
		}
		if _, ok := it.Reserved[o.waiter]; !ok {
			return change{pass: true, n: it.N}, true, true
		}
		// A slot is kept for the call already: this one is let go.
	case opLeave:
		_, waits := it.Waiting[o.waiter]
		_, reserved := it.Reserved[o.waiter]
		if !waits && !reserved {
			return c, false, false // not in line
		}
	}
	c = o.plan(it)
	if c.empty() {
		return c, false, false
	}
	done = o.kind == opLet || o.kind == opPass || o.kind == opLeave || c.take || o.kind == opWait && slices.Contains(c.reserve, o.waiter)
	return c, true, done
}

func (c change) empty() bool {
	return len(c.ended) == 0 && !c.let && c.leave == "" && !c.join && len(c.reserve) == 0 && !c.take && !c.convert && !c.pass
}

// plan is o's write on it: it removes the holds and reservations that have
// ended, does o's own part (let go, leave, join), then hands the free slots
// to the line, first come first served; a hold takes one when its call's
// turn came, or, not in line, when no one waits.
func (o op) plan(it snapshot) change {
	var c change
	n := it.N
	for _, e := range it.ended(o) {
		if len(c.ended) < maxTouch {
			c.ended = append(c.ended, e)
			n--
		}
	}
	line := it.line()
	switch o.kind {
	case opLet, opPass: // a pass whose call has a slot kept already lets this one go
		c.let = true
		n--
	case opLeave:
		c.leave = attrWaiting
		if _, ok := it.Reserved[o.waiter]; ok {
			c.leave = attrReserved
			n--
		}
		line = slices.DeleteFunc(line, func(id string) bool { return id == o.waiter })
	case opWait:
		if _, ok := it.Waiting[o.waiter]; !ok && it.room(o.join.bytes(o.waiter)) {
			c.join = true
			line = append(line, o.waiter)
		}
	}
	limit := cmp.Or(o.limit, it.Limit, it.N) // let, leave on an item with no limit: hand on what they free
	free := limit - n
	served := 0
	for _, id := range line {
		if free <= 0 || len(c.ended)+len(c.reserve) >= maxTouch {
			break
		}
		switch {
		case id == o.waiter && o.kind == opHold:
			c.take = true
		case id == o.waiter && c.join: // it finds a slot free as it joins: only if no one joined before it
			c.join, c.lineServed = false, true
			c.reserve = append(c.reserve, id)
		default:
			c.reserve = append(c.reserve, id)
		}
		free--
		served++
		n++
	}
	if free > 0 && served == len(line) {
		// The whole line is served and slots are left: only if no one
		// joined it meanwhile. A hold not in line takes one.
		c.lineServed = true
		if o.kind == opHold && !c.take {
			c.take = true
			n++
		}
	}
	c.n = n
	return c
}

// ended is what in it has passed its end at o's now (the holds and the
// reservations not o's own), the earliest first.
func (it snapshot) ended(o op) []ended {
	var out []ended
	for name, end := range it.Holders {
		if end <= o.ms() && !((o.kind == opLet || o.kind == opPass) && name == o.holder) {
			out = append(out, ended{attrHolders, name, end})
		}
	}
	for name, end := range it.Reserved {
		if end <= o.ms() && name != o.waiter {
			out = append(out, ended{attrReserved, name, end})
		}
	}
	slices.SortFunc(out, func(a, b ended) int { return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.name, b.name)) })
	return out
}

// expires is the time to live c's item needs, Unix seconds, rounded up to
// the hour (so that holds made within an hour agree on it); 0 if c holds
// nothing new.
func (o op) expires(c change) int64 {
	var last int64
	if c.take || c.convert || c.pass {
		last = o.until
	}
	if len(c.reserve) > 0 {
		last = max(last, o.now.Add(ReserveFor).UnixMilli())
	}
	if c.join {
		last = max(last, o.ms())
	}
	if last == 0 {
		return 0
	}
	sec := time.UnixMilli(last).Add(slotsIdle).Unix()
	return (sec + 3599) / 3600 * 3600
}

// handed is the waiters c reserves a slot for, but o's own; and a pass's
// call, if it waited in line (its request is sent: it takes the slot).
func (o op) handed(it snapshot, c change) []Waiter {
	var out []Waiter
	if _, waits := it.Waiting[o.waiter]; c.pass && waits {
		out = append(out, it.waiter(o.waiter))
	}
	for _, id := range c.reserve {
		if id != o.waiter || o.kind != opWait {
			out = append(out, it.waiter(id))
		}
	}
	return out
}

// apply is it after c is made (by o).
func (o op) apply(it snapshot, c change) snapshot {
	next := it
	next.Holders, next.Reserved, next.Waiting = maps.Clone(it.Holders), maps.Clone(it.Reserved), maps.Clone(it.Waiting)
	for _, m := range []*map[string]int64{&next.Holders, &next.Reserved} {
		if *m == nil {
			*m = map[string]int64{}
		}
	}
	if next.Waiting == nil {
		next.Waiting = map[string]waiting{}
	}
	ends := map[string]map[string]int64{attrHolders: next.Holders, attrReserved: next.Reserved}
	for _, x := range c.ended {
		delete(ends[x.attr], x.name)
	}
	switch {
	case c.let:
		delete(next.Holders, o.holder)
	case c.leave == attrWaiting:
		delete(next.Waiting, o.waiter)
	case c.leave == attrReserved:
		delete(next.Reserved, o.waiter)
	case c.convert:
		delete(next.Reserved, o.waiter)
		next.Holders[o.holder] = o.until
	case c.pass:
		delete(next.Holders, o.holder)
		delete(next.Waiting, o.waiter)
		next.Reserved[o.waiter] = o.until
	case c.join:
		w := o.join
		w.Seq = it.Tail
		next.Waiting[o.waiter], next.Tail = w, it.Tail+1
	}
	for _, id := range c.reserve {
		delete(next.Waiting, id)
		next.Reserved[id] = o.now.Add(ReserveFor).UnixMilli()
	}
	if c.take {
		delete(next.Waiting, o.waiter)
		next.Holders[o.holder] = o.until
	}
	next.N, next.exists, next.current = c.n, true, true
	if o.limit > 0 {
		next.Limit = o.limit
	}
	next.exp = max(it.exp, o.expires(c))
	return next
}

// update is c as one conditional UpdateItem on it: each thing it removes or
// hands on is conditioned on being as it found it, and N on being what it
// counted.
func (o op) update(it snapshot, c change) *expr {
	e := newExpr()
	holders, reserved, waiting := e.name(attrHolders), e.name(attrReserved), e.name(attrWaiting)
	if c.convert {
		w, h := e.name(o.waiter), e.name(o.holder)
		e.remove = append(e.remove, reserved+"."+w)
		e.set = append(e.set, holders+"."+h+" = "+e.num(o.until))
		e.cond = append(e.cond, "attribute_exists("+reserved+"."+w+")", "attribute_not_exists("+holders+"."+h+")")
		e.expires(o.expires(c), it.exp)
		return e
	}
	if c.pass { // the slot changes hands: N as it is
		w, h := e.name(o.waiter), e.name(o.holder)
		e.remove = append(e.remove, holders+"."+h)
		e.set = append(e.set, reserved+"."+w+" = "+e.num(o.until))
		e.cond = append(e.cond, "attribute_exists("+holders+"."+h+")", "attribute_not_exists("+reserved+"."+w+")")
		if _, waits := it.Waiting[o.waiter]; waits { // its call leaves the line: it has its slot
			e.remove = append(e.remove, waiting+"."+w)
			e.cond = append(e.cond, "attribute_exists("+waiting+"."+w+")")
		} else {
			e.cond = append(e.cond, "attribute_not_exists("+waiting+"."+w+")")
		}
		e.expires(o.expires(c), it.exp)
		return e
	}
	n := e.name(attrN)
	e.cond = append(e.cond, n+" = "+e.num(int64(it.N)))
	if c.n != it.N {
		e.set = append(e.set, n+" = "+e.num(int64(c.n)))
	}
	for _, x := range c.ended {
		p := e.name(x.attr) + "." + e.name(x.name)
		e.remove = append(e.remove, p)
		e.cond = append(e.cond, p+" = "+e.num(x.end))
	}
	if c.let {
		p := holders + "." + e.name(o.holder)
		e.remove = append(e.remove, p)
		e.cond = append(e.cond, "attribute_exists("+p+")")
	}
	if c.leave != "" {
		p := e.name(c.leave) + "." + e.name(o.waiter)
		e.remove = append(e.remove, p)
		e.cond = append(e.cond, "attribute_exists("+p+")")
	}
	tail := e.name(attrTail)
	if c.join {
		w := e.name(o.waiter)
		entry := o.join
		entry.Seq = it.Tail
		e.set = append(e.set, waiting+"."+w+" = "+e.val(entryValue(entry)), tail+" = "+e.num(it.Tail+1))
		// Nor one a slot was passed to meanwhile (Pass writes neither N nor
		// Tail): it would hold two.
		e.cond = append(e.cond, "attribute_not_exists("+waiting+"."+w+")", "attribute_not_exists("+reserved+"."+w+")")
	}
	if c.join || c.lineServed {
		e.cond = append(e.cond, tail+" = "+e.num(it.Tail))
	}
	lapse := o.now.Add(ReserveFor).UnixMilli()
	for _, id := range c.reserve {
		w := e.name(id)
		e.set = append(e.set, reserved+"."+w+" = "+e.num(lapse))
		if _, ok := it.Waiting[id]; ok {
			e.remove = append(e.remove, waiting+"."+w)
			e.cond = append(e.cond, "attribute_exists("+waiting+"."+w+")", "attribute_not_exists("+reserved+"."+w+")")
		} else { // o's waiter, as it joins
			e.cond = append(e.cond, "attribute_not_exists("+waiting+"."+w+")", "attribute_not_exists("+reserved+"."+w+")")
		}
	}
	if c.take {
		h := e.name(o.holder)
		e.set = append(e.set, holders+"."+h+" = "+e.num(o.until))
		e.cond = append(e.cond, "attribute_not_exists("+holders+"."+h+")", "attribute_not_exists("+reserved+"."+e.name(o.waiter)+")")
		if _, ok := it.Waiting[o.waiter]; ok {
			w := e.name(o.waiter)
			e.remove = append(e.remove, waiting+"."+w)
			e.cond = append(e.cond, "attribute_exists("+waiting+"."+w+")")
		}
	}
	if o.limit > 0 && o.limit != it.Limit {
		e.set = append(e.set, e.name(attrLimit)+" = "+e.num(int64(o.limit)))
	}
	e.expires(o.expires(c), it.exp)
	return e
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
