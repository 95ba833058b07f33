package storetest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	x "github.com/sas-go/sas/shared/dynamoexpr"
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
	topo := NewTables(t, db)
	require.NoError(t, statestore.New(db, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards).PutDefinition(
		context.Background(), def(3)))
	for _, c := range []struct {
		name string
		run  func(*testing.T, lostAnswers)
	}{
		{"ASubmissionIsTheSubmission", aLostSubmission},
		{"AClaimIsTheClaim", aLostClaim},
		{"AClaimWithAnotherWriteSinceIsTheClaim", aLostClaimWithAnotherWriteSince},
		{"AnAcceptanceACompletionAndAnAbandonAreTheWrites", lostOutcomes},
		{"WithNoTryAgainTheItemIsReadBack", lostWithNoTryAgain},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, newLostAnswers(t, db, topo)) })
	}
}

// lostAnswers is where a case of LostAnswers runs: a store whose client
// loses the answers of the writes it is told to (lossy), the SDK trying
// each again (with tries: 1, it does not).
type lostAnswers struct {
	db    *dynamodb.Client
	topo  topology.Topology
	s     *statestore.Store
	lossy *losing
	d     workflow.Definition
}

func newLostAnswers(t *testing.T, db *dynamodb.Client, topo topology.Topology, tries ...int) lostAnswers {
	t.Helper()
	lossy := &losing{}
	client := dynamodb.New(db.Options(), func(o *dynamodb.Options) {
		lossy.next = o.HTTPClient
		o.HTTPClient = lossy
		if len(tries) > 0 {
			o.RetryMaxAttempts = tries[0]
		}
	})
	return lostAnswers{db: db, topo: topo, s: statestore.New(client, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards),
		lossy: lossy, d: def(3)}
}

// submit submits order id, its answer lost if lost: whether it was
// created.
func (l lostAnswers) submit(t *testing.T, id string, lost bool) bool {
	t.Helper()
	if lost {
		l.lossy.lose(1)
	}
	created, err := l.s.Submit(context.Background(), statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`,
		Workflow: l.d, Now: t0})
	require.NoError(t, err, "a submission whose answer was lost is the submission")
	return created
}

// aLostSubmission: a submission whose answer was lost is the submission
// (its transaction's token), not a duplicate.
func aLostSubmission(t *testing.T, l lostAnswers) {
	require.True(t, l.submit(t, "o-lost", true), "a submission whose answer was lost is the submission")
	require.Equal(t, 1, l.lossy.lost(), "the submission's answer was lost")
}

// aLostClaim: a claim whose answer was lost is the claim, made once.
func aLostClaim(t *testing.T, l lostAnswers) {
	l.submit(t, "o-lost-1", false)
	l.lossy.lose(1)
	st, err := claim(context.Background(), l.s, "o-lost-1", step0, "agent-1", t0)
	require.NoError(t, err, "a claim whose answer was lost is the claim")
	require.Equal(t, 1, l.lossy.lost(), "the claim's answer was lost")
	require.Equal(t, workflow.Processing, st.State)
	require.Equal(t, 1, st.Attempt, "claimed once")
}

// aLostClaimWithAnotherWriteSince: a claim whose answer was lost, another
// write of the order landing before the SDK's try again (the item's write
// id is then another's): its record says it is the claim's own (a CI run's
// claim of the largest order, items claimed at once, was refused by itself
// so). The same request delivered twice, claimed by the same instance in
// the same millisecond, is no answer of the first's, lost.
func aLostClaimWithAnotherWriteSince(t *testing.T, l lostAnswers) {
	ctx := context.Background()
	l.submit(t, "o-lost-2", false)
	l.lossy.loseThen(func() { anotherWrite(t, l.db, l.topo.StateTable(), "o-lost-2", "another-write") })
	again, err := claim(ctx, l.s, "o-lost-2", step0, "agent-1", t0)
	require.NoError(t, err, "a claim whose answer was lost, another write since, is the claim")
	require.Equal(t, 1, l.lossy.lost())
	require.Equal(t, workflow.Processing, again.State)
	require.Equal(t, 1, again.Attempt, "claimed once")
	_, err = claim(ctx, l.s, "o-lost-2", step0, "agent-1", t0)
	require.ErrorIs(t, err, statestore.ErrNotClaimable, "a second claim, though by the same owner at the same time")
}

// lostOutcomes: an acceptance, a completion (its next step made ready
// once) and an abandon, each of whose answer was lost, are the writes.
func lostOutcomes(t *testing.T, l lostAnswers) {
	ctx := context.Background()
	l.submit(t, "o-lost-4", false)
	st, err := claim(ctx, l.s, "o-lost-4", step0, "agent-1", t0)
	require.NoError(t, err)
	l.lossy.lose(1)
	require.NoError(t, l.s.Accept(ctx, st, t0.Add(time.Second)), "an acceptance whose answer was lost")
	require.Equal(t, 1, l.lossy.lost())
	l.lossy.lose(1)
	r := finish(t, l.s, l.d, st, "", t0.Add(2*time.Second)) // fails the test if taken as stale
	require.Equal(t, 2, l.lossy.lost())
	require.Equal(t, []workflow.Ref{step1}, r.Ready, "the completion's next step, made ready once")
	next, err := claim(ctx, l.s, "o-lost-4", step1, "agent-1", t0.Add(3*time.Second))
	require.NoError(t, err)
	l.lossy.lose(1)
	require.NoError(t, l.s.Abandon(ctx, next, "no answer", t0.Add(4*time.Second)), "an abandon whose answer was lost")
	require.Equal(t, 3, l.lossy.lost())
	_, recs, err := l.s.Load(ctx, "o-lost-4")
	require.NoError(t, err)
	for _, rec := range recs {
		if rec.Ref == step1 {
			require.Equal(t, 1, rec.Attempt, "the abandoned step was claimed once")
			require.Equal(t, workflow.Processing, rec.State)
		}
	}
}

// lostWithNoTryAgain: the SDK's tries spent (one here), the store reads
// the item back after a write whose outcome the error does not say: a
// submission (then a duplicate), a claim, a completion, and a claim with
// another write since are each the write.
func lostWithNoTryAgain(t *testing.T, l lostAnswers) {
	ctx := context.Background()
	l = newLostAnswers(t, l.db, l.topo, 1)
	const id = "o-lost-3"
	require.True(t, l.submit(t, id, true), "the submission itself, not a duplicate: its received is posted")
	require.Equal(t, 1, l.lossy.lost())
	require.False(t, l.submit(t, id, false), "the same order sent again: a duplicate")
	l.lossy.lose(1)
	c3, err := claim(ctx, l.s, id, step0, "agent-1", t0)
	require.NoError(t, err, "a claim whose answer was lost, no try again, is the claim (read back)")
	require.Equal(t, 2, l.lossy.lost())
	require.Equal(t, 1, c3.Attempt)
	l.lossy.lose(1)
	r3 := finish(t, l.s, l.d, c3, "", t0.Add(time.Second))
	require.Equal(t, 3, l.lossy.lost())
	require.Equal(t, []workflow.Ref{step1}, r3.Ready, "a completion whose answer was lost, no try again: the completion")
	l.lossy.loseThen(func() { anotherWrite(t, l.db, l.topo.StateTable(), id, "another-write-2") }) // before the read back
	c4, err := claim(ctx, l.s, id, step1, "agent-1", t0.Add(2*time.Second))
	require.NoError(t, err, "a claim whose answer was lost, no try again, another write since: the claim, by its record")
	require.Equal(t, 4, l.lossy.lost())
	require.Equal(t, workflow.Processing, c4.State)
	require.Equal(t, 1, c4.Attempt)
}

// anotherWrite lands another writer's write on order id's state item (its
// write id then id's).
func anotherWrite(t *testing.T, db *dynamodb.Client, table, order, id string) {
	b := x.New()
	b.Set(b.Plain(statestore.WriteIDAttribute), b.String(id))
	in, err := b.UpdateInput(table, map[string]types.AttributeValue{topology.KeyOrderID: &types.AttributeValueMemberS{Value: order},
		topology.KeySort: &types.AttributeValueMemberS{Value: "TASK"}})
	require.NoError(t, err)
	_, err = db.UpdateItem(context.Background(), in)
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
