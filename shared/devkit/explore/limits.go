package explore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
)

// DynamoDB's limits on one write, as its documentation gives them.
const (
	maxExpressionBytes = 4096      // an update's or a condition's expression
	maxItemBytes       = 400 << 10 // an item
	maxTransactItems   = 100       // the actions of one TransactWriteItems
)

// limitedDB is the tables as the world's state store and flow items see
// them: every write is measured against DynamoDB's limits (an emulator may
// take what DynamoDB refuses), the largest noted.
type limitedDB struct {
	statestore.API
	w *World
}

// UpdateItem measures the update's expressions and the item it leaves.
func (d limitedDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	d.w.measure("UpdateItem", aws.ToString(in.UpdateExpression), aws.ToString(in.ConditionExpression), nil)
	d.w.updated(in.Key)
	out, err := d.API.UpdateItem(ctx, in, opts...)
	if err == nil && in.ReturnValues == types.ReturnValueAllNew {
		d.w.measure("UpdateItem", "", "", out.Attributes)
	}
	return out, err
}

// PutItem measures the item and its condition.
func (d limitedDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	d.w.measure("PutItem", "", aws.ToString(in.ConditionExpression), in.Item)
	return d.API.PutItem(ctx, in, opts...)
}

// TransactWriteItems measures each action, and counts them.
func (d limitedDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if len(in.TransactItems) > maxTransactItems {
		d.w.overLimit(fmt.Sprintf("TransactWriteItems of %d actions (at most %d)", len(in.TransactItems), maxTransactItems))
	}
	for _, t := range in.TransactItems {
		switch {
		case t.Put != nil:
			d.w.measure("TransactWriteItems Put", "", aws.ToString(t.Put.ConditionExpression), t.Put.Item)
		case t.Update != nil:
			d.w.measure("TransactWriteItems Update", aws.ToString(t.Update.UpdateExpression), aws.ToString(t.Update.ConditionExpression), nil)
		}
	}
	return d.API.TransactWriteItems(ctx, in, opts...)
}

// updated notes the keys of the items the run updated (a worker's runs
// share their tables: what an earlier run wrote is not this one's).
func (w *World) updated(key map[string]types.AttributeValue) {
	pk, _ := key[topology.KeyOrderID].(*types.AttributeValueMemberS)
	sk, _ := key[topology.KeySort].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written[pk.Value+" "+sk.Value] = true
}

// measure notes a write's expressions and item over DynamoDB's limits, and
// the largest seen.
func (w *World) measure(what, update, cond string, item map[string]types.AttributeValue) {
	size := itemBytes(item)
	w.mu.Lock()
	w.largest.expression = max(w.largest.expression, len(update), len(cond))
	w.largest.item = max(w.largest.item, size)
	w.mu.Unlock()
	switch {
	case len(update) > maxExpressionBytes:
		w.overLimit(fmt.Sprintf("%s with a %d-byte update expression (at most %d)", what, len(update), maxExpressionBytes))
	case len(cond) > maxExpressionBytes:
		w.overLimit(fmt.Sprintf("%s with a %d-byte condition expression (at most %d)", what, len(cond), maxExpressionBytes))
	case size > maxItemBytes:
		w.overLimit(fmt.Sprintf("%s of a %d-byte item (at most %d)", what, size, maxItemBytes))
	}
}

func (w *World) overLimit(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.limits) < 3 {
		w.limits = append(w.limits, what)
	}
}

// checkLimits says which writes passed DynamoDB's limits, and where the
// state store refused one as too large (statestore.ErrTooLarge: it never
// may).
func (w *World) checkLimits() []string {
	var bad []string
	for _, l := range w.limits {
		bad = append(bad, "every write within DynamoDB's limits: "+l)
	}
	w.logs.mu.Lock()
	defer w.logs.mu.Unlock()
	for _, l := range w.logs.tooLarge {
		bad = append(bad, "the state store never refuses a write as too large: "+l)
	}
	return bad
}

// largest are the largest expression and item the run wrote.
type largest struct{ expression, item int }

// itemBytes is an item's size as DynamoDB counts it, about: its attribute
// names and values.
func itemBytes(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueBytes(v)
	}
	return n
}

func valueBytes(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberM:
		return 3 + itemBytes(v.Value) + len(v.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, x := range v.Value {
			n += 1 + valueBytes(x)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += len(s)/2 + 1
		}
		return n
	default: // BOOL, NULL, BS
		return 1
	}
}
