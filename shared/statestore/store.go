package statestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/topology"
)

// ErrNotClaimable means the step is not a ready Pending step: another
// scheduler holds it, it already ran, or it does not exist.
var ErrNotClaimable = errors.New("step not claimable")

// ErrStale means the write's condition no longer holds: the reply is from an
// attempt that is not the current one, or another supervisor got there first.
var ErrStale = errors.New("stale: record changed since it was read")

// API is the part of the DynamoDB client the store uses.
type API interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Store reads and writes the orders table and the state table.
type Store struct {
	db     API
	orders string
	state  string
	shards int
}

// New returns a store over the given tables; shards is the number of
// partitions of the deadline index (topology.Topology.DeadlineShards).
func New(db API, ordersTable, stateTable string, shards int) *Store {
	return &Store{db: db, orders: ordersTable, state: stateTable, shards: max(shards, 1)}
}

func key(orderID, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		topology.KeyOrderID: &types.AttributeValueMemberS{Value: orderID},
		topology.KeySort:    &types.AttributeValueMemberS{Value: sk},
	}
}

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// cancelled returns the cancellation reason codes of a cancelled transaction.
func cancelled(err error) ([]string, bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, false
	}
	codes := make([]string, len(tce.CancellationReasons))
	for i, r := range tce.CancellationReasons {
		codes[i] = aws.ToString(r.Code)
	}
	return codes, true
}

// Load returns the task and its steps, read consistently.
func (s *Store) Load(ctx context.Context, orderID string) (Task, []Step, error) {
	var task Task
	var steps []Step
	found := false
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                 &s.state,
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("OrderID = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(orderID)},
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return task, nil, fmt.Errorf("load order %s: %w", orderID, err)
		}
		for _, item := range out.Items {
			if sk, _ := item[topology.KeySort].(*types.AttributeValueMemberS); sk != nil && sk.Value == taskSK {
				var it taskItem
				if err := attributevalue.UnmarshalMap(item, &it); err != nil {
					return task, nil, fmt.Errorf("decode task %s: %w", orderID, err)
				}
				task, found = it.task(), true
				continue
			}
			var it stepItem
			if err := attributevalue.UnmarshalMap(item, &it); err != nil {
				return task, nil, fmt.Errorf("decode step of %s: %w", orderID, err)
			}
			steps = append(steps, it.step())
		}
	}
	if !found {
		return task, nil, fmt.Errorf("load order %s: %w", orderID, ErrNotFound)
	}
	return task, steps, nil
}

// ErrNotFound means no task record exists for the order.
var ErrNotFound = errors.New("order not found")

// Tasks returns the task records of the given orders (missing ones are absent
// from the map), with eventually consistent batched reads.
func (s *Store) Tasks(ctx context.Context, orderIDs []string) (map[string]Task, error) {
	out := make(map[string]Task, len(orderIDs))
	for start := 0; start < len(orderIDs); start += 100 {
		keys := make([]map[string]types.AttributeValue, 0, 100)
		for _, id := range orderIDs[start:min(start+100, len(orderIDs))] {
			keys = append(keys, key(id, taskSK))
		}
		req := map[string]types.KeysAndAttributes{s.state: {Keys: keys}}
		for len(req) > 0 {
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("batch get tasks: %w", err)
			}
			for _, item := range res.Responses[s.state] {
				var it taskItem
				if err := attributevalue.UnmarshalMap(item, &it); err != nil {
					return nil, fmt.Errorf("decode task: %w", err)
				}
				out[it.OrderID] = it.task()
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// Order returns the order as submitted, or ErrNotFound.
func (s *Store) Order(ctx context.Context, orderID string) (string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.orders,
		ConsistentRead: aws.Bool(true),
		Key:            map[string]types.AttributeValue{topology.KeyOrderID: str(orderID)},
	})
	if err != nil {
		return "", fmt.Errorf("get order %s: %w", orderID, err)
	}
	if out.Item == nil {
		return "", fmt.Errorf("get order %s: %w", orderID, ErrNotFound)
	}
	body, _ := out.Item["Order"].(*types.AttributeValueMemberS)
	if body == nil {
		return "", fmt.Errorf("get order %s: no Order attribute", orderID)
	}
	return body.Value, nil
}
