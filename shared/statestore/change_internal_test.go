package statestore

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// updatesOnly is a table that takes every update and answers with the item
// it was given (as it was read), noting the update's expressions.
type updatesOnly struct {
	API
	item   stateItem
	update string
	cond   string
}

func (u *updatesOnly) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	u.update, u.cond = *in.UpdateExpression, ""
	if in.ConditionExpression != nil {
		u.cond = *in.ConditionExpression
	}
	av, err := attributevalue.MarshalMap(u.item)
	return &dynamodb.UpdateItemOutput{Attributes: av}, err
}

// A write names each record's fields while that fits DynamoDB's 4 KB; past
// it, each record it changes is written whole (the largest order's 400
// records included), and past that the whole record map, each on the order
// as read (its version): never an expression over the limit, whatever the
// form.
func TestAWriteTooLargeFieldByFieldIsWrittenWhole(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	for _, c := range []struct {
		ready int
		form  *regexp.Regexp
	}{
		{100, regexp.MustCompile(`^SET .*R\.#[0-9a-z]+\.d=:[0-9a-z]+,R\.#[0-9a-z]+\.ra=`)}, // field by field
		{200, regexp.MustCompile(`^SET .*R\.#[0-9a-z]+=:[0-9a-z]+,R\.#[0-9a-z]+=:`)},       // each record whole
		{400, regexp.MustCompile(`^SET .*R\.#[0-9a-z]+=:[0-9a-z]+,R\.#[0-9a-z]+=:`)},       // the largest order's
		{600, regexp.MustCompile(`^SET .*,R=:[0-9a-z]+$`)},                                 // the whole map: more than an order has
	} {
		it := stateItem{OrderID: "o-1", SK: taskSK, State: string(workflow.Pending), Round: 1, Version: 7, Recs: map[string]recItem{}}
		var ready []workflow.Ref
		for i := range c.ready {
			ref := workflow.Ref{Index: 1, Item: i + 1}
			it.Recs[sortKey(ref)] = recItem{Name: "pack", Agent: "svc", State: string(workflow.Pending), Round: 1}
			ready = append(ready, ref)
		}
		db := &updatesOnly{item: it}
		s := New(db, "orders", "state", 1)
		_, err := s.Apply(context.Background(), Snapshot{it: it}, Write{Move: workflow.Move{Ready: ready},
			Due: now.Add(time.Minute), Now: now})
		require.NoError(t, err)
		require.Regexp(t, c.form, db.update, "%d records made ready", c.ready)
		require.LessOrEqual(t, len(db.update), MaxExpressionBytes)
		if c.ready > 100 {
			require.Contains(t, db.cond, "V=", "written whole on the order as read")
		}
	}
}
