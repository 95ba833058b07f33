package explore

import (
	"context"
	"math/rand/v2"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/sas-go/sas/shared/statestore"
)

// storeFaults is the state store's engine as the handlers of a run with
// store faults (plan.storeFaults) reach it: while the run injects faults, a
// read fails, a write fails before DynamoDB applies it, or a write is
// applied and its answer lost (the writer cannot tell it from a failure).
// Throttling, a 500 and a connection reset look so to a handler once the
// SDK's own retries are spent. The operator's actions and the run's checks
// read and write the engine itself.
type storeFaults struct {
	statestore.API
	mu    sync.Mutex
	rng   *rand.Rand // its own: the run's other choices are as they were without it
	on    func() bool
	count func(string)
}

// storeFaultOdds is 1 in how many requests of each kind fail so: a few
// faults in each order's life (tens of requests), none so many that an
// order cannot end.
const storeFaultOdds = 40

// errThrottled is a request the explorer failed as DynamoDB fails one it
// throttles, the SDK's retries spent.
var errThrottled = &smithy.GenericAPIError{Code: "ThrottlingException", Message: "throttled by the explorer"}

func newStoreFaults(db statestore.API, seed uint64, on func() bool, count func(string)) *storeFaults {
	return &storeFaults{API: db, rng: rand.New(rand.NewPCG(seed, 0xdb5)), on: on, count: count}
}

// fault reports whether the explorer fails this request, counting it as
// what.
func (d *storeFaults) fault(what string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.on() || d.rng.IntN(storeFaultOdds) > 0 {
		return false
	}
	d.count(what)
	return true
}

// read fails a read, or makes it.
func read[In, Out any](d *storeFaults, call func(context.Context, In, ...func(*dynamodb.Options)) (Out, error),
	ctx context.Context, in In, opts []func(*dynamodb.Options)) (Out, error) {
	if d.fault("state store reads failed") {
		var none Out
		return none, errThrottled
	}
	return call(ctx, in, opts...)
}

// write fails a write before it is applied, or applies it and perhaps
// loses its answer.
func write[In, Out any](d *storeFaults, call func(context.Context, In, ...func(*dynamodb.Options)) (Out, error),
	ctx context.Context, in In, opts []func(*dynamodb.Options)) (Out, error) {
	var none Out
	if d.fault("state store writes failed") {
		return none, errThrottled
	}
	out, err := call(ctx, in, opts...)
	if err == nil && d.fault("state store writes whose answer was lost") {
		return none, errLost
	}
	return out, err
}

// GetItem may fail.
func (d *storeFaults) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return read(d, d.API.GetItem, ctx, in, opts)
}

// Query may fail.
func (d *storeFaults) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return read(d, d.API.Query, ctx, in, opts)
}

// BatchGetItem may fail.
func (d *storeFaults) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return read(d, d.API.BatchGetItem, ctx, in, opts)
}

// Scan may fail.
func (d *storeFaults) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return read(d, d.API.Scan, ctx, in, opts)
}

// PutItem may fail, or lose its answer.
func (d *storeFaults) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return write(d, d.API.PutItem, ctx, in, opts)
}

// UpdateItem may fail, or lose its answer.
func (d *storeFaults) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return write(d, d.API.UpdateItem, ctx, in, opts)
}

// TransactWriteItems may fail, or lose its answer.
func (d *storeFaults) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput,
	opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return write(d, d.API.TransactWriteItems, ctx, in, opts)
}
