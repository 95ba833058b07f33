package statestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// interposed runs before ahead of each PutItem it passes on: a write by
// someone else that lands between the caller's read and its write.
type interposed struct {
	*dynamodb.Client
	before func()
	puts   int
}

func (d *interposed) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	d.puts++
	if d.before != nil {
		d.before()
	}
	return d.Client.PutItem(ctx, in, opts...)
}

// An operator resubmits an order the moment it ended, while the Supervisor
// still confirms its alert: the resubmission reads the order again and
// succeeds. An order that changes on every read is refused, with why.
func TestResubmitRacesTheSupervisor(t *testing.T) {
	for name, c := range engines {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			topo := storetest.NewTables(t, c.Clients.DynamoDB)
			db := &interposed{Client: c.Clients.DynamoDB}
			s := statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
			now := time.Now()
			fail := func(id string) {
				_, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: "{}",
					Workflow: workflow.Orders(workflow.Settings{}), Now: now})
				require.NoError(t, err)
				st, err := claimOrder(ctx, s, id, workflow.Ref{}, "sched", now)
				require.NoError(t, err)
				rec, err := outcome.Recorder{Store: s}.Record(ctx, workflow.Orders(workflow.Settings{}), outcome.Attempt{OrderID: id,
					Ref: workflow.Ref{}, Attempt: st.Attempt, Round: 1, Refusal: "declined", Read: st.Read, Now: now})
				require.NoError(t, err)
				require.Equal(t, workflow.Failed, rec.State)
			}

			fail("o-race")
			db.puts = 0
			db.before = func() {
				db.before = nil // once
				require.NoError(t, s.MarkAlerted(ctx, "o-race", workflow.Ref{}, now))
			}
			res, err := s.Resubmit(ctx, "o-race", "", time.Minute, now)
			require.NoError(t, err)
			require.Equal(t, 2, db.puts, "refused once, then written")
			require.Equal(t, 2, res.Round)
			task, recs, err := s.Load(ctx, "o-race")
			require.NoError(t, err)
			require.Equal(t, workflow.Pending, task.State)
			require.Equal(t, workflow.Pending, recs[0].State)
			require.Equal(t, 2, recs[0].Round)

			fail("o-churn")
			db.puts = 0
			db.before = func() { // someone else writes before every try
				_, err := c.Clients.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(topo.StateTable()),
					Key: map[string]types.AttributeValue{
						topology.KeyOrderID: &types.AttributeValueMemberS{Value: "o-churn"},
						topology.KeySort:    &types.AttributeValueMemberS{Value: "TASK"}},
					UpdateExpression:          aws.String("ADD V :one"), // the Version
					ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}})
				require.NoError(t, err)
			}
			_, err = s.Resubmit(ctx, "o-churn", "", time.Minute, now)
			require.True(t, statestore.IsNotResubmittable(err), "%v", err)
			require.ErrorContains(t, err, "order o-churn changed each of the 5 times it was read to be resubmitted")
			require.Equal(t, 5, db.puts)
			task, _, err = s.Load(ctx, "o-churn")
			require.NoError(t, err)
			require.Equal(t, workflow.Failed, task.State, "left as it was")
		})
	}
}
