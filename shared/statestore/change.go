package statestore

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// MaxExpressionBytes is DynamoDB's limit on an update's or a condition's
// expression. The largest write the rules make (the completion that makes
// the items of a forEach step ready: 100 records) stays well under it: each
// record takes a short alias (#a…), and no write names a record it does
// not change.
const MaxExpressionBytes = 4096

// ErrTooLarge means a write's expression would pass DynamoDB's limit. It is
// never sent: the limits the workflow files are checked against keep every
// write under it, and a test holds each at the limit.
var ErrTooLarge = errors.New("write too large for one DynamoDB expression")

// change builds one conditional UpdateItem of an order's state item: a
// record's transition and the task's are one atomic write. Every change
// increments the item's Version.
type change struct {
	set, remove, add, del, cond []string
	names                       map[string]string
	vals                        map[string]types.AttributeValue
	recs                        map[string]string // a record's sort key → its path
	now                         time.Time
	ends                        bool // it may end the task: the store sets when it expires
}

func newChange(now time.Time) *change {
	c := &change{
		set:   []string{"V = V + :one"},
		names: map[string]string{},
		vals:  map[string]types.AttributeValue{":one": num(1)},
		recs:  map[string]string{},
		now:   now,
	}
	c.set = append(c.set, "U = "+c.at())
	return c
}

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
	c.vals[":none"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	v := c.val("EV"+strings.TrimPrefix(path, "R.#"), &types.AttributeValueMemberL{Value: []types.AttributeValue{str(incident(c.now, format, args...))}})
	c.set = append(c.set, fmt.Sprintf("%[1]s.ev = list_append(if_not_exists(%[1]s.ev, :none), %[2]s)", path, v))
}

// index puts the order in the deadline index, due at due.
func (c *change) index(orderID string, shards int, due time.Time) {
	c.set = append(c.set, "DueShard = "+c.val("shard", str(shardOf(orderID, shards))), "DueAt = "+c.val("due", num(ms(due))))
}

// leaveIndex takes the order out of the deadline index.
func (c *change) leaveIndex() { c.remove = append(c.remove, "DueShard", "DueAt") }

// version conditions the change on the item's version as read.
func (c *change) version(v int) { c.cond = append(c.cond, "V = "+c.val("version", num(int64(v)))) }

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

// input is the change's UpdateItem of the order's state item; a change
// that ends the task sets when it expires too (Store.WithRetention). An
// expression over DynamoDB's limit is ErrTooLarge.
func (s *Store) input(c *change, orderID string) (*dynamodb.UpdateItemInput, error) {
	table, set := s.state, c.set
	if c.ends && s.keep > 0 {
		set = append(slices.Clone(set), ExpiresAttribute+" = "+c.val("expires", s.expires(c.now)))
	}
	expr := "SET " + strings.Join(set, ",")
	for _, clause := range []struct {
		verb  string
		parts []string
	}{{"REMOVE", c.remove}, {"ADD", c.add}, {"DELETE", c.del}} {
		if len(clause.parts) > 0 {
			expr += " " + clause.verb + " " + strings.Join(clause.parts, ",")
		}
	}
	cond := strings.Join(c.cond, " AND ")
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
