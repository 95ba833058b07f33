package statestore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// MaxExpressionBytes is DynamoDB's limit on an update's or a condition's
// expression. A write names each record it changes field by field (a short
// alias each, #a…), which is the cheapest form while it changes a few; a
// write that would pass the limit so (a sweep that gives back 30 items, a
// cancel of 30 accepted async items, a held order going on) is written in a
// form that does not grow with its fields: each record it changes whole
// (R.#a = :w…), or the whole record map (R = :R), on the condition that the
// order is still the version it was decided on (Store.Apply). DynamoDB
// bills an update by the larger of the item before and after, so the whole
// form costs no more write units.
const MaxExpressionBytes = 4096

// ErrTooLarge means a write's expression would pass DynamoDB's limit. It is
// never sent. Store.Apply never returns it (it writes whole records
// instead); the single-record writes (a claim, an arming) cannot reach it.
var ErrTooLarge = errors.New("write too large for one DynamoDB expression")

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

// change builds one conditional UpdateItem of an order's state item: a
// record's transition and the task's are one atomic write. Every change
// increments the item's Version.
type change struct {
	set, remove, add, del, cond []string
	names                       map[string]string
	vals                        map[string]types.AttributeValue
	recs                        map[string]string // a record's sort key → its path
	// ops are the changes to each record's fields, by its path, in the
	// order the paths were first changed (order).
	ops       map[string][]recOp
	order     []string
	shared    map[string]string // a value's text → its placeholder (shared by every field set to it)
	versioned bool              // conditioned on the item's version
	now       time.Time
	ends      bool          // it may end the task: the store sets when it expires
	retain    time.Duration // the order's retention, if it ends (0: forever)
	id        string        // the write's own id (W): see Store.updateItem
}

func newChange(now time.Time) *change {
	c := &change{
		set:   []string{"V = V + :one"},
		names: map[string]string{},
		vals:  map[string]types.AttributeValue{":one": num(1)},
		recs:  map[string]string{},
		ops:   map[string][]recOp{},
		now:   now,
	}
	c.set = append(c.set, "U = "+c.at())
	c.id = writeID()
	c.set = append(c.set, WriteIDAttribute+" = "+c.val("wid", str(c.id)))
	return c
}

// WriteIDAttribute is the state item's attribute naming the last write that
// changed it (a random id per write): a write the SDK tries again after its
// first try was applied but its answer lost knows itself by it.
const WriteIDAttribute = "W"

// ownWrite reports whether item (as read back, or as a failed condition
// found it) carries write id: the write was applied.
func ownWrite(item map[string]types.AttributeValue, id string) bool {
	w, ok := item[WriteIDAttribute].(*types.AttributeValueMemberS)
	return ok && w.Value == id
}

// writeID is a new write's id: 64 random bits.
func writeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// updateItem runs in, c's UpdateItem of the order's state item. A refusal
// by its condition whose item's write id is c's own is the write itself: an
// earlier try of this request was applied and its answer lost (a connection
// cut while the answer was read; the SDK tries the request again), so the
// item as it is now is the write's outcome. Without this, a claim would
// refuse itself and its step wait for the Supervisor, a completion would be
// taken as stale and its reply never sent.
//
// A write that fails otherwise (the SDK's tries spent: throttled, a 500, a
// connection cut) may have been applied all the same, its answer lost on
// one of them: the item is read back, and if its write id is c's, that is
// the outcome; if not, the error is an *UnknownOutcome carrying the item as
// it is (a claim finds itself there by its record: claimedBy).
func (s *Store) updateItem(ctx context.Context, c *change, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if ownWrite(ccf.Item, c.id) {
			return &dynamodb.UpdateItemOutput{Attributes: ccf.Item}, nil
		}
		return out, err
	}
	if err == nil || ctx.Err() != nil {
		return out, err
	}
	got, rerr := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)})
	if rerr != nil {
		return out, err // not known: the caller's message comes back, or the Supervisor finds the record
	}
	if ownWrite(got.Item, c.id) {
		return &dynamodb.UpdateItemOutput{Attributes: got.Item}, nil
	}
	return out, &UnknownOutcome{Err: err, Item: got.Item}
}

// UnknownOutcome is a write that failed with an error that does not say
// whether it was applied, and the item as read back after it (another
// write's since, or as it was: not known which).
type UnknownOutcome struct {
	Err  error
	Item map[string]types.AttributeValue
}

func (e *UnknownOutcome) Error() string { return e.Err.Error() }

// Unwrap is the write's error.
func (e *UnknownOutcome) Unwrap() error { return e.Err }

// rec is record r's path in the expressions (R.#a, R.#b…, one alias per
// record however often it is named).
func (c *change) rec(r workflow.Ref) string {
	sk := sortKey(r)
	if p, ok := c.recs[sk]; ok {
		return p
	}
	alias := "#" + strconv.FormatInt(int64(len(c.recs)+10), 36) // #a, #b… #z, #10…
	c.names[alias] = sk
	c.recs[sk] = "R." + alias
	return c.recs[sk]
}

// alias is the placeholder of a path part that is not a record (an event's
// name, a step's key in P).
func (c *change) alias(prefix, name string) string {
	a := "#" + prefix + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
	c.names[a] = name
	return a
}

// val adds the value :name and returns its placeholder.
func (c *change) val(name string, v types.AttributeValue) string {
	c.vals[":"+name] = v
	return ":" + name
}

// at is the placeholder of the change's time.
func (c *change) at() string {
	c.vals[":now"] = num(ms(c.now))
	return ":now"
}

// when adds a condition; %[1]s in it is path.
func (c *change) when(format string, path string) {
	c.cond = append(c.cond, fmt.Sprintf(format, path))
}

// incident appends a line to the incidents of the record at path: something
// besides being made ready, claimed and done, which the record's own times
// tell.
func (c *change) incident(path, format string, args ...any) {
	c.op(path, recOp{field: "ev", kind: opAppend,
		v: &types.AttributeValueMemberL{Value: []types.AttributeValue{str(incident(c.now, format, args...))}}})
}

// put sets field of the record at path to v.
func (c *change) put(path, field string, v types.AttributeValue) {
	c.op(path, recOp{field: field, kind: opSet, v: v})
}

// drop removes fields of the record at path.
func (c *change) drop(path string, fields ...string) {
	for _, f := range fields {
		c.op(path, recOp{field: f, kind: opRemove})
	}
}

// count adds one to field of the record at path (from 0).
func (c *change) count(path, field string) { c.op(path, recOp{field: field, kind: opCount}) }

// keep sets field of the record at path to v, unless it is set.
func (c *change) keep(path, field string, v types.AttributeValue) {
	c.op(path, recOp{field: field, kind: opKeep, v: v})
}

func (c *change) op(path string, o recOp) {
	if _, ok := c.ops[path]; !ok {
		c.order = append(c.order, path)
	}
	c.ops[path] = append(c.ops[path], o)
}

// share is the placeholder of v, one for every field set to the same
// number or string.
func (c *change) share(v types.AttributeValue) string {
	var text string
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		text = "S" + x.Value
	case *types.AttributeValueMemberN:
		text = "N" + x.Value
	default:
		return c.val("x"+strconv.Itoa(len(c.vals)), v)
	}
	if p, ok := c.shared[text]; ok {
		return p
	}
	if c.shared == nil {
		c.shared = map[string]string{}
	}
	p := c.val("v"+strconv.Itoa(len(c.shared)), v)
	c.shared[text] = p
	return p
}

// fields is the record ops as field-by-field update clauses.
func (c *change) fields() (set, remove []string) {
	for _, p := range c.order {
		for _, o := range c.ops[p] {
			f := p + "." + o.field
			switch o.kind {
			case opSet:
				set = append(set, f+"="+c.share(o.v))
			case opRemove:
				remove = append(remove, f)
			case opCount:
				set = append(set, f+"=if_not_exists("+f+","+c.share(num(0))+")+"+c.share(num(1)))
			case opKeep:
				set = append(set, f+"=if_not_exists("+f+","+c.share(o.v)+")")
			case opAppend:
				none := c.val("none", &types.AttributeValueMemberL{Value: []types.AttributeValue{}})
				set = append(set, f+"=list_append(if_not_exists("+f+","+none+"),"+c.share(o.v)+")")
			}
		}
	}
	return set, remove
}

// wholeRecords is the record ops as whole records written over the item as
// it was read: one clause per record changed, or, when even those would be
// too many, the whole record map. Only for a write conditioned on the
// item's version (the records are exactly as read).
func (c *change) wholeRecords(it stateItem, budget int) ([]string, error) {
	recs := make(map[string]types.AttributeValue, len(c.order))
	for _, p := range c.order {
		sk := c.names[strings.TrimPrefix(p, "R.")]
		m, err := attributevalue.MarshalMap(it.Recs[sk])
		if err != nil {
			return nil, fmt.Errorf("encode record %s: %w", sk, err)
		}
		for _, o := range c.ops[p] {
			apply(m, o)
		}
		recs[p] = &types.AttributeValueMemberM{Value: m}
	}
	set := make([]string, 0, len(c.order))
	n := 0
	for i, p := range c.order {
		clause := p + "=" + c.val("w"+strconv.Itoa(i), recs[p])
		set, n = append(set, clause), n+len(clause)+1
	}
	if n <= budget {
		return set, nil
	}
	for i := range c.order { // every record instead, as it is after the write
		delete(c.vals, ":w"+strconv.Itoa(i))
	}
	all := make(map[string]types.AttributeValue, len(it.Recs))
	for sk, r := range it.Recs {
		m, err := attributevalue.MarshalMap(r)
		if err != nil {
			return nil, fmt.Errorf("encode record %s: %w", sk, err)
		}
		all[sk] = &types.AttributeValueMemberM{Value: m}
	}
	for p, v := range recs {
		all[c.names[strings.TrimPrefix(p, "R.")]] = v
	}
	return []string{"R=" + c.val("R", &types.AttributeValueMemberM{Value: all})}, nil
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
	c.set = append(c.set, "DueShard = "+c.val("shard", str(shard)), "DueAt = "+c.val("due", num(ms(due))))
}

// leaveIndex takes the order out of the deadline index.
func (c *change) leaveIndex() { c.remove = append(c.remove, "DueShard", "DueAt") }

// version conditions the change on the item's version as read.
func (c *change) version(v int) {
	if !c.versioned {
		c.versioned = true
		c.cond = append(c.cond, "V = "+c.val("version", num(int64(v))))
	}
}

// state conditions the change on the task's state.
func (c *change) state(s workflow.State) {
	c.cond = append(c.cond, "St = "+c.val("st"+string(s), str(string(s))))
}

// task moves the task to state to, with lastError if not empty; an end state
// also sets CompletedAt.
func (c *change) task(to workflow.State, lastError string) {
	c.set = append(c.set, "St = "+c.val("to", str(string(to))))
	if to.Ended() {
		c.set = append(c.set, "E = "+c.at())
		c.ends = true
	}
	if lastError != "" {
		c.set = append(c.set, "Err = "+c.val("taskError", str(lastError)))
	}
}

// input is the change's UpdateItem of the order's state item, its records
// changed field by field; a change that ends the task sets when it expires
// too (Store.WithRetention). An expression over DynamoDB's limit is
// ErrTooLarge.
func (s *Store) input(c *change, orderID string) (*dynamodb.UpdateItemInput, error) {
	set, remove := c.fields()
	return s.render(c, orderID, set, remove)
}

// inputWhole is the change's UpdateItem with its records written whole
// over it, the item as read, on the condition that it is still that
// version: an expression that does not grow with what the write changes.
func (s *Store) inputWhole(c *change, it stateItem) (*dynamodb.UpdateItemInput, error) {
	c.version(it.Version)
	fixed := len(strings.Join(c.set, ",")) + len(strings.Join(c.remove, ",")) + len(strings.Join(c.add, ",")) +
		len(strings.Join(c.del, ",")) + 64
	set, err := c.wholeRecords(it, MaxExpressionBytes-fixed)
	if err != nil {
		return nil, err
	}
	return s.render(c, it.OrderID, set, nil)
}

// render is the UpdateItem of c's task clauses and its records' (set,
// remove).
func (s *Store) render(c *change, orderID string, recSet, recRemove []string) (*dynamodb.UpdateItemInput, error) {
	table := s.state
	set := append(slices.Clone(c.set), recSet...)
	if c.ends && c.retain > 0 {
		set = append(set, ExpiresAttribute+" = "+c.val("expires", expires(c.now, c.retain)))
	}
	expr := "SET " + strings.Join(set, ",")
	for _, clause := range []struct {
		verb  string
		parts []string
	}{{"REMOVE", append(slices.Clone(c.remove), recRemove...)}, {"ADD", c.add}, {"DELETE", c.del}} {
		if len(clause.parts) > 0 {
			expr += " " + clause.verb + " " + strings.Join(clause.parts, ",")
		}
	}
	cond := strings.Join(c.cond, " AND ")
	c.prune(expr + " " + cond)
	if len(expr) > MaxExpressionBytes || len(cond) > MaxExpressionBytes {
		return nil, fmt.Errorf("order %s: update %d bytes, condition %d (at most %d each): %w", orderID, len(expr), len(cond),
			MaxExpressionBytes, ErrTooLarge)
	}
	in := &dynamodb.UpdateItemInput{
		TableName: &table, Key: key(orderID, taskSK),
		UpdateExpression:          aws.String(expr),
		ExpressionAttributeValues: c.vals,
	}
	if len(c.names) > 0 {
		in.ExpressionAttributeNames = c.names
	}
	if cond != "" {
		in.ConditionExpression = aws.String(cond)
	}
	return in, nil
}

// placeholder is a name's or a value's placeholder in an expression.
var placeholder = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// prune drops the names and values the expressions do not use (DynamoDB
// refuses a request with one): a record written whole names none of its
// fields.
func (c *change) prune(exprs string) {
	used := map[string]bool{}
	for _, p := range placeholder.FindAllString(exprs, -1) {
		used[p] = true
	}
	for n := range c.names {
		if !used[n] {
			delete(c.names, n)
		}
	}
	for v := range c.vals {
		if !used[v] {
			delete(c.vals, v)
		}
	}
}
