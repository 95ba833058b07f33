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
	lossy.loseThen(func() { anotherWrite(t, db, topo.StateTable(), other, "another-write") })
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
		if rec.Ref == step1 {
			require.Equal(t, 1, rec.Attempt, "the abandoned step was claimed once")
			require.Equal(t, workflow.Processing, rec.State)
		}
	}

	// The SDK's tries spent (one here): the store reads the item back
	// after a write whose outcome the error does not say.
	once := &losing{}
	single := dynamodb.New(db.Options(), func(o *dynamodb.Options) {
		once.next = o.HTTPClient
		o.HTTPClient = once
		o.RetryMaxAttempts = 1
	})
	s1 := statestore.New(single, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	third := "o-lost-3"
	once.lose(1)
	created, err = s1.Submit(ctx, statestore.Submission{OrderID: third, Order: `{"orderId":"o-lost-3"}`, Workflow: d, Now: t0})
	require.NoError(t, err, "a submission whose answer was lost, no try again: read back")
	require.True(t, created, "the submission itself, not a duplicate: its received is posted")
	require.Equal(t, 1, once.lost())
	created, err = s1.Submit(ctx, statestore.Submission{OrderID: third, Order: `{"orderId":"o-lost-3"}`, Workflow: d, Now: t0})
	require.NoError(t, err)
	require.False(t, created, "the same order sent again: a duplicate")
	once.lose(1)
	c3, err := claim(ctx, s1, third, step0, "agent-1", t0)
	require.NoError(t, err, "a claim whose answer was lost, no try again, is the claim (read back)")
	require.Equal(t, 2, once.lost())
	require.Equal(t, 1, c3.Attempt)
	once.lose(1)
	r3 := finish(t, s1, d, c3, "", t0.Add(time.Second))
	require.Equal(t, 3, once.lost())
	require.Equal(t, []workflow.Ref{step1}, r3.Ready, "a completion whose answer was lost, no try again: the completion")
	once.loseThen(func() { anotherWrite(t, db, topo.StateTable(), third, "another-write-2") }) // before the read back
	c4, err := claim(ctx, s1, third, step1, "agent-1", t0.Add(2*time.Second))
	require.NoError(t, err, "a claim whose answer was lost, no try again, another write since: the claim, by its record")
	require.Equal(t, 4, once.lost())
	require.Equal(t, workflow.Processing, c4.State)
	require.Equal(t, 1, c4.Attempt)
}

// anotherWrite lands another writer's write on order id's state item (its
// write id then id's).
func anotherWrite(t *testing.T, db *dynamodb.Client, table, order, id string) {
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: order},
			topology.KeySort: &types.AttributeValueMemberS{Value: "TASK"}},
		UpdateExpression:          aws.String("SET " + statestore.WriteIDAttribute + " = :w"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":w": &types.AttributeValueMemberS{Value: id}}})
	require.NoError(t, err)
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
