package statestore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Fail records a non-transient error reply of the step's current attempt: the
// step and the task become Error. The step stays in the deadline index, due at
// alertDue, until MarkAlerted: if the alert is lost, the supervisor sends it.
func (s *Store) Fail(ctx context.Context, orderID string, step, attempt int, reason string, alertDue, now time.Time) error {
	return s.markError(ctx, orderID, step, "ProcessState = :processing AND Attempt = :attempt",
		map[string]types.AttributeValue{":processing": str(string(workflow.Processing)), ":attempt": num(int64(attempt))},
		-1, reason, alertDue, now)
}

// GiveUp records that the supervisor found the step overdue at its failure
// threshold: the step (still as read: same Version) and the task become Error.
func (s *Store) GiveUp(ctx context.Context, read Step, failureCount int, reason string, alertDue, now time.Time) error {
	return s.markError(ctx, read.OrderID, read.Index, "Version = :version",
		map[string]types.AttributeValue{":version": num(int64(read.Version))},
		failureCount, reason, alertDue, now)
}

func (s *Store) markError(ctx context.Context, orderID string, step int, cond string,
	vals map[string]types.AttributeValue, failureCount int, reason string, alertDue, now time.Time) error {
	expr := "SET ProcessState = :error, LastError = :reason, DueShard = :shard, DueAt = :due," +
		" Version = Version + :one, UpdatedAt = :now"
	vals[":error"] = str(string(workflow.Error))
	vals[":reason"] = str(reason)
	vals[":shard"] = str(shardOf(orderID, step, s.shards))
	vals[":due"] = num(ms(alertDue))
	vals[":one"] = num(1)
	vals[":now"] = num(ms(now))
	if failureCount >= 0 {
		expr += ", FailureCount = :fc"
		vals[":fc"] = num(int64(failureCount))
	}
	items := []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: &s.state, Key: key(orderID, stepSK(step)),
			ConditionExpression:       aws.String(cond),
			UpdateExpression:          aws.String(expr + " REMOVE LockedBy"),
			ExpressionAttributeValues: vals,
		}},
		s.endTask(orderID, workflow.Error, fmt.Sprintf("step %d: %s", step, reason), now),
	}
	return s.transact(ctx, items, fmt.Sprintf("mark %s/%d Error", orderID, step))
}

// MarkAlerted records that the step's Error alert was sent: the step leaves
// the deadline index. Marking an already alerted step is a no-op.
func (s *Store) MarkAlerted(ctx context.Context, orderID string, step int, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.state,
		Key:                 key(orderID, stepSK(step)),
		ConditionExpression: aws.String("ProcessState = :error AND attribute_exists(DueAt)"),
		UpdateExpression:    aws.String("SET Alerted = :true, Version = Version + :one, UpdatedAt = :now REMOVE DueShard, DueAt"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":error": str(string(workflow.Error)), ":true": &types.AttributeValueMemberBOOL{Value: true},
			":one": num(1), ":now": num(ms(now)),
		},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("mark %s/%d alerted: %w", orderID, step, err)
	}
	return nil
}

// Requeue puts an overdue step (still as read: same Version) back to Pending
// with its new FailureCount, no claim, and a new pickup deadline dueAt.
func (s *Store) Requeue(ctx context.Context, read Step, failureCount int, reason string, dueAt, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.state,
		Key:                 key(read.OrderID, stepSK(read.Index)),
		ConditionExpression: aws.String("Version = :version"),
		UpdateExpression: aws.String("SET ProcessState = :pending, FailureCount = :fc, LastError = :reason," +
			" DueAt = :due, Version = Version + :one, UpdatedAt = :now REMOVE LockedBy, CompleteBy"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":version": num(int64(read.Version)), ":pending": str(string(workflow.Pending)),
			":fc": num(int64(failureCount)), ":reason": str(reason), ":due": num(ms(dueAt)),
			":one": num(1), ":now": num(ms(now)),
		},
	})
	if isConditionFailed(err) {
		return ErrStale
	}
	if err != nil {
		return fmt.Errorf("requeue %s: %w", read.Key(), err)
	}
	return nil
}

// Overdue returns up to limit records whose deadline is at or before now, from
// every shard of the sparse deadline index: its cost follows the overdue work,
// not the table. Index reads are eventually consistent; every write made on
// what they return is conditional on the Version read.
func (s *Store) Overdue(ctx context.Context, now time.Time, limit int) ([]Step, error) {
	var out []Step
	for shard := 0; shard < s.shards && len(out) < limit; shard++ {
		p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
			TableName:              &s.state,
			IndexName:              aws.String(topology.DeadlineIndex),
			KeyConditionExpression: aws.String("DueShard = :shard AND DueAt <= :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":shard": str(strconv.Itoa(shard)), ":now": num(ms(now)),
			},
			Limit: aws.Int32(int32(min(limit, 500))),
		})
		for p.HasMorePages() && len(out) < limit {
			page, err := p.NextPage(ctx)
			if err != nil {
				return out, fmt.Errorf("query overdue shard %d: %w", shard, err)
			}
			for _, item := range page.Items {
				var it stepItem
				if err := attributevalue.UnmarshalMap(item, &it); err != nil {
					return out, fmt.Errorf("decode overdue record: %w", err)
				}
				if len(out) < limit {
					out = append(out, it.step())
				}
			}
		}
	}
	return out, nil
}

// IndexedAttributes are the attributes the deadline index projects besides
// its keys: what the supervisor needs to decide without reading the table.
var IndexedAttributes = []string{
	"StepIndex", "StepName", "Agent", "TimeoutMs", "MaxFailures", "RetryBackoffMs", "ProcessState",
	"Attempt", "FailureCount", "LockedBy", "CompleteBy", "LastError", "Alerted", "Version", "CreatedAt", "UpdatedAt",
}
