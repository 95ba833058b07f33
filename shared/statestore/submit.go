package statestore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Submission is an accepted order and the workflow that will run it.
type Submission struct {
	OrderID    string
	Order      string // the order's JSON, stored and carried to the Agents
	ReplyQueue string // where status notifications go ("" for none)
	Workflow   workflow.Definition
	Now        time.Time
}

// Submit inserts, in one transaction, the order, the task record, one Pending
// record per step and one per undo action; the first step is ready (in the
// deadline index with the pickup deadline). It reports created=false, with no
// error, when the OrderID already exists: a duplicate is an idempotent success.
func (s *Store) Submit(ctx context.Context, sub Submission) (created bool, err error) {
	now := ms(sub.Now)
	notExists := aws.String("attribute_not_exists(OrderID)")
	orderItem := map[string]types.AttributeValue{
		topology.KeyOrderID: str(sub.OrderID),
		"Order":             str(sub.Order),
		"ReceivedAt":        num(now),
	}
	task, err := attributevalue.MarshalMap(taskItem{
		OrderID: sub.OrderID, SK: taskSK, Workflow: sub.Workflow.Name, ReplyQueue: sub.ReplyQueue,
		ProcessState: string(workflow.Pending), StepCount: len(sub.Workflow.Steps), Round: 1,
		CreatedAt: now, UpdatedAt: now,
	})
	if err != nil {
		return false, fmt.Errorf("encode task %s: %w", sub.OrderID, err)
	}
	items := []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.orders, Item: orderItem, ConditionExpression: notExists}},
		{Put: &types.Put{TableName: &s.state, Item: task, ConditionExpression: notExists}},
	}
	for _, it := range s.records(sub) {
		av, err := attributevalue.MarshalMap(it)
		if err != nil {
			return false, fmt.Errorf("encode %s of %s: %w", it.SK, sub.OrderID, err)
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.state, Item: av, ConditionExpression: notExists}})
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if codes, ok := cancelled(err); ok && slices.Contains(codes, "ConditionalCheckFailed") {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("submit order %s: %w", sub.OrderID, err)
	}
	return true, nil
}

// records are the step and undo records of a new task.
func (s *Store) records(sub Submission) []stepItem {
	now := ms(sub.Now)
	rec := func(r workflow.Ref, a workflow.Action, undoFrom int) stepItem {
		return stepItem{
			OrderID: sub.OrderID, SK: sortKey(r), StepIndex: r.Index, Undo: r.Undo, UndoFrom: undoFrom, Round: 1,
			ReplyQueue: sub.ReplyQueue, StepName: a.Name, Agent: a.Agent, TimeoutMs: a.Timeout.Milliseconds(),
			MaxFailures: a.MaxFailures, RetryBackoffMs: a.RetryBackoff.Milliseconds(),
			ProcessState: string(workflow.Pending), Payload: sub.Order, CreatedAt: now, UpdatedAt: now,
		}
	}
	var out []stepItem
	for i, st := range sub.Workflow.Steps {
		it := rec(workflow.Ref{Index: i}, st.Action, sub.Workflow.UndoFrom(i))
		it.HasUndo = st.Undo != nil
		if i == 0 {
			it.DueShard = shardOf(sub.OrderID, it.ref(), s.shards)
			it.DueAt = ms(sub.Now.Add(sub.Workflow.PickupTimeout))
			it.Events = []string{event(sub.Now, "received; ready")}
		}
		out = append(out, it)
		if st.Undo != nil {
			out = append(out, rec(workflow.Ref{Index: i, Undo: true}, *st.Undo, -1))
		}
	}
	return out
}

func (it stepItem) ref() workflow.Ref { return workflow.Ref{Index: it.StepIndex, Undo: it.Undo} }
