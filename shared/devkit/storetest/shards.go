package storetest

import (
	"context"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// OwnShard checks on db that an order stays in the shard of the deadline
// index Submission picked for it, with the deployment's shards, whoever
// writes it next: an operator's store told another count (sasctl's
// --deadline-shards left at its default, say) resubmits it, and records
// its step's outcome, into that shard, not into one the Supervisor, which
// sweeps the deployment's shards, would never read.
func OwnShard(t *testing.T, db *dynamodb.Client) {
	t.Helper()
	ctx := context.Background()
	topo := NewTables(t, db) // 3 shards
	s := statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	operator := statestore.New(db, topo.OrdersTable(), topo.StateTable(), 16)
	shard := func(id string, n int) string {
		h := fnv.New32a()
		h.Write([]byte(id))
		return fmt.Sprint(h.Sum32() % uint32(n))
	}
	id := ""
	for i := 0; id == ""; i++ { // an order whose shard of 16 is none of the 3
		if c := fmt.Sprintf("o-%d", i); shard(c, 16) != shard(c, topo.DeadlineShards) && len(shard(c, 16)) == 2 {
			id = c
		}
	}
	dueShard := func() string {
		t.Helper()
		v, _ := rawItem(t, db, topo.StateTable(), id, "TASK")[topology.KeyDueShard].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	submit(t, s, id, 2)
	mine := shard(id, topo.DeadlineShards)
	require.Equal(t, mine, dueShard(), "Submission's pick")
	st, err := claim(ctx, s, id, step0, "sched", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, id, step0, st.Attempt, "declined", t0)
	require.NoError(t, err)

	later := t0.Add(time.Hour)
	_, err = operator.Resubmit(ctx, id, "", time.Minute, later)
	require.NoError(t, err)
	require.Equal(t, mine, dueShard(), "resubmitted by an operator: in the shard Submission picked")
	task, _, err := operator.Load(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 2, task.Round)
	// A write of the operator's store decided on the whole order keeps it
	// there too: a cancel, which starts undoing what ran.
	st, err = claim(ctx, s, id, step0, "sched", later)
	require.NoError(t, err)
	_, err = recordAttempt(ctx, s, outcome.Attempt{OrderID: id, Ref: step0, Attempt: st.Attempt, Round: 2, Now: later})
	require.NoError(t, err)
	res, err := cancel(ctx, operator, cancelReq(id, later))
	require.NoError(t, err)
	require.Equal(t, workflow.Compensating, res.State, "step 0 ran: its undo is due")
	require.Equal(t, mine, dueShard(), "cancelled by an operator: in the shard Submission picked")
}

// LegacyShard checks on db that an order stored before its state item kept
// its shard (no Dsh), and out of the deadline index (it ended Failed, its
// alert sent: no DueShard either), resubmitted by an operator's store told
// more shards than the deployment has (sasctl's --deadline-shards left at
// its default 4, against a deployment of fewer), goes into shard 0, which
// every deployment sweeps, not into its shard of the operator's count: the
// deployment's sweep finds it when its step is due.
func LegacyShard(t *testing.T, db *dynamodb.Client) {
	t.Helper()
	ctx := context.Background()
	topo := NewTables(t, db) // 3 shards
	s := statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	operator := statestore.New(db, topo.OrdersTable(), topo.StateTable(), 16)
	id := ""
	for i := 0; id == ""; i++ { // an order whose shard of 16 is none of the 3
		c := fmt.Sprintf("o-%d", i)
		h := fnv.New32a()
		h.Write([]byte(c))
		if h.Sum32()%16 >= uint32(topo.DeadlineShards) {
			id = c
		}
	}
	submit(t, s, id, 2)
	st, err := claim(ctx, s, id, step0, "sched", t0)
	require.NoError(t, err)
	_, err = refuse(ctx, s, id, step0, st.Attempt, "declined", t0)
	require.NoError(t, err)
	require.NoError(t, s.MarkAlerted(ctx, id, step0, t0))
	// As stored before items kept their shard, and out of the index.
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(topo.StateTable()),
		Key:              map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: id}, topology.KeySort: &types.AttributeValueMemberS{Value: "TASK"}},
		UpdateExpression: aws.String("REMOVE Dsh, " + topology.KeyDueShard + ", " + topology.KeyDueAt)})
	require.NoError(t, err)
	raw := rawItem(t, db, topo.StateTable(), id, "TASK")
	require.NotContains(t, raw, "Dsh")
	require.NotContains(t, raw, topology.KeyDueShard)
	task, _, err := s.Load(ctx, id)
	require.NoError(t, err)
	require.Equal(t, workflow.Failed, task.State)

	later := t0.Add(time.Hour)
	_, err = operator.Resubmit(ctx, id, "", time.Minute, later)
	require.NoError(t, err)
	v, _ := rawItem(t, db, topo.StateTable(), id, "TASK")[topology.KeyDueShard].(*types.AttributeValueMemberS)
	require.NotNil(t, v, "resubmitted: in the index")
	require.Equal(t, "0", v.Value, "in shard 0, which every deployment sweeps, not in its shard of the operator's 16")
	due, err := Overdue(ctx, s, later.Add(2*time.Minute), 10)
	require.NoError(t, err)
	require.Len(t, due, 1, "the deployment's sweep finds its step when it is due")
	require.Equal(t, id, due[0].OrderID)
	require.Equal(t, step0, due[0].Ref)
}
