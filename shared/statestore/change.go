package statestore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// change builds one conditional UpdateItem of an order's state item: a
// record's transition and the task's are one atomic write. Every change
// increments the item's Version.
type change struct {
	set, remove, add, del, cond []string
	names                       map[string]string
	vals                        map[string]types.AttributeValue
	now                         time.Time
	ends                        bool // it may end the task: the store sets when it expires
}

func newChange(now time.Time) *change {
	c := &change{
		set:   []string{"V = V + :one"},
		names: map[string]string{},
		vals:  map[string]types.AttributeValue{":one": num(1)},
		now:   now,
	}
	c.set = append(c.set, "U = "+c.at())
	return c
}

// rec names record r in the expressions as #alias and returns its path.
func (c *change) rec(alias string, r workflow.Ref) string {
	c.names["#"+alias] = sortKey(r)
	return "R.#" + alias
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

// incident appends a line to the incidents of the record at path (alias as
// in rec): something besides being made ready, claimed and done, which the
// record's own times tell.
func (c *change) incident(path, alias, format string, args ...any) {
	c.vals[":none"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	c.vals[":ev"+alias] = &types.AttributeValueMemberL{Value: []types.AttributeValue{str(incident(c.now, format, args...))}}
	c.set = append(c.set, fmt.Sprintf("%[1]s.ev = list_append(if_not_exists(%[1]s.ev, :none), :ev%[2]s)", path, alias))
}

// index puts the order in the deadline index, due at due.
func (c *change) index(orderID string, shards int, due time.Time) {
	c.set = append(c.set, "DueShard = "+c.val("shard", str(shardOf(orderID, shards))), "DueAt = "+c.val("due", num(ms(due))))
}

// indexAfter puts the order read in the deadline index, due at due for the
// record read, or earlier if another of its records (or the order's
// deadline) is due earlier.
func (c *change) indexAfter(read Step, shards int, due time.Time) {
	c.index(read.OrderID, shards, fromMs(earliest(ms(due), read.othersDue)))
}

// task moves the task from one state to another (the condition), with
// lastError if not empty; an end state also sets CompletedAt.
//
// A task that would end Failed ends as its Ea says instead, if set: an order
// being cancelled ends Cancelled, its work undone, in the same write.
func (c *change) task(from, to workflow.State, lastError string) {
	c.cond = append(c.cond, "St = "+c.val("from", str(string(from))))
	if to == workflow.Failed {
		c.set = append(c.set, "St = if_not_exists(Ea, "+c.val("to", str(string(to)))+")")
	} else {
		c.set = append(c.set, "St = "+c.val("to", str(string(to))))
	}
	if to.Ended() {
		c.set = append(c.set, "E = "+c.at())
		c.ends = true
	}
	if lastError != "" {
		c.set = append(c.set, "Err = "+c.val("taskError", str(lastError)))
	}
}

// input is the change's UpdateItem of the order's state item; a change
// that ends the task sets when it expires too (Store.WithRetention).
func (s *Store) input(c *change, orderID string) *dynamodb.UpdateItemInput {
	table, set := s.state, c.set
	if c.ends && s.keep > 0 {
		set = append(slices.Clone(set), ExpiresAttribute+" = "+c.val("expires", s.expires(c.now)))
	}
	expr := "SET " + strings.Join(set, ", ")
	for _, clause := range []struct {
		verb  string
		parts []string
	}{{"REMOVE", c.remove}, {"ADD", c.add}, {"DELETE", c.del}} {
		if len(clause.parts) > 0 {
			expr += " " + clause.verb + " " + strings.Join(clause.parts, ", ")
		}
	}
	in := &dynamodb.UpdateItemInput{
		TableName: &table, Key: key(orderID, taskSK),
		UpdateExpression:          aws.String(expr),
		ExpressionAttributeValues: c.vals,
	}
	if len(c.names) > 0 {
		in.ExpressionAttributeNames = c.names
	}
	if len(c.cond) > 0 {
		in.ConditionExpression = aws.String(strings.Join(c.cond, " AND "))
	}
	return in
}
