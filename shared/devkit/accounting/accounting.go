// Package accounting counts the AWS requests a process makes, by the function
// that made them, the service and the operation, with the DynamoDB read and
// write units each request consumed as the engine reports them
// (ReturnConsumedCapacity, set on every DynamoDB request by the same
// middleware). It is how `sasctl bench` measures cost: from the requests made,
// not from a formula.
//
// Where an emulator's report of a transaction differs from what DynamoDB
// bills for it, the meter counts what DynamoDB bills and keeps the report
// beside it (Usage.ReportedWriteUnits); see transactionUnits. A write
// refused by its condition reports nothing, but DynamoDB bills it: see
// refusedUnits.
package accounting

import (
	"context"
	"errors"
	"maps"
	"math"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/sas-go/sas/shared/statestore"
)

// EmptyReceive is the operation name under which ReceiveMessage calls that
// returned no message are counted: idle polling, a fixed cost, not a cost of
// the messages.
const EmptyReceive = "ReceiveMessage (empty)"

// Key names what a count is of.
type Key struct {
	Function  string // who made the request (WithFunction); "" if untagged
	Service   string // the SDK's service id: "DynamoDB", "SQS", "SNS"
	Operation string
}

// Usage is what the requests under one Key consumed.
type Usage struct {
	Requests   int64
	ReadUnits  float64 // DynamoDB read capacity units, as reported
	WriteUnits float64 // DynamoDB write capacity units, as DynamoDB bills them (indexes included)
	// ReportedWriteUnits are the write units as the engine reported them;
	// they differ from WriteUnits for transactions (transactionUnits) and
	// for writes refused by their condition (refusedUnits).
	ReportedWriteUnits float64
	// Refused are the writes refused by their condition
	// (ConditionalCheckFailed), and RefusedUnits the write units DynamoDB
	// bills for them (in WriteUnits too): no engine reports them.
	Refused      int64
	RefusedUnits float64
	// Bytes are the bytes an S3 request moved: a PutObject's body, a
	// GetObject's answer.
	Bytes int64
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{Requests: u.Requests + o.Requests, ReadUnits: u.ReadUnits + o.ReadUnits, WriteUnits: u.WriteUnits + o.WriteUnits,
		ReportedWriteUnits: u.ReportedWriteUnits + o.ReportedWriteUnits, Refused: u.Refused + o.Refused,
		RefusedUnits: u.RefusedUnits + o.RefusedUnits, Bytes: u.Bytes + o.Bytes}
}

// Meter counts requests; safe for concurrent use.
type Meter struct {
	mu sync.Mutex
	by map[Key]Usage
	// local: the requests reach DynamoDB Local, which reports an index
	// write inside a transaction at twice what DynamoDB bills for it.
	local bool
}

// New returns an empty meter for requests to DynamoDB itself, or to an
// engine whose capacity reports match DynamoDB's bill.
func New() *Meter { return &Meter{by: map[Key]Usage{}} }

// NewForDynamoDBLocal returns an empty meter for requests to DynamoDB Local
// (or LocalStack, which runs it): it bills an index write inside a
// transaction at the standard rate, half what DynamoDB Local reports.
func NewForDynamoDBLocal() *Meter { return &Meter{by: map[Key]Usage{}, local: true} }

type fnKey struct{}

// WithFunction tags ctx: requests made with it are counted under fn.
func WithFunction(ctx context.Context, fn string) context.Context {
	return context.WithValue(ctx, fnKey{}, fn)
}

// FunctionOf returns the function ctx is tagged with, or "".
func FunctionOf(ctx context.Context) string {
	fn, _ := ctx.Value(fnKey{}).(string)
	return fn
}

// AddTo adds the counting middleware to one client's stack (an APIOptions
// function).
func (m *Meter) AddTo(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("sas.accounting",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			askCapacity(in.Parameters)
			out, md, err := next.HandleInitialize(ctx, in)
			k := Key{Function: FunctionOf(ctx), Service: awsmiddleware.GetServiceID(ctx), Operation: awsmiddleware.GetOperationName(ctx)}
			var u Usage
			if units, ok := refusedUnits(in.Parameters, err); ok {
				u.WriteUnits, u.Refused, u.RefusedUnits = units, 1, units
			}
			if err == nil {
				if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && len(r.Messages) == 0 {
					k.Operation = EmptyReceive
				}
				u.ReadUnits, u.WriteUnits = consumed(out.Result)
				u.Bytes = moved(in.Parameters, out.Result)
				u.ReportedWriteUnits = u.WriteUnits
				if t, ok := in.Parameters.(*dynamodb.TransactWriteItemsInput); ok {
					u.WriteUnits = transactionUnits(t, out.Result.(*dynamodb.TransactWriteItemsOutput), m.local)
				}
			}
			u.Requests = 1 // a failed request is billed too
			m.mu.Lock()
			m.by[k] = m.by[k].Add(u)
			m.mu.Unlock()
			return out, md, err
		}), middleware.After)
}

// Snapshot returns the counts so far.
func (m *Meter) Snapshot() map[Key]Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.by)
}

// Reset forgets the counts so far.
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.by)
}

// moved is the bytes an S3 request carried (0 for any other request).
func moved(params, result any) int64 {
	if p, ok := params.(*s3.PutObjectInput); ok {
		return aws.ToInt64(p.ContentLength)
	}
	if r, ok := result.(*s3.GetObjectOutput); ok {
		return aws.ToInt64(r.ContentLength)
	}
	return 0
}

// askCapacity asks DynamoDB to report what the request consumes, unless the
// caller asked already.
func askCapacity(params any) {
	set := func(r *ddbtypes.ReturnConsumedCapacity) {
		if *r == "" {
			*r = ddbtypes.ReturnConsumedCapacityTotal
		}
	}
	switch p := params.(type) {
	case *dynamodb.PutItemInput:
		set(&p.ReturnConsumedCapacity)
	case *dynamodb.UpdateItemInput:
		set(&p.ReturnConsumedCapacity)
	case *dynamodb.DeleteItemInput:
		set(&p.ReturnConsumedCapacity)
	case *dynamodb.GetItemInput:
		set(&p.ReturnConsumedCapacity)
	case *dynamodb.QueryInput:
		set(&p.ReturnConsumedCapacity)
	case *dynamodb.ScanInput:
		set(&p.ReturnConsumedCapacity)
	case *dynamodb.BatchGetItemInput:
		set(&p.ReturnConsumedCapacity)
	case *dynamodb.BatchWriteItemInput:
		set(&p.ReturnConsumedCapacity)
	case *dynamodb.TransactWriteItemsInput:
		// per table and index: see transactionUnits
		p.ReturnConsumedCapacity = ddbtypes.ReturnConsumedCapacityIndexes
	case *dynamodb.TransactGetItemsInput:
		set(&p.ReturnConsumedCapacity)
	}
}

// refusedUnits are the write units DynamoDB bills for a single-item write
// (PutItem, UpdateItem, DeleteItem) its condition refused: a unit per
// started KB of the larger of the existing item and the new one, at least
// one (DynamoDB developer guide, "DynamoDB read and write operations":
// a failed conditional write still consumes write capacity). The existing
// item's size is known when the request asked for it back
// (ReturnValuesOnConditionCheckFailure), a put's new item always; else one
// unit, what an item under 1 KB (every item of this product's happy path)
// costs. ok is false for any other request or outcome.
func refusedUnits(params any, err error) (units float64, ok bool) {
	var ccf *ddbtypes.ConditionalCheckFailedException
	if err == nil || !errors.As(err, &ccf) {
		return 0, false
	}
	size := statestore.ItemSize(ccf.Item)
	switch p := params.(type) {
	case *dynamodb.PutItemInput:
		size = max(size, statestore.ItemSize(p.Item))
	case *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput:
	default:
		return 0, false
	}
	return max(1, math.Ceil(float64(size)/1024)), true
}

// consumed returns the read and write units a DynamoDB response reports.
func consumed(result any) (read, write float64) {
	sum := func(cs ...ddbtypes.ConsumedCapacity) (n float64) {
		for _, c := range cs {
			n += aws.ToFloat64(c.CapacityUnits)
		}
		return n
	}
	one := func(c *ddbtypes.ConsumedCapacity) float64 {
		if c == nil {
			return 0
		}
		return sum(*c)
	}
	switch r := result.(type) {
	case *dynamodb.PutItemOutput:
		return 0, one(r.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		return 0, one(r.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		return 0, one(r.ConsumedCapacity)
	case *dynamodb.BatchWriteItemOutput:
		return 0, sum(r.ConsumedCapacity...)
	case *dynamodb.TransactWriteItemsOutput:
		return 0, sum(r.ConsumedCapacity...)
	case *dynamodb.GetItemOutput:
		return one(r.ConsumedCapacity), 0
	case *dynamodb.QueryOutput:
		return one(r.ConsumedCapacity), 0
	case *dynamodb.ScanOutput:
		return one(r.ConsumedCapacity), 0
	case *dynamodb.BatchGetItemOutput:
		return sum(r.ConsumedCapacity...), 0
	case *dynamodb.TransactGetItemsOutput:
		return sum(r.ConsumedCapacity...), 0
	}
	return 0, 0
}

// transactionUnits are the write units DynamoDB bills for a transaction,
// from the engine's report per table and index:
//   - per table, what the engine reports but at least the two units per item
//     DynamoDB bills for a transactional write of an item up to 1 KB.
//     DynamoDB Local reports two units per table however many items a
//     transaction writes; against DynamoDB the floor changes nothing.
//   - per index, what the engine reports; from DynamoDB Local (local), half
//     of it. DynamoDB doubles a transaction's writes of its items (prepare
//     and commit), and an index write inside a transaction costs what the
//     same write costs outside one, as measured against DynamoDB by the
//     dynoxide emulator's maintainers (github.com/nubo-db/dynoxide/pull/188);
//     AWS's guide has a transaction's changes reach the indexes after it
//     completes.
//     DynamoDB Local reports the index write doubled too: 2 units inside a
//     transaction for the keys-only entry it reports at 1 outside one.
func transactionUnits(in *dynamodb.TransactWriteItemsInput, out *dynamodb.TransactWriteItemsOutput, local bool) float64 {
	items := map[string]int{}
	for _, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			items[aws.ToString(it.Put.TableName)]++
		case it.Update != nil:
			items[aws.ToString(it.Update.TableName)]++
		case it.Delete != nil:
			items[aws.ToString(it.Delete.TableName)]++
		}
	}
	var n float64
	for _, c := range out.ConsumedCapacity {
		table := aws.ToFloat64(c.CapacityUnits)
		if c.Table != nil {
			table = aws.ToFloat64(c.Table.CapacityUnits)
		}
		n += max(table, 2*float64(items[aws.ToString(c.TableName)]))
		for _, idx := range c.GlobalSecondaryIndexes {
			units := aws.ToFloat64(idx.CapacityUnits)
			if local {
				units /= 2
			}
			n += units
		}
	}
	return n
}
