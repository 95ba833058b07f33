package statestore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
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
	OrderID string
	Order   string // the order as kept (shared/kept), stored and carried to the Agents
	// Sealed says the order's data is sealed under a data key of its own
	// (kept.Boundary.SealOrder): what is made of it is sealed too.
	Sealed     bool
	ReplyQueue string // where status notifications go ("" for none)
	// Trace is the trace context the order was accepted in (a W3C
	// traceparent; "": none), kept for what happens to it later.
	Trace    string
	Workflow workflow.Definition
	// Items counts the items of each forEach step (Definition.Items): one
	// record each.
	Items map[int]int
	// Search are the order's values of its workflow's searchable fields
	// (workflow.Definition.SearchValues), by field, each as it is kept:
	// the value, or a keyed hash of it in a deployment that seals its
	// orders' data (shared/searchkey). One index item each.
	Search map[string]string
	Now    time.Time
}

// Submit inserts, in one transaction, the order and its state item: the task
// with one Pending record per step and one per undo action, and the order's
// deadline; the first step is ready (due at the pickup deadline). The order
// enters the deadline index at the earlier of the pickup deadline and the
// first step's timeout, so that an attempt claimed at once and hung is found
// at its CompleteBy. It reports created=false, with no error, when the
// OrderID already exists: a duplicate is an idempotent success.
func (s *Store) Submit(ctx context.Context, sub Submission) (created bool, err error) {
	if err := s.definitionOnce(ctx, sub.Workflow); err != nil {
		return false, err
	}
	now := ms(sub.Now)
	once, err := creates()
	if err != nil {
		return false, err
	}
	notExists := &once.Condition
	orderItem := map[string]types.AttributeValue{
		topology.KeyOrderID: str(sub.OrderID),
		"Order":             str(sub.Order),
		"ReceivedAt":        num(now),
	}
	wf := sub.Workflow
	if s.keep > 0 {
		orderItem[ExpiresAttribute] = expires(sub.Now.Add(wf.Lifetime()), s.keep)
	}
	due := ms(sub.Now.Add(wf.PickupTimeout))
	first := wf.PickupTimeout
	for _, r := range wf.Starts(sub.Items) {
		if t := wf.Steps[r.Index].Timeout; t > 0 {
			first = min(first, t)
		}
	}
	look := ms(sub.Now.Add(first))
	finished := 0
	state, err := attributevalue.MarshalMap(stateItem{
		OrderID: sub.OrderID, SK: taskSK, Workflow: wf.Name, WfVersion: wf.Version, PickupMs: wf.PickupTimeout.Milliseconds(),
		ReplyQueue: sub.ReplyQueue,
		State:      string(workflow.Pending), Round: 1,
		DueShard: shardOf(sub.OrderID, s.shards), Shard: shardOf(sub.OrderID, s.shards), DueAt: look, CreatedAt: now, UpdatedAt: now,
		DeadlineAt: ms(sub.Now.Add(wf.Deadline)), DeadlineMs: wf.Deadline.Milliseconds(),
		LifetimeMs: wf.Lifetime().Milliseconds(), KeepS: keepSeconds(s.keep),
		ItemsDone: itemsDone(sub.Items), Finished: &finished, Recs: records(sub, due), Sealed: sub.Sealed, Trace: sub.Trace,
	})
	if err != nil {
		return false, fmt.Errorf("encode state of %s: %w", sub.OrderID, err)
	}
	if waits(wf) {
		state["Evt"] = emptyMap() // where the round's events are kept (a nested SET needs its map)
	}
	// The orders item carries this submission's write id (no other write
	// changes it): a transaction applied whose answer was lost is known by
	// it. Taken as a duplicate, the order would run all the same, its
	// "received" never posted nor counted.
	id := writeID()
	orderItem[WriteIDAttribute] = str(id)
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: append([]types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.orders, Item: orderItem, ConditionExpression: notExists,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
		{Put: &types.Put{TableName: &s.state, Item: state, ConditionExpression: notExists}},
	}, searchItems(s.state, sub, orderItem[ExpiresAttribute])...)})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && ownWrite(tce.CancellationReasons[0].Item, id) {
		// A try again of this very transaction (the SDK's, on an engine
		// that does not honour its token, or past the token's life).
		return true, nil
	}
	if codes, ok := cancelled(err); ok && slices.Contains(codes, "ConditionalCheckFailed") {
		return false, nil
	}
	if err != nil && ctx.Err() == nil && s.wrote(ctx, sub.OrderID, id) {
		// The SDK's tries spent (its token makes a try again of an applied
		// transaction succeed), the answer of one that was applied lost.
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("submit order %s: %w", sub.OrderID, err)
	}
	return true, nil
}

// wrote reports whether the order's orders item, read back, carries write
// id: the submission was applied (false if it cannot be read).
func (s *Store) wrote(ctx context.Context, orderID, id string) bool {
	got, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.orders, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{topology.KeyOrderID: str(orderID)}})
	return err == nil && ownWrite(got.Item, id)
}

// definitionOnce stores the workflow version's definition the first time
// this process submits an order of it (Definition reads it back): one write
// a process, however many of its submissions start at once.
func (s *Store) definitionOnce(ctx context.Context, d workflow.Definition) error {
	o := s.definedOnce(d)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return nil
	}
	if err := s.putDefinition(ctx, d); err != nil {
		return err // the next submission tries again
	}
	o.done = true
	return nil
}

// definedOnce is d's version's entry of s.defined.
func (s *Store) definedOnce(d workflow.Definition) *definedOnce {
	v, _ := s.defined.LoadOrStore(d.Name+"@"+d.Version, &definedOnce{})
	return v.(*definedOnce)
}

// waits reports whether a workflow waits for an event.
func waits(d workflow.Definition) bool {
	return slices.ContainsFunc(d.Steps, func(st workflow.Step) bool { return st.Wait != nil })
}

func emptyMap() types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
}

// itemsDone is a new order's count of the items done of each forEach step:
// none yet (nil for an order without items).
func itemsDone(items map[int]int) map[string]int {
	if len(items) == 0 {
		return nil
	}
	out := make(map[string]int, len(items))
	for i := range items {
		out[strconv.Itoa(i)] = 0
	}
	return out
}

// records are the step and undo records of a new task (one per item of a
// forEach step): the rules' first order (workflow.Definition.Start), with
// the action each record runs; the records of the steps that need nothing
// are ready, due at due.
func records(sub Submission, due int64) map[string]recItem {
	out := map[string]recItem{}
	for ref, r := range sub.Workflow.Start(sub.Items).Recs {
		it := recordOf(sub.Workflow, ref, 1)
		if r.Ready {
			it.DueAt, it.ReadyAt = due, ms(sub.Now)
		}
		out[sortKey(ref)] = it
	}
	return out
}
