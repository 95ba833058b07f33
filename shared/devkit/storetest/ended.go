package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// allEnded pages Ended by pages of size, failing on a repeat or an order
// not in state.
func allEnded(t *testing.T, s *statestore.Store, state workflow.State, after, before time.Time, size int) []string {
	t.Helper()
	var all []string
	token := ""
	for {
		tasks, next, err := s.Ended(context.Background(), state, after, before, size, token)
		require.NoError(t, err)
		require.LessOrEqual(t, len(tasks), size)
		for _, task := range tasks {
			require.NotContains(t, all, task.OrderID, "listed twice")
			require.Equal(t, state, task.State)
			all = append(all, task.OrderID)
		}
		if next == "" {
			return all
		}
		token = next
	}
}

// endedOrders ends orders in each way: refused-n (Failed at t0+n s, n of
// 1..4), cancelled (Cancelled at t0+5s), done (Processed), resubmitted
// (Failed, then at work again) and at-work (never ended).
func endedOrders(t *testing.T, s *statestore.Store) {
	t.Helper()
	ctx := context.Background()
	for n := 1; n <= 4; n++ {
		id := fmt.Sprintf("refused-%d", n)
		submitAs(t, s, id, 2)
		failAt(t, s, id, t0.Add(time.Duration(n)*time.Second))
	}
	submitAs(t, s, "cancelled", 2)
	_, err := cancel(ctx, s, cancelReq("cancelled", t0.Add(5*time.Second)))
	require.NoError(t, err)
	submitAs(t, s, "done", 1)
	run(t, s, "done", step0, t0)
	submitAs(t, s, "resubmitted", 2)
	failAt(t, s, "resubmitted", t0.Add(time.Second))
	_, err = s.Resubmit(ctx, "resubmitted", "", time.Minute, t0.Add(6*time.Second))
	require.NoError(t, err)
	submitAs(t, s, "at-work", 2)
}

// failAt has step 0 of order id refused at now: the order ends Failed.
func failAt(t *testing.T, s *statestore.Store, id string, now time.Time) {
	t.Helper()
	st, err := claim(context.Background(), s, id, step0, "sched", now)
	require.NoError(t, err)
	rec, err := refuse(context.Background(), s, id, step0, st.Attempt, "no courier today", now)
	require.NoError(t, err)
	require.Equal(t, workflow.Failed, rec.State)
}

func anEndedOrderIsFoundByTheEndIndex(t *testing.T, db *dynamodb.Client) {
	ctx := context.Background()
	topo := NewTables(t, db)
	s := statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	endedOrders(t, s)
	every := []string{"refused-1", "refused-2", "refused-3", "refused-4"}
	for _, size := range []int{1, 3, 100} {
		require.ElementsMatch(t, every, allEnded(t, s, workflow.Failed, time.Time{}, time.Time{}, size), "pages of %d", size)
	}
	at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	require.ElementsMatch(t, every[1:], allEnded(t, s, workflow.Failed, at(2), time.Time{}, 2), "from its end on, the bound included")
	require.ElementsMatch(t, every[:3], allEnded(t, s, workflow.Failed, time.Time{}, at(3), 2), "up to its end")
	require.ElementsMatch(t, every[1:3], allEnded(t, s, workflow.Failed, at(2), at(3), 1), "between")
	require.Empty(t, allEnded(t, s, workflow.Failed, at(5), time.Time{}, 10))
	require.Equal(t, []string{"cancelled"}, allEnded(t, s, workflow.Cancelled, time.Time{}, time.Time{}, 10))
	require.Empty(t, allEnded(t, s, workflow.CompensationFailed, time.Time{}, time.Time{}, 10))

	_, _, err := s.Ended(ctx, workflow.Processed, time.Time{}, time.Time{}, 10, "")
	require.Error(t, err, "the happy path is not indexed")
	_, _, err = s.Ended(ctx, workflow.Failed, time.Time{}, time.Time{}, 10, "garbage!")
	require.ErrorIs(t, err, statestore.ErrBadPageToken)
	for id, indexed := range map[string]bool{"refused-1": true, "cancelled": true, "done": false, "resubmitted": false, "at-work": false} {
		_, ok := rawItem(t, db, topo.StateTable(), id, "TASK")[topology.KeyEndShard]
		require.Equal(t, indexed, ok, "%s's end index key", id)
	}
}

// aTableOfAnEarlierReleaseGetsTheEndIndex: a state table made before the
// end index (a run directory's, kept by sasctl dev) gets it when the tables
// are ensured, and an order that ends after is found by it.
func aTableOfAnEarlierReleaseGetsTheEndIndex(t *testing.T, db *dynamodb.Client) {
	ctx := context.Background()
	topo := topology.Default(fmt.Sprintf("old%x-%d", rand.Uint32(), tableSeq.Add(1)), "svc")
	topo.DeadlineShards = 3
	old := provision.StateTableInput(topo)
	old.GlobalSecondaryIndexes = old.GlobalSecondaryIndexes[:1] // the deadline index only
	old.AttributeDefinitions = old.AttributeDefinitions[:4]
	_, err := db.CreateTable(ctx, old)
	require.NoError(t, err)
	require.NoError(t, provision.EnsureTables(ctx, db, topo))
	require.NoError(t, provision.EnsureTables(ctx, db, topo), "again: nothing to add")
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(topo.StateTable())})
	require.NoError(t, err)
	require.Len(t, out.Table.GlobalSecondaryIndexes, 2)

	s := statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	submitAs(t, s, "refused-later", 2)
	failAt(t, s, "refused-later", t0.Add(time.Second))
	require.Equal(t, []string{"refused-later"}, allEnded(t, s, workflow.Failed, time.Time{}, time.Time{}, 10))
}
