package statestore

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// MaxExpressionBytes is DynamoDB's limit on an update's or a condition's
// expression (dynamoexpr.MaxBytes). A write names each record it changes
// field by field (a short alias each, R.#0…), which is the cheapest form
// while it changes a few; a write that would pass the limit so (a sweep that
// gives back 30 items, a cancel of 30 accepted async items, a held order
// going on) is written in a form that does not grow with its fields: each
// record it changes whole (R.#0 = :1…), or the whole record map (R = :1),
// on the condition that the order is still the version it was decided on
// (Store.Apply). DynamoDB bills an update by the larger of the item before
// and after, so the whole form costs no more write units.
const MaxExpressionBytes = x.MaxBytes

// ErrTooLarge means a write's expression would pass DynamoDB's limit
// (dynamoexpr.ErrTooLarge). It is never sent. Store.Apply never returns it
// (it writes whole records instead); the single-record writes (a claim, an
// arming) cannot reach it.
var ErrTooLarge = x.ErrTooLarge

// opKind is what a recOp does to a record's field.
type opKind int

const (
	opSet    opKind = iota // the field = v
	opRemove               // the field removed
	opCount                // the field + 1 (0 if absent)
	opKeep                 // the field = v if absent
	opAppend               // v (a list) appended to the field (a list)
)

// recOp is one change to one field of a record.
type recOp struct {
	field string
	kind  opKind
	v     types.AttributeValue
}

// form is how a change writes the records it changes.
type form int

const (
	byField  form = iota // each field it changes named: the cheapest while it changes a few
	byRecord             // each record it changes written whole, over the item as read
	byMap                // the whole record map written, over the item as read
)

// change builds one conditional UpdateItem of an order's state item with
// the typed builder (dynamoexpr): a record's transition and the task's are
// one atomic write. Its task's clauses and its conditions go to the builder
// as they are made; the changes to its records' fields are kept apart
// (ops), to be written in one form or another when it is sent (input).
// Every change increments the item's Version.
type change struct {
	b    *x.Builder
	recs map[string]x.Path // a record's sort key → its path (R.#0…)
	// ops are the changes to each record's fields, by its sort key, in the
	// order the records were first changed (order).
	ops       map[string][]recOp
	order     []string
	none      x.Operand // the empty list's placeholder, once used
	versioned bool      // conditioned on the item's version
	now       time.Time
	ends      bool          // it may end the task: the store sets when it expires
	retain    time.Duration // the order's retention, if it ends (0: forever)
	id        string        // the write's own id (W): see Store.updateItem
}

func newChange(now time.Time) *change {
	c := &change{b: x.New(), recs: map[string]x.Path{}, ops: map[string][]recOp{}, now: now, id: writeID()}
	v := c.b.Plain("V")
	c.b.Set(v, x.Plus(v, c.b.Int(1)))
	c.b.Set(c.b.Plain("U"), c.at())
	c.b.Set(c.b.Plain(WriteIDAttribute), c.b.String(c.id))
	return c
}

// recAt is a record of the order in a change: its sort key and its path.
type recAt struct {
	sk   string
	path x.Path
}

// rec is record r in the change (R.#0, R.#1…, one alias per record however
// often it is named).
func (c *change) rec(r workflow.Ref) recAt {
	sk := sortKey(r)
	p, ok := c.recs[sk]
	if !ok {
		p = c.b.Key(c.b.Plain("R"), sk)
		c.recs[sk] = p
	}
	return recAt{sk: sk, path: p}
}

// field is the path of record r's field (its stored name).
func (c *change) field(r recAt, name string) x.Path { return c.b.Field(r.path, name) }

// attr is the order's attribute name, as the item stores it.
func (c *change) attr(name string) x.Path { return c.b.Plain(name) }

// at is the placeholder of the change's time.
func (c *change) at() x.Operand { return c.b.Int(ms(c.now)) }

// runs makes the change conditional on the order running version of its
// workflow (none: no condition): a decision taken on a version's definition
// is never written on an order moved to another since it was read.
func (c *change) runs(version string) {
	if version != "" {
		c.b.If(x.Equal(c.attr("Wv"), c.b.String(version)))
	}
}

// require makes the change conditional on every one of checks, on record r.
func (c *change) require(r recAt, checks ...check) {
	for _, k := range checks {
		c.b.If(k.cond(c, r))
	}
}

// incident appends a line to record r's incidents: something besides being
// made ready, claimed and done, which the record's own times tell.
func (c *change) incident(r recAt, format string, args ...any) {
	c.op(r, recOp{field: "ev", kind: opAppend,
		v: &types.AttributeValueMemberL{Value: []types.AttributeValue{str(incident(c.now, format, args...))}}})
}

// put sets record r's field to v.
func (c *change) put(r recAt, field string, v types.AttributeValue) {
	c.op(r, recOp{field: field, kind: opSet, v: v})
}

// drop removes record r's fields.
func (c *change) drop(r recAt, fields ...string) {
	for _, f := range fields {
		c.op(r, recOp{field: f, kind: opRemove})
	}
}

// count adds one to record r's field (from 0).
func (c *change) count(r recAt, field string) { c.op(r, recOp{field: field, kind: opCount}) }

// keep sets record r's field to v, unless it is set.
func (c *change) keep(r recAt, field string, v types.AttributeValue) {
	c.op(r, recOp{field: field, kind: opKeep, v: v})
}

func (c *change) op(r recAt, o recOp) {
	if _, ok := c.ops[r.sk]; !ok {
		c.order = append(c.order, r.sk)
	}
	c.ops[r.sk] = append(c.ops[r.sk], o)
}

// fields writes the record ops field by field.
func (c *change) fields() {
	for _, sk := range c.order {
		for _, o := range c.ops[sk] {
			f := c.b.Field(c.recs[sk], o.field)
			switch o.kind {
			case opSet:
				c.b.Set(f, c.b.Value(o.v))
			case opRemove:
				c.b.Remove(f)
			case opCount:
				c.b.Set(f, x.Plus(x.IfNotExists(f, c.b.Int(0)), c.b.Int(1)))
			case opKeep:
				c.b.Set(f, x.IfNotExists(f, c.b.Value(o.v)))
			case opAppend:
				if c.none == nil {
					c.none = c.b.Value(&types.AttributeValueMemberL{Value: []types.AttributeValue{}})
				}
				c.b.Set(f, x.ListAppend(x.IfNotExists(f, c.none), c.b.Value(o.v)))
			}
		}
	}
}

// wholeRecords writes each record the ops change whole, as the ops leave
// it, the item (it) as read.
func (c *change) wholeRecords(it stateItem) error {
	for _, sk := range c.order {
		m, err := c.after(it, sk)
		if err != nil {
			return err
		}
		c.b.Set(c.recs[sk], c.b.Value(&types.AttributeValueMemberM{Value: m}))
	}
	return nil
}

// wholeMap writes the whole record map, every record as the ops leave it,
// the item (it) as read.
func (c *change) wholeMap(it stateItem) error {
	all := make(map[string]types.AttributeValue, len(it.Recs))
	for sk, r := range it.Recs {
		m, err := attributevalue.MarshalMap(r)
		if err != nil {
			return fmt.Errorf("encode record %s: %w", sk, err)
		}
		all[sk] = &types.AttributeValueMemberM{Value: m}
	}
	for _, sk := range c.order {
		m, err := c.after(it, sk)
		if err != nil {
			return err
		}
		all[sk] = &types.AttributeValueMemberM{Value: m}
	}
	c.b.Set(c.attr("R"), c.b.Value(&types.AttributeValueMemberM{Value: all}))
	return nil
}

// after is record sk of it as the ops leave it.
func (c *change) after(it stateItem, sk string) (map[string]types.AttributeValue, error) {
	m, err := attributevalue.MarshalMap(it.Recs[sk])
	if err != nil {
		return nil, fmt.Errorf("encode record %s: %w", sk, err)
	}
	for _, o := range c.ops[sk] {
		apply(m, o)
	}
	return m, nil
}

// apply does o to the record m.
func apply(m map[string]types.AttributeValue, o recOp) {
	switch o.kind {
	case opSet:
		m[o.field] = o.v
	case opRemove:
		delete(m, o.field)
	case opCount:
		n := int64(0)
		if v, ok := m[o.field].(*types.AttributeValueMemberN); ok {
			n, _ = strconv.ParseInt(v.Value, 10, 64)
		}
		m[o.field] = num(n + 1)
	case opKeep:
		if _, ok := m[o.field]; !ok {
			m[o.field] = o.v
		}
	case opAppend:
		var l []types.AttributeValue
		if v, ok := m[o.field].(*types.AttributeValueMemberL); ok {
			l = slices.Clone(v.Value)
		}
		m[o.field] = &types.AttributeValueMemberL{Value: append(l, o.v.(*types.AttributeValueMemberL).Value...)}
	}
}

// index puts the order in the deadline index, in shard, due at due.
func (c *change) index(shard string, due time.Time) {
	c.b.Set(c.attr(topology.KeyDueShard), c.b.String(shard))
	c.b.Set(c.attr(topology.KeyDueAt), c.b.Int(ms(due)))
}

// leaveIndex takes the order out of the deadline index.
func (c *change) leaveIndex() {
	c.b.Remove(c.attr(topology.KeyDueShard))
	c.b.Remove(c.attr(topology.KeyDueAt))
}

// version conditions the change on the item's version as read.
func (c *change) version(v int) {
	if !c.versioned {
		c.versioned = true
		c.b.If(x.Equal(c.attr("V"), c.b.Int(int64(v))))
	}
}

// state conditions the change on the task's state.
func (c *change) state(s workflow.State) { c.b.If(orderIs(s).cond(c, recAt{})) }

// task moves the task to state to; an end state also sets CompletedAt.
func (c *change) task(to workflow.State) {
	c.b.Set(c.attr("St"), c.b.String(string(to)))
	if to.Ended() {
		c.b.Set(c.attr("E"), c.at())
		c.ends = true
	}
}

// fieldsInput is the change's UpdateItem of the order's state item, its
// records changed field by field.
func (s *Store) fieldsInput(c *change, orderID string) (*dynamodb.UpdateItemInput, error) {
	return s.input(c, orderID, byField, stateItem{})
}

// input is the change's UpdateItem of the order's state item, its records
// written in form f: field by field, or, over it (the item as read, on the
// condition that it is still that version), whole; a change that ends the
// task sets when it expires too (Store.WithRetention). An expression over
// DynamoDB's limit is ErrTooLarge.
func (s *Store) input(c *change, orderID string, f form, it stateItem) (*dynamodb.UpdateItemInput, error) {
	var err error
	switch f {
	case byField:
		c.fields()
	case byRecord:
		c.version(it.Version)
		err = c.wholeRecords(it)
	case byMap:
		c.version(it.Version)
		err = c.wholeMap(it)
	}
	if err != nil {
		return nil, err
	}
	if c.ends && c.retain > 0 {
		c.b.Set(c.attr(ExpiresAttribute), c.b.Value(expires(c.now, c.retain)))
	}
	in, err := c.b.UpdateInput(s.state, key(orderID, taskSK))
	if err != nil {
		return nil, fmt.Errorf("order %s: %w", orderID, err)
	}
	return in, nil
}

// condition is a condition alone (a put's, a query's key condition, a
// scan's filter), every one of conds, built with b: its text and the
// placeholders it uses.
func condition(b *x.Builder, conds ...x.Cond) (x.Expr, error) {
	b.If(conds...)
	e, err := b.Build()
	if err != nil {
		return x.Expr{}, fmt.Errorf("condition: %w", err)
	}
	return e, nil
}

// creates is the condition of a put that creates an item: none of its key
// is there yet.
func creates() (x.Expr, error) {
	b := x.New()
	return condition(b, x.NotExists(b.Plain(topology.KeyOrderID)))
}
