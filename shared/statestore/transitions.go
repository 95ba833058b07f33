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

// Claim takes a ready Pending step for owner: LockedBy = owner, Processing,
// Attempt + 1, CompleteBy = now + the step's timeout (also its deadline in the
// index). The condition makes the claim exclusive. It returns the claimed
// record, or ErrNotClaimable.
func (s *Store) Claim(ctx context.Context, orderID string, step int, owner string, now time.Time) (Step, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.state,
		Key:       key(orderID, stepSK(step)),
		ConditionExpression: aws.String("ProcessState = :pending AND attribute_not_exists(LockedBy)" +
			" AND attribute_exists(DueAt)"),
		UpdateExpression: aws.String("SET ProcessState = :processing, LockedBy = :owner," +
			" CompleteBy = :now + TimeoutMs, DueAt = :now + TimeoutMs, Attempt = Attempt + :one," +
			" Version = Version + :one, UpdatedAt = :now"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pending": str(string(workflow.Pending)), ":processing": str(string(workflow.Processing)),
			":owner": str(owner), ":now": num(ms(now)), ":one": num(1),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		return Step{}, ErrNotClaimable
	}
	if err != nil {
		return Step{}, fmt.Errorf("claim %s/%d: %w", orderID, step, err)
	}
	var it stepItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return Step{}, fmt.Errorf("decode claimed step %s/%d: %w", orderID, step, err)
	}
	return it.step(), nil
}

// Completion is a successful reply to record.
type Completion struct {
	OrderID string
	Step    int
	Attempt int
	Result  string
	// Next is the index of the step to make ready, or -1 when this was the
	// last step and the task is Processed.
	Next      int
	NextDueAt time.Time // the next step's pickup deadline
	Now       time.Time
}

// Complete marks the step Processed if, and only if, the reply is from its
// current attempt (fencing), and in the same transaction makes the next step
// ready or marks the task Processed. A stale or duplicate reply gets ErrStale
// and changes nothing.
func (s *Store) Complete(ctx context.Context, c Completion) error {
	now := num(ms(c.Now))
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName:           &s.state,
		Key:                 key(c.OrderID, stepSK(c.Step)),
		ConditionExpression: aws.String("ProcessState = :processing AND Attempt = :attempt"),
		UpdateExpression: aws.String("SET ProcessState = :processed, StepResult = :result," +
			" Version = Version + :one, UpdatedAt = :now REMOVE LockedBy, DueShard, DueAt"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":processing": str(string(workflow.Processing)), ":processed": str(string(workflow.Processed)),
			":attempt": num(int64(c.Attempt)), ":result": str(c.Result), ":one": num(1), ":now": now,
		},
	}}}
	if c.Next >= 0 {
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName:           &s.state,
			Key:                 key(c.OrderID, stepSK(c.Next)),
			ConditionExpression: aws.String("ProcessState = :pending AND attribute_not_exists(DueAt)"),
			UpdateExpression:    aws.String("SET DueShard = :shard, DueAt = :due, Version = Version + :one, UpdatedAt = :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pending": str(string(workflow.Pending)), ":shard": str(shardOf(c.OrderID, c.Next, s.shards)),
				":due": num(ms(c.NextDueAt)), ":one": num(1), ":now": now,
			},
		}})
	} else {
		items = append(items, s.endTask(c.OrderID, workflow.Processed, "", c.Now))
	}
	return s.transact(ctx, items, fmt.Sprintf("complete %s/%d attempt %d", c.OrderID, c.Step, c.Attempt))
}

// endTask is the transaction item that moves a Pending task to its end state.
func (s *Store) endTask(orderID string, state workflow.State, lastError string, now time.Time) types.TransactWriteItem {
	expr := "SET ProcessState = :end, CompletedAt = :now, UpdatedAt = :now"
	vals := map[string]types.AttributeValue{
		":pending": str(string(workflow.Pending)), ":end": str(string(state)), ":now": num(ms(now)),
	}
	if lastError != "" {
		expr += ", LastError = :err"
		vals[":err"] = str(lastError)
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: &s.state, Key: key(orderID, taskSK),
		ConditionExpression:       aws.String("ProcessState = :pending"),
		UpdateExpression:          aws.String(expr),
		ExpressionAttributeValues: vals,
	}}
}

// transact runs a transaction whose first item is the step being fenced:
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
