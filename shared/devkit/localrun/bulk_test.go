package localrun_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/workflow"
)

// heldOrders is a pipeline running the order workflow whose payment holds
// an order on failure, with n orders (prefix-0000…) held because the bank
// refused every charge; the bank then answers again.
func heldOrders(t *testing.T, prefix string, n int, tweak func(*localrun.Options)) (*env, []string) {
	t.Helper()
	text, err := workflow.ExampleFile(workflow.OrderWorkflow)
	require.NoError(t, err)
	held := strings.Replace(string(text), "  - name: charge-payment\n    agent: payment\n",
		"  - name: charge-payment\n    agent: payment\n    onFailure: hold\n    holdFor: 24h\n", 1)
	require.NotEqual(t, string(text), held)
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		running(t, held)(o)
		patient(o)
		if tweak != nil {
			tweak(o)
		}
	})
	e.sim.SetFaults("payment", remotesim.Faults{PermanentRate: 1}) // the bank refuses every charge
	ids := make([]string, n)
	bodies := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%04d", prefix, i)
		bodies[i] = localrun.DemoOrder(ids[i], i).JSON()
	}
	ctx := context.Background()
	require.NoError(t, e.stack.SendOrders(ctx, bodies...))
	e.eventually(fmt.Sprintf("%d orders held", n), time.Minute+time.Duration(n)*100*time.Millisecond, func() bool {
		tasks, err := e.stack.Store.Tasks(ctx, ids)
		if err != nil || len(tasks) < n {
			return false
		}
		for _, task := range tasks {
			if task.State != workflow.Held {
				return false
			}
		}
		return true
	})
	e.sim.SetFaults("payment", remotesim.Faults{}) // the bank answers again
	return e, ids
}

// usage is what the operator's requests of the meter cost, by service and
// operation.
func usage(m *accounting.Meter) map[string]accounting.Usage {
	out := map[string]accounting.Usage{}
	for k, u := range m.Snapshot() {
		if k.Function == "operator" {
			out[k.Service] = out[k.Service].Add(u)
			out[k.Service+" "+k.Operation] = out[k.Service+" "+k.Operation].Add(u)
		}
	}
	return out
}

// Orders held because a bank refused their charges are retried by a query
// once it answers again: a dry run lists them all and writes nothing; the
// retry takes each one once (one decision each), its history names the
// bulk action, and every order ends Processed, charged once. The figures
// (time, requests and write units per order, what the report said) are
// logged: SAS_BULK_ORDERS=3000 go test -run TestHeldOrdersAreRetriedByTheThousand -v ./shared/devkit/localrun
func TestHeldOrdersAreRetriedByTheThousand(t *testing.T) {
	t.Parallel()
	n := 30
	if v, err := strconv.Atoi(os.Getenv("SAS_BULK_ORDERS")); err == nil && v > 0 {
		n = v
	}
	meter := accounting.NewForDynamoDBLocal()
	e, ids := heldOrders(t, "bulk", n, func(o *localrun.Options) { o.Meter = meter })
	op := e.operatorOf()
	ctx := accounting.WithFunction(context.Background(), "operator")
	query := op.Searched(operator.Search{State: workflow.Held, Workflow: workflow.OrderWorkflow})
	retry := op.HeldAction(outcome.HoldRetry, "", nil)

	meter.Reset()
	dry, err := op.Bulk(ctx, query, retry, operator.BulkOptions{DryRun: true, By: "the test"}, nil)
	require.NoError(t, err)
	require.Equal(t, operator.BulkReport{Action: "retry", By: dry.By, DryRun: true, Listed: n, Done: n, Why: map[string]int{},
		Orders: dry.Orders}, dry)
	require.Zero(t, usage(meter)["DynamoDB"].WriteUnits, "a dry run writes nothing")
	require.Zero(t, usage(meter)["SQS"].Requests, "nor sends")

	meter.Reset()
	start := time.Now()
	rep, err := op.Bulk(ctx, query, retry, operator.BulkOptions{By: "the test"}, nil)
	took := time.Since(start)
	require.NoError(t, err)
	require.Equal(t, n, rep.Done, "%+v", rep.Why)
	require.Zero(t, rep.Refused+rep.Changed+rep.Left)
	u := usage(meter)
	require.EqualValues(t, n, u["DynamoDB UpdateItem"].Requests-u["DynamoDB UpdateItem"].Refused,
		"one decision written an order (its payloads' renewal aside: none here)")
	var report strings.Builder
	fmt.Fprintf(&report, "retry: %d listed, %d done, %d refused, %d changed since listed, %d left; by %s",
		rep.Listed, rep.Done, rep.Refused, rep.Changed, rep.Left, rep.By)
	per := float64(n)
	t.Logf("bulk retry of %d held orders in %s (%.0f a second); per order: %.2f DynamoDB requests (%.2f UpdateItem), "+
		"%.2f write units, %.2f read units, %.2f SQS requests; the report: %s", n, took.Round(time.Millisecond), per/took.Seconds(),
		float64(u["DynamoDB"].Requests)/per, float64(u["DynamoDB UpdateItem"].Requests)/per, u["DynamoDB"].WriteUnits/per,
		u["DynamoDB"].ReadUnits/per, float64(u["SQS"].Requests)/per, report.String())
	for _, k := range slices.Sorted(maps.Keys(u)) {
		t.Logf("  %s: %.2f requests an order", k, float64(u[k].Requests)/per)
	}
	require.Contains(t, rep.By, fmt.Sprintf("the test retry (bulk %s", start.UTC().Format("2006-01-02T")))

	tasks := e.waitEndedWithin(ids, time.Minute+time.Duration(n)*100*time.Millisecond)
	for _, id := range ids[:min(n, 50)] {
		require.Equal(t, workflow.Processed, tasks[id].State, id)
		e.requireLedger(id, "reserve-inventory", "charge-payment", "create-shipment")
		require.Contains(t, incidents(e, id, 1), "retried by "+rep.By, "the history names the bulk action")
	}
}

// incidents are the lines of an order's record i's history, one string.
func incidents(e *env, id string, i int) string {
	e.t.Helper()
	var b strings.Builder
	for _, ev := range e.step(id, i).Incidents {
		b.WriteString(ev.What + "\n")
	}
	return b.String()
}

// A bulk retry of named orders is paced (one decision between two waits),
// refuses the order not found and reports the one undone after it was
// listed as changed since listed; stopped after two decisions, it reports
// what it did and what is left, and run again it retries the rest and
// refuses those it took before. Skip, undo and resubmit by query name their
// bulk action in the order's history too.
func TestABulkRetryIsPacedStoppedAndResumed(t *testing.T) {
	t.Parallel()
	e, ids := heldOrders(t, "pace", 7, nil)
	op := e.operatorOf()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	named := append([]string{"pace-none"}, ids[:6]...)
	changed := ids[1] // undone by hand after the listing
	var waits []int   // decisions written before each wait
	done := 0
	count := func(r operator.BulkResult) {
		if r.Outcome == operator.BulkDone {
			done++
		}
	}
	opts := operator.BulkOptions{By: "ops", Rate: 50,
		Sleep: func(ctx context.Context, d time.Duration) error {
			require.Equal(t, 20*time.Millisecond, d, "50 a second")
			waits = append(waits, done)
			return ctx.Err()
		},
		Listed: func(int, string) {
			_, err := op.DecideHeld(ctx, outcome.HoldDecision{OrderID: changed, Action: outcome.HoldUndo, By: "someone else"})
			require.NoError(t, err)
		}}
	retry := op.HeldAction(outcome.HoldRetry, "", nil)
	rep, err := op.Bulk(ctx, operator.IDs(named...), retry, opts, func(r operator.BulkResult) {
		if count(r); done == 2 {
			stop() // Ctrl-C
		}
	})
	require.NoError(t, err)
	require.Equal(t, []int{1}, waits, "a wait after a decision, none after the stop")
	require.Len(t, rep.Orders, 4)
	require.Equal(t, operator.BulkResult{OrderID: "pace-none", Outcome: operator.BulkRefused, Why: "not found"}, rep.Orders[0])
	require.Equal(t, operator.BulkChanged, rep.Orders[2].Outcome)
	require.Regexp(t, `^it is (Compensating|Failed), not Held$`, rep.Orders[2].Why)
	require.Equal(t, operator.BulkReport{Action: "retry", By: rep.By, Listed: 7, Done: 2, Refused: 1, Changed: 1, Left: 3, Stopped: true,
		Why: map[string]int{"not found": 1, rep.Orders[2].Why: 1}, Orders: rep.Orders}, rep)

	waits, done = nil, 0
	opts.Listed = nil
	again, err := op.Bulk(context.Background(), operator.IDs(named...), retry, opts, count)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, waits, "a wait between two decisions")
	require.Equal(t, 3, again.Done, "the rest")
	require.Equal(t, 4, again.Refused, "the order not found, the one undone and the two retried before: not retried twice")
	require.Zero(t, again.Changed+again.Left)
	require.Contains(t, incidents(e, ids[0], 1), "retried by "+rep.By)
	require.Contains(t, incidents(e, ids[3], 1), "retried by "+again.By)
	require.Contains(t, again.By, "ops retry (bulk ")
	require.Contains(t, again.By, ", 7 orders)")

	// The seventh, skipped by a query; the one undone, resubmitted by one.
	skip, err := op.Bulk(context.Background(), op.Searched(operator.Search{State: workflow.Held}),
		op.HeldAction(outcome.HoldSkip, "", []byte(`{"charged":"by phone"}`)), operator.BulkOptions{By: "ops"}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, skip.Done)
	require.Contains(t, incidents(e, ids[6], 1), "skipped by "+skip.By+" with a result given by hand")
	require.Contains(t, incidents(e, changed, 1), "undone by someone else while its failure held the order")
	require.Equal(t, workflow.Failed, e.waitEnded([]string{changed})[changed].State)
	res, err := op.Bulk(context.Background(), op.Searched(operator.Search{State: workflow.Failed, Prefix: "pace-"}),
		op.ResubmitAction(""), operator.BulkOptions{By: "ops"}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, res.Done, "%+v", res.Orders)
	require.Contains(t, incidents(e, changed, 0), "resubmitted by "+res.By+" (round 2)")
	tasks := e.waitEnded(ids)
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State, id)
	}
}

// Orders waiting for their approval are cancelled by a query: stopped after
// two, the same run again cancels the rest and cancels none twice (those
// cancelled are refused as ended, or found asked already); each order keeps
// the bulk action as who cancelled it.
func TestOrdersAreCancelledByAQueryAndNoneTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, approval("72h", "")))
	ctx := context.Background()
	ids := make([]string, 5)
	for i := range ids {
		ids[i] = fmt.Sprintf("cx-%d", i)
		require.NoError(t, e.stack.SendOrders(ctx, localrun.DemoOrder(ids[i], i).JSON()))
	}
	for _, id := range ids {
		e.parked(id, 1)
	}
	op := e.operatorOf()
	query := op.Searched(operator.Search{State: workflow.Pending, Prefix: "cx-"})
	cancel := op.CancelAction("the campaign was withdrawn")
	dry, err := op.Bulk(ctx, query, cancel, operator.BulkOptions{DryRun: true, By: "ops"}, nil)
	require.NoError(t, err)
	require.Equal(t, 5, dry.Done)

	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	first, err := op.Bulk(stopCtx, operator.IDs(ids...), cancel, operator.BulkOptions{By: "ops"}, func(r operator.BulkResult) {
		if r.OrderID == ids[1] {
			stop()
		}
	})
	require.NoError(t, err)
	require.Equal(t, 2, first.Done)
	require.Equal(t, 3, first.Left)
	again, err := op.Bulk(ctx, operator.IDs(ids...), cancel, operator.BulkOptions{By: "ops"}, nil)
	require.NoError(t, err)
	require.Equal(t, 3, again.Done, "%+v", again.Orders)
	require.Equal(t, 2, again.Already+again.Refused, "the two cancelled before: not cancelled twice")
	tasks := e.waitEnded(ids)
	for i, id := range ids {
		require.Equal(t, workflow.Cancelled, tasks[id].State, id)
		by := again.By
		if i < 2 {
			by = first.By
		}
		require.Equal(t, by, tasks[id].CancelledBy, "the order keeps the bulk action as who cancelled it")
	}
}
