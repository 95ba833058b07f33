package statestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/health"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
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
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Store reads and writes the orders table and the state table.
type Store struct {
	db      API
	orders  string
	state   string
	shards  int
	keep    time.Duration // how long an ended order is kept (0: forever)
	told    bool          // keep is the deployment's (WithRetention), not a default
	defined sync.Map      // by workflow version, *definedOnce: whether this process stored its definition
	// read are definitions read back, by name@version: stored once and
	// never changed, each is read once a process (at most maxRead kept).
	readMu sync.Mutex
	read   map[string]workflow.Definition
	// ended is told of each end Apply writes (WithEnds; nil: nobody).
	ended func(health.End)
}

// maxRead bounds the definitions a store keeps read.
const maxRead = 64

// definedOnce is one workflow version's definition as this process stored
// it: the first submission of the version writes it while the others of its
// batch, which run at once, wait for that write instead of each making its
// own.
type definedOnce struct {
	mu   sync.Mutex
	done bool
}

// ExpiresAttribute is the attribute DynamoDB's time to live reads on both
// tables (the stack's TimeToLiveSpecification): when an ended order may be
// deleted, in Unix seconds. An order in flight has none on its state item.
const ExpiresAttribute = topology.KeyExpires

// WithRetention makes s keep an ended order for d (0: forever): Submit
// sets its orders item's ExpiresAttribute to the latest end the order can
// reach (submission plus its workflow's Lifetime: its round, a hold, its
// compensation) plus d, so the order outlives its state item, and writes d
// on the state item, so that the write that ends the order, whoever makes
// it (a store without a retention, as an operator's, too), sets the state
// item's to the end plus d. It returns s.
func (s *Store) WithRetention(d time.Duration) *Store {
	s.keep, s.told = d, true
	return s
}

// Retention is what s keeps an ended order for (0: forever) and whether it
// was told (WithRetention): a store not told (an operator's left at its
// default) sets no expiry of its own on an order that carries none.
func (s *Store) Retention() (keep time.Duration, told bool) { return s.keep, s.told }

// pushOut is how keepOrder pushes out what an order of it, at work again,
// keeps: by its retention (its own, or the store's), on any item; or, for
// an order stored before orders kept theirs written by a store told no
// retention (an operator's not told its deployment's), by DefaultRetention
// on the items that expire only (existing): one its deployment keeps for
// ever is not given an expiry, and one that expires later keeps its own.
func (s *Store) pushOut(it stateItem) (keep time.Duration, existing bool) {
	if it.ownRetention() == 0 && !s.told {
		return DefaultRetention, true
	}
	return it.retention(s.keep), false
}

// expires is the ExpiresAttribute value for an order ending at end and
// kept keep.
func expires(end time.Time, keep time.Duration) types.AttributeValue {
	return num(end.Add(keep).Unix())
}

// retention is how long the order of it is kept once ended (0: forever):
// the retention it was submitted with, which every writer honours (an
// operator's, which knows no retention of its own, too), or, for an order
// stored before items carried it, the store's.
func (it stateItem) retention(store time.Duration) time.Duration {
	return inForce(it.ownRetention(), store)
}

// inForce is the retention that applies (0: forever) to an order submitted
// with own (Forever; 0: unknown, as an item that predates it) by a writer
// whose store keeps store.
func inForce(own, store time.Duration) time.Duration {
	switch own {
	case 0:
		return store
	case Forever:
		return 0
	}
	return own
}

// ownRetention is the retention the order was submitted with: Forever, or
// 0 if its item predates it.
func (it stateItem) ownRetention() time.Duration {
	switch {
	case it.KeepS > 0:
		return time.Duration(it.KeepS) * time.Second
	case it.KeepS < 0:
		return Forever
	}
	return 0
}

// DefaultRetentionDays is how many days a deployment keeps an ended order
// unless configured (its retentionDays, deployment.RetentionDaysDefault);
// DefaultRetention is that long: what a store told no retention (an
// operator's) pushes the expiring items of an order that carries none of
// its own out by, when it puts it to work again (pushOut).
const (
	DefaultRetentionDays = 90
	DefaultRetention     = DefaultRetentionDays * 24 * time.Hour
)

// Forever is the retention of an order submitted to be kept forever
// (retentionDays=0), as Step.Retention and Snapshot.Retention give it, and
// Result.Keep takes it.
const Forever time.Duration = -1

// keepSeconds is how a retention is kept on a state item (KpS).
func keepSeconds(keep time.Duration) int64 {
	if keep == 0 {
		return -1
	}
	return int64(keep / time.Second)
}

// lifetime is the longest the order of it may go on from now
// (workflow.Definition.Lifetime), or, for an order stored before items
// carried it, twice its deadline.
func (it stateItem) lifetime() time.Duration {
	if it.LifetimeMs > 0 {
		return time.Duration(it.LifetimeMs) * time.Millisecond
	}
	return 2 * time.Duration(it.DeadlineMs) * time.Millisecond
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

// Load returns the task and its records, read consistently.
func (s *Store) Load(ctx context.Context, orderID string) (Task, []Step, error) {
	it, err := s.item(ctx, orderID)
	if err != nil {
		return Task{}, nil, err
	}
	return it.task(), it.steps(), nil
}

// Record reads one record of an order, consistently (ErrNotFound if the
// order, or the record, is not there).
func (s *Store) Record(ctx context.Context, orderID string, r workflow.Ref) (Step, error) {
	sts, err := s.RecordsOf(ctx, orderID, []workflow.Ref{r})
	if err != nil {
		return Step{}, err
	}
	return sts[0], nil
}

// RecordsOf returns the order's records refs, from one consistent read of
// its state item; a ref the order does not have is ErrNotFound.
func (s *Store) RecordsOf(ctx context.Context, orderID string, refs []workflow.Ref) ([]Step, error) {
	it, err := s.item(ctx, orderID)
	if err != nil {
		return nil, err
	}
	out := make([]Step, 0, len(refs))
	v := it.view()
	for _, r := range refs {
		if _, ok := it.Recs[sortKey(r)]; !ok {
			return nil, fmt.Errorf("order %s has no record %s: %w", orderID, sortKey(r), ErrNotFound)
		}
		out = append(out, it.step(sortKey(r), v))
	}
	return out, nil
}

// item reads an order's state item consistently.
func (s *Store) item(ctx context.Context, orderID string) (stateItem, error) {
	var it stateItem
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.state, ConsistentRead: aws.Bool(true), Key: key(orderID, taskSK),
	})
	if err != nil {
		return it, fmt.Errorf("load order %s: %w", orderID, err)
	}
	if out.Item == nil {
		return it, fmt.Errorf("load order %s: %w", orderID, ErrNotFound)
	}
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return it, fmt.Errorf("decode order %s: %w", orderID, err)
	}
	return it, nil
}

// ErrNotFound means no task record exists for the order.
var ErrNotFound = errors.New("order not found")

// Tasks returns the task records of the given orders (missing ones are absent
// from the map), with eventually consistent batched reads.
func (s *Store) Tasks(ctx context.Context, orderIDs []string) (map[string]Task, error) {
	items, err := s.items(ctx, orderIDs, false)
	if err != nil {
		return nil, fmt.Errorf("batch get tasks: %w", err)
	}
	out := make(map[string]Task, len(items))
	for id, it := range items {
		out[id] = it.task()
	}
	return out, nil
}

// items reads the state items of the given orders in batches of 100 (missing
// ones are absent from the map).
func (s *Store) items(ctx context.Context, orderIDs []string, consistent bool) (map[string]stateItem, error) {
	out := make(map[string]stateItem, len(orderIDs))
	for start := 0; start < len(orderIDs); start += 100 {
		keys := make([]map[string]types.AttributeValue, 0, 100)
		for _, id := range orderIDs[start:min(start+100, len(orderIDs))] {
			keys = append(keys, key(id, taskSK))
		}
		req := map[string]types.KeysAndAttributes{s.state: {Keys: keys, ConsistentRead: aws.Bool(consistent)}}
		for len(req) > 0 {
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, err
			}
			for _, item := range res.Responses[s.state] {
				var it stateItem
				if err := attributevalue.UnmarshalMap(item, &it); err != nil {
					return nil, fmt.Errorf("decode state item: %w", err)
				}
				out[it.OrderID] = it
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// ordersKey is the key of an order's orders item.
func ordersKey(orderID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{topology.KeyOrderID: str(orderID)}
}

// Order returns the order as submitted, or ErrNotFound.
func (s *Store) Order(ctx context.Context, orderID string) (string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.orders,
		ConsistentRead: aws.Bool(true),
		Key:            ordersKey(orderID),
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

// ItemBytes is the size of an order's state item as DynamoDB counts it for
// capacity (ItemSize), read consistently: what the next write of it is
// billed by, a unit per started KB.
func (s *Store) ItemBytes(ctx context.Context, orderID string) (int, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.state, ConsistentRead: aws.Bool(true), Key: key(orderID, taskSK),
	})
	if err != nil {
		return 0, fmt.Errorf("read order %s: %w", orderID, err)
	}
	if out.Item == nil {
		return 0, fmt.Errorf("read order %s: %w", orderID, ErrNotFound)
	}
	return ItemSize(out.Item), nil
}
