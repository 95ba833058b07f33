package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The documented limits, each run at the limit on the engine: the largest
// order (400 records, a forEach step's 100 items made ready by one write and
// finishing at once, the next one's 99; the largest results: the largest
// answer, and an answer for each of the 100 items), the longest line (50
// steps, undone from its last). Every write's expressions are measured: none
// may pass DynamoDB's 4 KB, nor the item its 400 KB.

// Limits runs the limit cases on db (each on fresh tables).
func Limits(t *testing.T, db *dynamodb.Client) {
	for name, fn := range map[string]func(*testing.T, *statestore.Store, *measured){
		"TheLargestOrderRunsAndIsUndone":                  largestOrder,
		"TheLongestLineIsUndoneFromItsEnd":                longestLine,
		"TheLargestOrderStaysSmallWhateverItsServicesSay": staysSmall,
		"ASweepGivesBackAndGivesUpOnAHundredItems":        sweepsAHundredItems,
		"ACancelGivesBackAHundredAcceptedAsyncItems":      cancelsAHundredAccepted,
		"AHeldOrderGoesOnWithAHundredItemsReady":          heldGoesOnWithAHundredReady,
		"TwoStepsOfAHundredItemsAreMadeReadyAtOnce":       twoHundredReadyAtOnce,
		"TheLargestDefinitionIsKeptWhole":                 largestDefinition,
		"EveryKindOfWriteFitsAtTheLimits":                 everyKind,
	} {
		t.Run(name, func(t *testing.T) {
			// One case at a time on an engine: on a saturated 2-core
			// machine the cases at once are no faster. (The claims refused
			// now and then on DynamoDB Local were its answers lost and the
			// SDK's tries again: see LostAnswers; the SDK's tries are
			// logged if a case fails.)
			m := &measured{Client: db}
			topo := NewTables(t, db)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("attempts the SDK tried again: %q", m.tries)
				}
			})
			fn(t, statestore.New(m, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards), m)
		})
	}
}

// measured is the DynamoDB client, noting the largest expressions written.
type measured struct {
	*dynamodb.Client
	mu               sync.Mutex
	update, cond     int
	updates, refused int
	tries            []string // attempts the SDK retried, and why
	kind             string   // the kind of the writes now made (as)
	kinds            map[string]*kindSize
	order            []string // the kinds, in the order first made
}

// retried notes each attempt of a request that failed for another reason
// than its condition: the SDK tries it again.
func (m *measured) retried(st *middleware.Stack) error {
	return st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("storetest-retried",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			if err != nil && !isCCF(err) {
				m.mu.Lock()
				m.tries = append(m.tries, err.Error())
				m.mu.Unlock()
			}
			return out, md, err
		}), "Retry", middleware.After)
}

func (m *measured) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	m.mu.Lock()
	m.update = max(m.update, len(aws.ToString(in.UpdateExpression)))
	m.cond = max(m.cond, len(aws.ToString(in.ConditionExpression)))
	m.updates++
	m.note(len(aws.ToString(in.UpdateExpression)), len(aws.ToString(in.ConditionExpression)), 0)
	m.mu.Unlock()
	out, err := m.Client.UpdateItem(ctx, in, append(opts, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, m.retried)
	})...)
	if isCCF(err) {
		m.mu.Lock()
		m.refused++
		m.mu.Unlock()
	}
	return out, err
}

func (m *measured) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	m.mu.Lock()
	m.cond = max(m.cond, len(aws.ToString(in.ConditionExpression)))
	m.note(0, len(aws.ToString(in.ConditionExpression)), statestore.ItemSize(in.Item))
	m.mu.Unlock()
	return m.Client.PutItem(ctx, in, opts...)
}

func (m *measured) report(t *testing.T, what string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t.Logf("%s: %d updates (%d refused, decided again), largest update expression %d bytes, condition %d (at most %d)",
		what, m.updates, m.refused, m.update, m.cond, statestore.MaxExpressionBytes)
	require.LessOrEqual(t, m.update, statestore.MaxExpressionBytes)
	require.LessOrEqual(t, m.cond, statestore.MaxExpressionBytes)
}

// largest is a workflow of 400 records: a step, then a step per item (100
// items), then a step per item of a second array (99 items), each with an
// undo action, its steps' answers kept up to the largest limit.
func largest() (workflow.Definition, map[int]int, string) {
	d := def(3)
	d.Name = "largest"
	d.ResultLimit = payload.MaxInline
	d.Steps[2].Undo = &workflow.Action{Name: "undo-s2", Agent: "svc", Timeout: 10 * time.Second, MaxFailures: 3}
	d.Steps[1].ForEach, d.Steps[2].ForEach = "lines", "parcels"
	items := map[int]int{1: workflow.MaxForEachItems, 2: workflow.MaxForEachItems - 1}
	order := fmt.Sprintf(`{"orderId":"o-big","lines":[%s],"parcels":[%s]}`, strings.TrimSuffix(strings.Repeat("1,", items[1]), ","),
		strings.TrimSuffix(strings.Repeat("2,", items[2]), ","))
	return d, items, order
}

func largestOrder(t *testing.T, s *statestore.Store, m *measured) {
	ctx := context.Background()
	d, items, order := largest()
	got, err := d.Items(json.RawMessage(order))
	require.NoError(t, err)
	require.Equal(t, items, got)
	_, err = s.Submit(ctx, statestore.Submission{OrderID: "o-big", Order: order, Workflow: d, Items: items, Now: t0})
	require.NoError(t, err)
	_, recs, err := s.Load(ctx, "o-big")
	require.NoError(t, err)
	require.Len(t, recs, workflow.MaxRecords)

	answer := func(n int, k int) json.RawMessage { // n bytes of JSON, different per record
		return json.RawMessage(fmt.Sprintf(`{"k":%d,"pad":"%s"}`, k, strings.Repeat("x", n-len(fmt.Sprintf(`{"k":%d,"pad":""}`, k)))))
	}
	record := func(st statestore.Step, result json.RawMessage, at time.Time) outcome.Recorded {
		require.NoError(t, s.PutResult(ctx, statestore.Result{OrderID: "o-big", Ref: st.Ref, Name: st.Name, Round: 1,
			Attempt: st.Attempt, JSON: result, Now: at}))
		r, err := outcome.Recorder{Store: s}.Record(ctx, d, outcome.Attempt{OrderID: "o-big", Ref: st.Ref, Attempt: st.Attempt,
			Round: 1, ResultBytes: len(result), Read: st.Read, Now: at})
		require.NoError(t, err)
		require.False(t, r.Stale, "%s recorded", st.Key())
		return r
	}
	// Each item answers at the default result limit as its Agent keeps it:
	// inline up to the largest inline limit (over it, a claim check).
	itemAnswer := min(workflow.DefaultResultLimit, payload.MaxInline)
	rec := record(claimedAs(t, s, "o-big", workflow.Ref{Index: 0}, t0), answer(payload.MaxInline, 0), t0)
	require.Len(t, rec.Ready, items[1], "one write makes the hundred items ready")
	var ready []workflow.Ref
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k := 1; k <= items[1]; k++ { // every item claimed, then all finishing at once
		st := claimedAs(t, s, "o-big", workflow.Ref{Index: 1, Item: k}, t0)
		wg.Go(func() {
			r := record(st, answer(itemAnswer, k), t0.Add(time.Second))
			mu.Lock()
			ready = append(ready, r.Ready...)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, ready, items[2], "the last item made the next step's 99 items ready, once")
	// The largest answer is read back whole, and every item's, in item order.
	first := claimedAs(t, s, "o-big", workflow.Ref{Index: 2, Item: 1}, t0)
	doc, err := document(ctx, s, nil, first, json.RawMessage(order))
	require.NoError(t, err)
	require.JSONEq(t, string(answer(payload.MaxInline, 0)), string(doc.Results["s0"]), "the largest answer, read back whole")
	var lines []json.RawMessage
	require.NoError(t, json.Unmarshal(doc.Results["s1"], &lines))
	require.Len(t, lines, items[1], "every item's answer, in item order")
	require.JSONEq(t, string(answer(itemAnswer, 37)), string(lines[36]))
	// The first parcel refused: the other 98 are stopped, and everything
	// done is undone, the latest first, one undo at a time.
	r := finish(t, s, d, first, "no courier", t0.Add(3*time.Second))
	undone := 0
	for len(r.Ready) == 1 {
		r = finish(t, s, d, claimedAs(t, s, "o-big", r.Ready[0], t0), "", t0.Add(4*time.Second))
		undone++
	}
	require.Equal(t, workflow.Failed, r.State)
	require.Equal(t, 1+items[1], undone, "every record that took effect is undone, one at a time")
	size, err := s.ItemBytes(ctx, "o-big")
	require.NoError(t, err)
	t.Logf("the largest order's state item at its end: %d bytes (%d records)", size, workflow.MaxRecords)
	require.Less(t, size, 400*1024/3, "a third of DynamoDB's 400 KB at most")
	m.report(t, "the largest order")
}

// claimedAs claims r of order id for its agent, "svc".
func claimedAs(t *testing.T, s *statestore.Store, id string, r workflow.Ref, at time.Time) statestore.Step {
	t.Helper()
	st, err := claim(context.Background(), s, id, r, "agent-1", at)
	require.NoError(t, err)
	return st
}

// finish records the outcome of claimed attempt st of an order of d (refusal
// "" for done) as its Agent does, deciding first on what its claim read.
func finish(t *testing.T, s *statestore.Store, d workflow.Definition, st statestore.Step, refusal string, at time.Time) outcome.Recorded {
	t.Helper()
	r, err := outcome.Recorder{Store: s}.Record(context.Background(), d, outcome.Attempt{OrderID: st.OrderID, Ref: st.Ref,
		Attempt: st.Attempt, Round: st.Round, Refusal: refusal, Read: st.Read, Now: at})
	require.NoError(t, err)
	require.False(t, r.Stale, "%s recorded", st.Key())
	return r
}

// staysSmall: every service of the largest order answers each failure with
// a page of 8 KB, whose first hundred bytes are not UTF-8 (DynamoDB keeps
// each as U+FFFD, three bytes: a text weighed before that was kept up to
// three times its bound). Each of the forEach step's 100 items is refused
// with the page (a tenth of them recovered by the Supervisor first); the
// first undo action is refused with it too. Every text kept is cut, as it
// is kept, and the state item stays under 100 KB.
func staysSmall(t *testing.T, s *statestore.Store, m *measured) {
	ctx := context.Background()
	d, items, order := largest()
	_, err := s.Submit(ctx, statestore.Submission{OrderID: "o-big", Order: order, Workflow: d, Items: items, Now: t0})
	require.NoError(t, err)
	page := strings.Repeat("\xff", 100) + strings.Repeat("é", 4096) // 8 KB, of two-byte characters: cut on a character's boundary
	rec := finish(t, s, d, claimedAs(t, s, "o-big", workflow.Ref{Index: 0}, t0), "", t0)
	require.Len(t, rec.Ready, items[1])
	var again []statestore.Step
	for k := 1; k <= items[1]; k++ {
		st := claimedAs(t, s, "o-big", workflow.Ref{Index: 1, Item: k}, t0)
		if k%10 == 0 { // a tenth recovered first, with an incident (each write of this item is slow on moto)
			require.NoError(t, giveBack(ctx, s, st, 1, "attempt 1 (agent-1) not completed by its CompleteBy: "+page,
				t0.Add(time.Second), t0.Add(time.Minute), t0.Add(time.Second)))
			st = claimedAs(t, s, "o-big", workflow.Ref{Index: 1, Item: k}, t0.Add(time.Second))
		}
		again = append(again, st)
	}
	var ready []workflow.Ref
	for _, st := range again { // one after another: the races are the other tests'
		ready = append(ready, finish(t, s, d, st, page, t0.Add(2*time.Second)).Ready...)
	}
	// The items retried may have taken effect: the undoing starts with the
	// latest one's undo action, once.
	require.Len(t, ready, 1)
	require.True(t, ready[0].Undo, "every item refused; an undo runs")
	r := finish(t, s, d, claimedAs(t, s, "o-big", ready[0], t0), page, t0.Add(3*time.Second))
	require.Equal(t, workflow.CompensationFailed, r.State)

	task, recs, err := s.Load(ctx, "o-big")
	require.NoError(t, err)
	require.LessOrEqual(t, len(task.LastError), statestore.MaxErrorBytes)
	require.True(t, utf8.ValidString(task.LastError) && strings.HasSuffix(task.LastError, "é…"), "cut on a character: %q", task.LastError[len(task.LastError)-8:])
	failed := 0
	for _, st := range recs {
		require.LessOrEqual(t, len(st.LastError), statestore.MaxRecordErrorBytes, st.Key())
		require.True(t, utf8.ValidString(st.LastError), st.Key())
		for _, e := range st.Incidents {
			require.LessOrEqual(t, len(e.What), statestore.MaxIncidentBytes+64, st.Key())
		}
		if st.State == workflow.Error {
			failed++
		}
	}
	require.Equal(t, items[1]+1, failed, "every item, and the undo")
	size, err := s.ItemBytes(ctx, "o-big")
	require.NoError(t, err)
	t.Logf("the largest order's state item, every failure answered with 8 KB: %d bytes", size)
	require.Less(t, size, 100*1024)
	m.report(t, "the largest order, refused")
}

func longestLine(t *testing.T, s *statestore.Store, m *measured) {
	ctx := context.Background()
	d := def(workflow.MaxSteps)
	d.Steps[workflow.MaxSteps-1].Undo = &workflow.Action{Name: "undo-last", Agent: "svc", Timeout: 10 * time.Second, MaxFailures: 3}
	_, err := s.Submit(ctx, statestore.Submission{OrderID: "o-long", Order: `{"orderId":"o-long"}`, Workflow: d, Now: t0})
	require.NoError(t, err)
	for i := range workflow.MaxSteps - 1 {
		finish(t, s, d, claimedAs(t, s, "o-long", workflow.Ref{Index: i}, t0), "", t0.Add(time.Duration(i)*time.Millisecond))
	}
	r := finish(t, s, d, claimedAs(t, s, "o-long", workflow.Ref{Index: workflow.MaxSteps - 1}, t0), "no", t0.Add(time.Second))
	for i := workflow.MaxSteps - 2; i >= 0; i-- {
		require.Equal(t, []workflow.Ref{{Index: i, Undo: true}}, r.Ready, "undone from the latest back")
		r = finish(t, s, d, claimedAs(t, s, "o-long", r.Ready[0], t0), "", t0.Add(2*time.Second))
	}
	require.Equal(t, workflow.Failed, r.State)
	m.report(t, "the longest line")
}
