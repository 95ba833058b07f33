package statestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// NotResubmittableError says why an order cannot be resubmitted.
type NotResubmittableError struct{ Reason string }

// Error says why.
func (e *NotResubmittableError) Error() string { return e.Reason }

// IsNotResubmittable reports whether err is a *NotResubmittableError.
func IsNotResubmittable(err error) bool {
	var e *NotResubmittableError
	return errors.As(err, &e)
}

// Resubmission is what a resubmission made ready.
type Resubmission struct {
	Ref   workflow.Ref // the record the Scheduler must be told about
	Step  string       // its name
	Round int          // the task's round from now on
}

// Resubmit puts a task that ended badly back to work after the operator fixed
// the cause, and returns the record made ready:
//   - a Failed task (its completed steps were undone) runs again from its first
//     step in a new round: every record back to Pending with FailureCount 0, and
//     new idempotency keys, since the earlier effects were undone;
//   - a CompensationFailed task retries its failed undo action, FailureCount 0,
//     and compensation goes on from there;
//   - a CompensationFailed task whose pivot step (no undo action) timed out for
//     good runs that step again in the same round, with the same idempotency
//     key: if the effect happened, the remote answers as before.
//
// step, if not empty, must name the record in Error. Attempt numbers keep
// counting, so a late reply of an earlier attempt stays fenced off. It is one
// transaction, conditional on the task being as read.
func (s *Store) Resubmit(ctx context.Context, orderID, step string, pickup time.Duration, now time.Time) (Resubmission, error) {
	task, recs, err := s.Load(ctx, orderID)
	if err != nil {
		return Resubmission{}, err
	}
	var failed *Step
	for i := range recs {
		// In a Failed task the step that failed; in a CompensationFailed one,
		// the undo, or if no undo failed, the pivot step.
		r := &recs[i]
		if r.State != workflow.Error || (r.Undo && task.State != workflow.CompensationFailed) {
			continue
		}
		if failed == nil || r.Undo {
			failed = r
		}
	}
	switch {
	case task.State != workflow.Failed && task.State != workflow.CompensationFailed:
		return Resubmission{}, &NotResubmittableError{fmt.Sprintf("order %s is %s; only Failed or CompensationFailed orders can be resubmitted", orderID, task.State)}
	case failed == nil:
		return Resubmission{}, &NotResubmittableError{fmt.Sprintf("order %s is %s but no step is in Error", orderID, task.State)}
	case step != "" && step != failed.Name:
		return Resubmission{}, &NotResubmittableError{fmt.Sprintf("order %s: step %q is not the one that failed (%s)", orderID, step, failed.Name)}
	}
	var items []types.TransactWriteItem
	res := Resubmission{Ref: failed.Ref(), Step: failed.Name, Round: task.Round}
	if task.State == workflow.CompensationFailed {
		to := workflow.Compensating
		if !failed.Undo {
			to = workflow.Pending // the pivot step runs again
		}
		items = append(items, s.resetTask(task, to, task.Round, now),
			s.resetRecord(orderID, *failed, task.Round, true, pickup, now))
	} else {
		res.Round++
		items = append(items, s.resetTask(task, workflow.Pending, res.Round, now))
		for _, r := range recs {
			if r.Ref() == (workflow.Ref{}) {
				res.Ref, res.Step = r.Ref(), r.Name // a new round starts at the first step
			}
		}
		for _, r := range recs {
			items = append(items, s.resetRecord(orderID, r, res.Round, r.Ref() == res.Ref, pickup, now))
		}
	}
	if err := s.transact(ctx, items, "resubmit "+orderID); errors.Is(err, ErrStale) {
		return res, &NotResubmittableError{fmt.Sprintf("order %s changed while being resubmitted; look again", orderID)}
	} else if err != nil {
		return res, err
	}
	return res, nil
}

func (s *Store) resetTask(t Task, to workflow.State, round int, now time.Time) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: &s.state, Key: key(t.OrderID, taskSK),
		ConditionExpression: aws.String("ProcessState = :from AND Round = :round"),
		UpdateExpression:    aws.String("SET ProcessState = :to, Round = :newRound, UpdatedAt = :now REMOVE CompletedAt, LastError"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":from": str(string(t.State)), ":round": num(int64(t.Round)), ":to": str(string(to)),
			":newRound": num(int64(round)), ":now": num(ms(now)),
		},
	}}
}

// resetRecord puts a record back to Pending in round, ready (due after pickup)
// or waiting.
func (s *Store) resetRecord(orderID string, r Step, round int, ready bool, pickup time.Duration, now time.Time) types.TransactWriteItem {
	vals := eventValues(map[string]types.AttributeValue{
		":pending": str(string(workflow.Pending)), ":zero": num(0), ":round": num(int64(round)),
		":version": num(int64(r.Version)), ":one": num(1), ":now": num(ms(now)),
	}, now, "resubmitted by the operator (round %d)", round)
	expr := "SET ProcessState = :pending, FailureCount = :zero, Round = :round, Version = Version + :one, UpdatedAt = :now, " + appendEvent
	remove := " REMOVE LockedBy, CompleteBy, LastError, Alerted, StepResult"
	if ready {
		expr += ", DueShard = :shard, DueAt = :due"
		vals[":shard"] = str(shardOf(orderID, r.Ref(), s.shards))
		vals[":due"] = num(ms(now.Add(pickup)))
	} else {
		remove += ", DueShard, DueAt"
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: &s.state, Key: key(orderID, sortKey(r.Ref())),
		ConditionExpression:       aws.String("Version = :version"),
		UpdateExpression:          aws.String(expr + remove),
		ExpressionAttributeValues: vals,
	}}
}
