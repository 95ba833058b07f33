package statestore

import (
	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/workflow"
)

// A condition on an order's state item is written once, as checks: the
// condition a write sends is rendered from them (cond), and where the store
// must also tell, on an item it read, whether they hold (a fence after its
// write was refused, a claim refused), it tests the very same checks on that
// item (holds). The two cannot drift.

// checkOp is what a check tests.
type checkOp uint8

const (
	checkEqual  checkOp = iota // the attribute is stored and equals v
	checkStored                // the attribute is stored
	checkAbsent                // the attribute is not stored
	checkAtMost                // the attribute is a number at most v
	checkAbove                 // the attribute is a number above v
	checkAny                   // one of the checks holds
	checkAll                   // every one of the checks holds
)

// checkOn is what a check tests an attribute of.
type checkOn uint8

const (
	onRecord checkOn = iota // the record the write is about: an attribute of it, by its stored name
	onOrder                 // the order's state (St)
	onEvent                 // an event the order's round received (Evt): its eventId, by the event's name
)

// check is one test of a condition.
type check struct {
	op   checkOp
	on   checkOn
	name string // the record's attribute (recItem's stored name), or the event's name
	v    value
	of   []check // for checkAny and checkAll
}

// value is a check's operand: a number or a string.
type value struct {
	n   int64
	s   string
	num bool
}

func number(n int64) value { return value{n: n, num: true} }

func text(s string) value { return value{s: s} }

func (v value) operand(b *x.Builder) x.Operand {
	if v.num {
		return b.Int(v.n)
	}
	return b.String(v.s)
}

func recIs(name string, v value) check     { return check{op: checkEqual, name: name, v: v} }
func recHas(name string) check             { return check{op: checkStored, name: name} }
func recLacks(name string) check           { return check{op: checkAbsent, name: name} }
func recAtMost(name string, v value) check { return check{op: checkAtMost, name: name, v: v} }
func recAbove(name string, v value) check  { return check{op: checkAbove, name: name, v: v} }
func recState(s workflow.State) check      { return recIs("s", text(string(s))) }
func orderIs(s workflow.State) check       { return check{op: checkEqual, on: onOrder, v: text(string(s))} }
func eventIs(name, id string) check {
	return check{op: checkEqual, on: onEvent, name: name, v: text(id)}
}
func eventAbsent(name string) check { return check{op: checkAbsent, on: onEvent, name: name} }
func anyOf(checks ...check) check   { return check{op: checkAny, of: checks} }
func allOf(checks ...check) check   { return check{op: checkAll, of: checks} }

// cond is c as a write's condition, on record r.
func (c check) cond(ch *change, r recAt) x.Cond {
	switch c.op {
	case checkAny, checkAll:
		conds := make([]x.Cond, len(c.of))
		for i, k := range c.of {
			conds[i] = k.cond(ch, r)
		}
		if c.op == checkAny {
			return x.Or(conds...)
		}
		return x.And(conds...)
	}
	var p x.Path
	switch c.on {
	case onOrder:
		p = ch.attr("St")
	case onEvent:
		p = ch.b.Key(ch.attr("Evt"), c.name)
	default:
		p = ch.field(r, c.name)
	}
	switch c.op {
	case checkStored:
		return x.Exists(p)
	case checkAbsent:
		return x.NotExists(p)
	case checkAtMost:
		return x.LessOrEqual(p, c.v.operand(ch.b))
	case checkAbove:
		return x.Greater(p, c.v.operand(ch.b))
	}
	return x.Equal(p, c.v.operand(ch.b))
}

// holds reports whether c holds on the order it, of which r is the record
// the check is about, as DynamoDB would find it.
func (c check) holds(it stateItem, r recItem) bool {
	switch c.op {
	case checkAny:
		for _, k := range c.of {
			if k.holds(it, r) {
				return true
			}
		}
		return false
	case checkAll:
		return allHold(c.of, it, r)
	}
	var v value
	var stored bool
	switch c.on {
	case onOrder:
		v, stored = text(it.State), it.State != ""
	case onEvent:
		var id string
		id, stored = it.Events[c.name]
		v = text(id)
	default:
		v, stored = r.attr(c.name)
	}
	switch c.op {
	case checkStored:
		return stored
	case checkAbsent:
		return !stored
	case checkAtMost:
		return stored && v.num && v.n <= c.v.n
	case checkAbove:
		return stored && v.num && v.n > c.v.n
	}
	return stored && v == c.v
}

// allHold reports whether every one of checks holds on the order it, of
// which r is the record they are about.
func allHold(checks []check, it stateItem, r recItem) bool {
	for _, k := range checks {
		if !k.holds(it, r) {
			return false
		}
	}
	return true
}

// attr is the record's attribute a check may test, by its stored name (its
// dynamodbav name), and whether it is stored: an omitempty field at its zero
// value is not. (A test holds this table to the record's encoding.)
func (r recItem) attr(name string) (value, bool) {
	switch name {
	case "s":
		return text(r.State), true
	case "r":
		return number(int64(r.Round)), true
	case "a":
		return text(r.Agent), true
	case "k":
		return number(int64(r.Attempt)), r.Attempt != 0
	case "d":
		return number(r.DueAt), r.DueAt != 0
	case "lk":
		return text(r.LockedBy), r.LockedBy != ""
	case "tk":
		return text(r.Token), r.Token != ""
	case "ki":
		return text(r.Kind), r.Kind != ""
	case "wa":
		return number(r.Armed), r.Armed != 0
	case "wk":
		return number(r.Woken), r.Woken != 0
	}
	return value{}, false
}
