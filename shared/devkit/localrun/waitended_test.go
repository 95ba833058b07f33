package localrun_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// WaitEnded reads an order it saw ended no more (a poll of a 1,000-order
// burst read every order, ended or not, four times a second): here the
// ended order's state item is deleted after the first poll, and the wait
// still counts it Processed, as first read, while it polls for an order
// never sent.
func TestWaitEndedKeepsAnOrderSeenEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, patient)
	ids := e.orders(1)
	e.waitEnded(ids)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var polls int
	var last localrun.Counts
	tasks, err := e.stack.WaitEnded(ctx, []string{ids[0], "never-sent"}, 100*time.Millisecond, func(c localrun.Counts) {
		polls, last = polls+1, c
		if polls > 1 {
			return
		}
		_, err := e.stack.Deployment.Clients.DynamoDB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(e.stack.Topology().StateTable()),
			Key: map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: ids[0]},
				topology.KeySort: &types.AttributeValueMemberS{Value: "TASK"}}})
		require.NoError(t, err)
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Greater(t, polls, 2, "it went on polling for the order never sent")
	require.Equal(t, localrun.Counts{Total: 2, Processed: 1, Missing: 1}, last)
	require.Equal(t, workflow.Processed, tasks[ids[0]].State)
}
