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
	OrderID  string
	Order    string // the order's JSON, stored and carried to the Agents
	Workflow workflow.Definition
	Now      time.Time
}

// Submit inserts, in one transaction, the order, the task record and one
// Pending record per step; the first step is ready (in the deadline index with
// the pickup deadline). It reports created=false, with no error, when the
// OrderID already exists: a duplicate is an idempotent success.
func (s *Store) Submit(ctx context.Context, sub Submission) (created bool, err error) {
	now := ms(sub.Now)
	notExists := aws.String("attribute_not_exists(OrderID)")
	orderItem := map[string]types.AttributeValue{
		topology.KeyOrderID: str(sub.OrderID),
		"Order":             str(sub.Order),
		"ReceivedAt":        num(now),
	}
	task, err := attributevalue.MarshalMap(taskItem{
		OrderID: sub.OrderID, SK: taskSK, Workflow: sub.Workflow.Name,
		ProcessState: string(workflow.Pending), StepCount: len(sub.Workflow.Steps),
		CreatedAt: now, UpdatedAt: now,
	})
	if err != nil {
		return false, fmt.Errorf("encode task %s: %w", sub.OrderID, err)
	}
	items := []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.orders, Item: orderItem, ConditionExpression: notExists}},
		{Put: &types.Put{TableName: &s.state, Item: task, ConditionExpression: notExists}},
	}
	for i, st := range sub.Workflow.Steps {
		it := stepItem{
			OrderID: sub.OrderID, SK: stepSK(i), StepIndex: i, StepName: st.Name, Agent: st.Agent,
			TimeoutMs: st.Timeout.Milliseconds(), MaxFailures: st.MaxFailures,
			RetryBackoffMs: st.RetryBackoff.Milliseconds(), ProcessState: string(workflow.Pending),
			Payload: sub.Order, CreatedAt: now, UpdatedAt: now,
		}
		if i == 0 {
			it.DueShard = shardOf(sub.OrderID, i, s.shards)
			it.DueAt = ms(sub.Now.Add(sub.Workflow.PickupTimeout))
		}
		av, err := attributevalue.MarshalMap(it)
		if err != nil {
			return false, fmt.Errorf("encode step %s/%d: %w", sub.OrderID, i, err)
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
