package statestore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// appendEvent is the update clause that adds :ev to the record's history.
const appendEvent = "Events = list_append(if_not_exists(Events, :noEvents), :ev)"

func eventValues(vals map[string]types.AttributeValue, now time.Time, format string, args ...any) map[string]types.AttributeValue {
	vals[":noEvents"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	vals[":ev"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{str(event(now, format, args...))}}
	return vals
}

// Claim takes a ready Pending record for owner: LockedBy = owner, Processing,
// Attempt + 1, CompleteBy = now + the action's timeout (also its deadline in
// the index). The condition makes the claim exclusive. It returns the claimed
// record, or ErrNotClaimable.
func (s *Store) Claim(ctx context.Context, orderID string, r workflow.Ref, owner string, now time.Time) (Step, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.state,
		Key:       key(orderID, sortKey(r)),
		ConditionExpression: aws.String("ProcessState = :pending AND attribute_not_exists(LockedBy)" +
			" AND attribute_exists(DueAt)"),
		UpdateExpression: aws.String("SET ProcessState = :processing, LockedBy = :owner," +
			" CompleteBy = :now + TimeoutMs, DueAt = :now + TimeoutMs, Attempt = Attempt + :one," +
			" Version = Version + :one, ClaimedAt = :now, UpdatedAt = :now, " + appendEvent),
		ExpressionAttributeValues: eventValues(map[string]types.AttributeValue{
			":pending": str(string(workflow.Pending)), ":processing": str(string(workflow.Processing)),
			":owner": str(owner), ":now": num(ms(now)), ":one": num(1),
		}, now, "claimed by %s", owner),
		ReturnValues: types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		return Step{}, ErrNotClaimable
	}
	if err != nil {
		return Step{}, fmt.Errorf("claim %s/%s: %w", orderID, sortKey(r), err)
	}
	var it stepItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return Step{}, fmt.Errorf("decode claimed %s/%s: %w", orderID, sortKey(r), err)
	}
	return it.step(), nil
}

// Completion is a successful reply to record.
type Completion struct {
	OrderID string
	Ref     workflow.Ref
	Attempt int
	Result  string
	// Next is the record to make ready, due at NextDueAt; when nil the task
	// ends in state End.
	Next      *workflow.Ref
	NextDueAt time.Time
	End       workflow.State
	Now       time.Time
}

// Complete marks the record Processed if, and only if, the reply is from its
// current attempt (fencing), and in the same transaction makes the next
// record ready or ends the task. A stale or duplicate reply gets ErrStale and
// changes nothing.
func (s *Store) Complete(ctx context.Context, c Completion) error {
	now := num(ms(c.Now))
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName:           &s.state,
		Key:                 key(c.OrderID, sortKey(c.Ref)),
		ConditionExpression: aws.String("ProcessState = :processing AND Attempt = :attempt"),
		UpdateExpression: aws.String("SET ProcessState = :processed, StepResult = :result," +
			" Version = Version + :one, UpdatedAt = :now, " + appendEvent + " REMOVE LockedBy, DueShard, DueAt"),
		ExpressionAttributeValues: eventValues(map[string]types.AttributeValue{
			":processing": str(string(workflow.Processing)), ":processed": str(string(workflow.Processed)),
			":attempt": num(int64(c.Attempt)), ":result": str(c.Result), ":one": num(1), ":now": now,
		}, c.Now, "processed (attempt %d)", c.Attempt),
	}}}
	if c.Next != nil {
		items = append(items, s.makeReady(c.OrderID, *c.Next, c.NextDueAt, c.Now))
	} else {
		items = append(items, s.setTask(c.OrderID, taskFrom(c.Ref), c.End, "", c.Now))
	}
	return s.transact(ctx, items, fmt.Sprintf("complete %s/%s attempt %d", c.OrderID, sortKey(c.Ref), c.Attempt))
}

// taskFrom is the state a task is in while r runs.
func taskFrom(r workflow.Ref) workflow.State {
	if r.Undo {
		return workflow.Compensating
	}
	return workflow.Pending
}

// makeReady is the transaction item that puts a waiting Pending record in the
// deadline index, due at its pickup deadline.
func (s *Store) makeReady(orderID string, r workflow.Ref, due, now time.Time) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName:           &s.state,
		Key:                 key(orderID, sortKey(r)),
		ConditionExpression: aws.String("ProcessState = :pending AND attribute_not_exists(DueAt)"),
		UpdateExpression:    aws.String("SET DueShard = :shard, DueAt = :due, Version = Version + :one, UpdatedAt = :now, " + appendEvent),
		ExpressionAttributeValues: eventValues(map[string]types.AttributeValue{
			":pending": str(string(workflow.Pending)), ":shard": str(shardOf(orderID, r, s.shards)),
			":due": num(ms(due)), ":one": num(1), ":now": num(ms(now)),
		}, now, "ready"),
	}}
}

// setTask is the transaction item that moves a task from one state to another;
// an end state also sets CompletedAt.
func (s *Store) setTask(orderID string, from, to workflow.State, lastError string, now time.Time) types.TransactWriteItem {
	expr := "SET ProcessState = :to, UpdatedAt = :now"
	vals := map[string]types.AttributeValue{":from": str(string(from)), ":to": str(string(to)), ":now": num(ms(now))}
	if to.Ended() {
		expr += ", CompletedAt = :now"
	}
	if lastError != "" {
		expr += ", LastError = :err"
		vals[":err"] = str(lastError)
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: &s.state, Key: key(orderID, taskSK),
		ConditionExpression:       aws.String("ProcessState = :from"),
		UpdateExpression:          aws.String(expr),
		ExpressionAttributeValues: vals,
	}}
}

// transact runs a transaction whose first item is the record being fenced:
// its failed condition is ErrStale; any other cancellation is an error.
func (s *Store) transact(ctx context.Context, items []types.TransactWriteItem, what string) error {
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if codes, ok := cancelled(err); ok {
		if len(codes) > 0 && codes[0] == "ConditionalCheckFailed" {
			return ErrStale
		}
		return fmt.Errorf("%s: transaction cancelled %v: %w", what, codes, err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
