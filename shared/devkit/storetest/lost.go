package storetest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// LostAnswers runs on db the writes Submission, an Agent and the Scheduler
// make, each applied by the engine but its answer lost on the way back (a
// connection cut while the answer was read: the SDK sends the request
// again, and its condition then fails on the write's own outcome). Each
// must still be the write: a submission taken as a duplicate would start
// nothing, a claim that refused itself would leave its step to the
// Supervisor's recovery, a completion taken as stale would never send its
// reply. (Seen on DynamoDB Local on a loaded machine: "deserialization
// failed, read tcp …: use of closed network connection", then a claim of a
// ready record refused.)
func LostAnswers(t *testing.T, db *dynamodb.Client) {
	lossy := &losing{}
	client := dynamodb.New(db.Options(), func(o *dynamodb.Options) {
		lossy.next = o.HTTPClient
		o.HTTPClient = lossy
	})
	topo := NewTables(t, db)
	s := statestore.New(client, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	ctx := context.Background()
	d := def(3)
	require.NoError(t, s.PutDefinition(ctx, d))
	lossy.lose(1)
	created, err := s.Submit(ctx, statestore.Submission{OrderID: "o-lost", Order: `{"orderId":"o-lost"}`, Workflow: d, Now: t0})
	require.NoError(t, err)
	require.Equal(t, 1, lossy.lost(), "the submission's answer was lost")
	require.True(t, created, "a submission whose answer was lost is the submission (its transaction's token)")

	lossy.lose(1)
	st, err := claim(ctx, s, "o-lost", step0, "agent-1", t0)
	require.NoError(t, err, "a claim whose answer was lost is the claim")
	require.Equal(t, 2, lossy.lost(), "the claim's answer was lost")
	require.Equal(t, workflow.Processing, st.State)
	require.Equal(t, 1, st.Attempt, "claimed once")

	// A claim whose answer was lost, another write of the order landing
	// before the SDK's try again (the item's write id is then another's):
	// its record says it is the claim's own (a CI run's claim of the
	// largest order, items claimed at once, was refused by itself so).
	other := "o-lost-2"
	_, err = s.Submit(ctx, statestore.Submission{OrderID: other, Order: `{"orderId":"o-lost-2"}`, Workflow: d, Now: t0})
	require.NoError(t, err)
	lossy.loseThen(func() {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(topo.StateTable()),
			Key: map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: other},
				topology.KeySort: &types.AttributeValueMemberS{Value: "TASK"}},
			UpdateExpression:          aws.String("SET " + statestore.WriteIDAttribute + " = :w"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":w": &types.AttributeValueMemberS{Value: "another-write"}}})
		require.NoError(t, err)
	})
	again, err := claim(ctx, s, other, step0, "agent-1", t0)
	require.NoError(t, err, "a claim whose answer was lost, another write since, is the claim")
	require.Equal(t, 3, lossy.lost())
	require.Equal(t, workflow.Processing, again.State)
	require.Equal(t, 1, again.Attempt, "claimed once")
	// The same request delivered twice, claimed by the same instance in
	// the same millisecond: the second is no answer of the first's, lost.
	_, err = claim(ctx, s, other, step0, "agent-1", t0)
	require.ErrorIs(t, err, statestore.ErrNotClaimable, "a second claim, though by the same owner at the same time")

	lossy.lose(1)
	require.NoError(t, s.Accept(ctx, st, t0.Add(time.Second)), "an acceptance whose answer was lost")
	require.Equal(t, 4, lossy.lost())

	lossy.lose(1)
	r := finish(t, s, d, st, "", t0.Add(2*time.Second)) // fails the test if taken as stale
	require.Equal(t, 5, lossy.lost())
	require.Equal(t, []workflow.Ref{step1}, r.Ready, "the completion's next step, made ready once")

	next, err := claim(ctx, s, "o-lost", step1, "agent-1", t0.Add(3*time.Second))
	require.NoError(t, err)
	lossy.lose(1)
	require.NoError(t, s.Abandon(ctx, next, "no answer", t0.Add(4*time.Second)), "an abandon whose answer was lost")
	require.Equal(t, 6, lossy.lost())
	_, recs, err := s.Load(ctx, "o-lost")
	require.NoError(t, err)
	for _, rec := range recs {
		if rec.Ref() == step1 {
			require.Equal(t, 1, rec.Attempt, "the abandoned step was claimed once")
			require.Equal(t, workflow.Processing, rec.State)
		}
	}
}

// losing is an HTTP client that, when armed, loses the answers of writes
// (UpdateItem, PutItem, TransactWriteItems) the engine applied.
type losing struct {
	next        dynamodb.HTTPClient
	mu          sync.Mutex
	armed, gone int
	then        func() // run once after the next answer lost
}

func (l *losing) lose(n int) { l.mu.Lock(); l.armed += n; l.mu.Unlock() }

// loseThen loses the next write's answer, and runs then before the SDK
// tries the write again (another writer's write landing in between).
func (l *losing) loseThen(then func()) {
	l.mu.Lock()
	l.armed++
	l.then = then
	l.mu.Unlock()
}

func (l *losing) lost() int { l.mu.Lock(); defer l.mu.Unlock(); return l.gone }

// Do implements dynamodb.HTTPClient.
func (l *losing) Do(r *http.Request) (*http.Response, error) {
	resp, err := l.next.Do(r)
	target := r.Header.Get("X-Amz-Target")
	if err != nil || resp.StatusCode != http.StatusOK ||
		!(strings.HasSuffix(target, ".UpdateItem") || strings.HasSuffix(target, ".PutItem") ||
			strings.HasSuffix(target, ".TransactWriteItems")) {
		return resp, err
	}
	l.mu.Lock()
	lose := l.armed > 0
	if lose {
		l.armed--
		l.gone++
	}
	then := l.then
	if lose {
		l.then = nil
	}
	l.mu.Unlock()
	if !lose {
		return resp, nil
	}
	_ = resp.Body.Close()
	if then != nil {
		then()
	}
	return nil, syscall.ECONNRESET
}
