package keyline

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// opKind is what a call does to a key's item.
type opKind int

const (
	opHold opKind = iota
	opWait
	opRelease
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
	case opRelease:
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
	done = o.kind == opRelease || o.kind == opPass || o.kind == opLeave || c.take || o.kind == opWait && slices.Contains(c.reserve, o.waiter)
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
	case opRelease, opPass: // a pass whose call has a slot kept already lets this one go
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
		if end <= o.ms() && !((o.kind == opRelease || o.kind == opPass) && name == o.holder) {
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
