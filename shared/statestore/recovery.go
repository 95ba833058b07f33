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

// Failure is a record that failed for good.
type Failure struct {
	OrderID string
	Ref     workflow.Ref
	// After is what follows: the undo action to start and the task's state.
	After    workflow.Aftermath
	Reason   string
	AlertDue time.Time // the record stays due until MarkAlerted; if the alert is lost, the supervisor sends it
	UndoDue  time.Time // the first undo action's pickup deadline
	Now      time.Time
}

// Fail records a non-transient error reply of the record's current attempt.
// In one transaction: the record becomes Error and the task moves to f.After:
// Compensating (its first undo action made ready), or it ends Failed or
// CompensationFailed.
func (s *Store) Fail(ctx context.Context, f Failure, attempt int) error {
	return s.markError(ctx, f, "ProcessState = :processing AND Attempt = :attempt",
		map[string]types.AttributeValue{":processing": str(string(workflow.Processing)), ":attempt": num(int64(attempt))}, -1)
}

// GiveUp does what Fail does for a record the supervisor found overdue at its
// failure threshold, on the condition that the record is still as it read it
// (same Version). What follows comes from the record itself (AfterGiveUp: a
// timed-out step is undone too, a pivot is left to the operator): the
// supervisor knows nothing of the workflow.
func (s *Store) GiveUp(ctx context.Context, read Step, failureCount int, reason string, alertDue, undoDue, now time.Time) error {
	f := Failure{OrderID: read.OrderID, Ref: read.Ref(), After: read.AfterGiveUp(), Reason: reason,
		AlertDue: alertDue, UndoDue: undoDue, Now: now}
	return s.markError(ctx, f, "Version = :version",
		map[string]types.AttributeValue{":version": num(int64(read.Version))}, failureCount)
}

func (s *Store) markError(ctx context.Context, f Failure, cond string, vals map[string]types.AttributeValue, failureCount int) error {
	expr := "SET ProcessState = :error, LastError = :reason, DueShard = :shard, DueAt = :due," +
		" Version = Version + :one, UpdatedAt = :now, " + appendEvent
	vals[":error"] = str(string(workflow.Error))
	vals[":reason"] = str(f.Reason)
	vals[":shard"] = str(shardOf(f.OrderID, f.Ref, s.shards))
	vals[":due"] = num(ms(f.AlertDue))
	vals[":one"] = num(1)
	vals[":now"] = num(ms(f.Now))
	eventValues(vals, f.Now, "failed for good: %s", f.Reason)
	if failureCount >= 0 {
		expr += ", FailureCount = :fc"
		vals[":fc"] = num(int64(failureCount))
	}
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.state, Key: key(f.OrderID, sortKey(f.Ref)),
		ConditionExpression:       aws.String(cond),
		UpdateExpression:          aws.String(expr + " REMOVE LockedBy"),
		ExpressionAttributeValues: vals,
	}}}
	lastError := fmt.Sprintf("%s: %s", sortKey(f.Ref), f.Reason)
	from := workflow.Pending
	if f.Ref.Undo {
		from = workflow.Compensating
	}
	items = append(items, s.setTask(f.OrderID, from, f.After.Next, lastError, f.Now))
	if f.After.Next == workflow.Compensating {
		items = append(items, s.makeReady(f.OrderID, workflow.Ref{Index: f.After.UndoFrom, Undo: true}, f.UndoDue, f.Now))
	}
	return s.transact(ctx, items, fmt.Sprintf("mark %s/%s Error", f.OrderID, sortKey(f.Ref)))
}

// MarkAlerted records that the record's Error alert was sent: it leaves the
// deadline index. Marking an already alerted record is a no-op.
func (s *Store) MarkAlerted(ctx context.Context, orderID string, r workflow.Ref, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.state,
		Key:                 key(orderID, sortKey(r)),
		ConditionExpression: aws.String("ProcessState = :error AND attribute_exists(DueAt)"),
		UpdateExpression: aws.String("SET Alerted = :true, Version = Version + :one, UpdatedAt = :now, " +
			appendEvent + " REMOVE DueShard, DueAt"),
		ExpressionAttributeValues: eventValues(map[string]types.AttributeValue{
			":error": str(string(workflow.Error)), ":true": &types.AttributeValueMemberBOOL{Value: true},
			":one": num(1), ":now": num(ms(now)),
		}, now, "operator alerted"),
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("mark %s/%s alerted: %w", orderID, sortKey(r), err)
	}
	return nil
}

// Requeue puts an overdue record (still as read: same Version) back to
// Pending with its new FailureCount, no claim, and a new pickup deadline dueAt.
func (s *Store) Requeue(ctx context.Context, read Step, failureCount int, reason string, dueAt, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.state,
		Key:                 key(read.OrderID, sortKey(read.Ref())),
		ConditionExpression: aws.String("Version = :version"),
		UpdateExpression: aws.String("SET ProcessState = :pending, FailureCount = :fc, LastError = :reason," +
			" DueAt = :due, Version = Version + :one, UpdatedAt = :now, " + appendEvent + " REMOVE LockedBy, CompleteBy"),
		ExpressionAttributeValues: eventValues(map[string]types.AttributeValue{
			":version": num(int64(read.Version)), ":pending": str(string(workflow.Pending)),
			":fc": num(int64(failureCount)), ":reason": str(reason), ":due": num(ms(dueAt)),
			":one": num(1), ":now": num(ms(now)),
		}, now, "recovered by the supervisor (failure %d): %s", failureCount, reason),
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
// its keys: what the supervisor needs to decide, alert and notify without
// reading the table.
var IndexedAttributes = []string{
	"StepIndex", "Undo", "UndoFrom", "HasUndo", "Round", "ReplyQueue", "StepName", "Agent", "TimeoutMs", "MaxFailures",
	"RetryBackoffMs", "ProcessState", "Attempt", "FailureCount", "LockedBy", "CompleteBy", "LastError",
	"Alerted", "Version", "CreatedAt", "UpdatedAt",
}
