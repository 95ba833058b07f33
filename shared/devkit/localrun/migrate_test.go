package localrun_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// Prices of the requests a move makes (us-east-1, on demand), as cost.md
// prices the pipeline's.
const (
	pricePerWriteUnit = 1.25 / 1e6
	pricePerReadUnit  = 0.25 / 1e6
	pricePerSQS       = 0.40 / 1e6
)

// Orders waiting for their approval move to a version with a fraud check
// before it: a dry run, a canary of a twentieth, the rest, a tenth moved
// back; every order then ends Processed, checked once. The figures (time,
// requests and units per order moved, cost per million moved) are logged:
// SAS_MOVE_ORDERS=1000 go test -run TestOrdersInFlightMoveByTheThousand -v ./shared/devkit/localrun
// (SAS_MOVE_REWRITE=1: by a plan that rewrites each order's data and a result).
func TestOrdersInFlightMoveByTheThousand(t *testing.T) {
	t.Parallel()
	n := 40
	if v, err := strconv.Atoi(os.Getenv("SAS_MOVE_ORDERS")); err == nil && v > 0 {
		n = v
	}
	meter := accounting.NewForDynamoDBLocal()
	settings := workflow.Settings{StepTimeout: 20 * time.Second, MaxFailures: 3, PickupTimeout: 30 * time.Second}
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		running(t, approval("72h", ""))(o)
		o.Settings, o.Meter = settings, meter
		o.VisibilityTimeout = 30 * time.Second
	})
	ctx := context.Background()
	ids := make([]string, n)
	bodies := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("mv-%04d", i)
		o := localrun.DemoOrder(ids[i], i)
		bodies[i] = o.JSON()
	}
	require.NoError(t, e.stack.SendOrders(ctx, bodies...))
	for _, id := range ids {
		e.parked(id, 1)
	}
	file := strings.Replace(approval("96h", ""), "  - name: await-approval\n",
		"  - name: fraud-check\n    agent: payment\n    undo: none\n  - name: await-approval\n", 1)
	if os.Getenv("SAS_MOVE_REWRITE") != "" { // the plan rewrites each order's data and its reservation
		file += "migrate:\n  transform:\n    order: '.customerId |= (\"m-\" + .)'\n    results: {reserve-inventory: '{held: .}'}\n"
	}
	v2, err := workflow.ParseFile("approval.yaml", []byte(file), workflow.Options{})
	require.NoError(t, err)
	v2 = v2.With(settings)
	op := operator.New(e.stack.Deployment.Clients, e.stack.Topology())
	op.PickupTimeout = settings.PickupTimeout
	opCtx := accounting.WithFunction(ctx, "operator")
	move := func(what string, sel operator.MoveSelect, dry bool, to workflow.Definition) operator.MoveReport {
		meter.Reset()
		start := time.Now()
		rep, err := op.Migrate(opCtx, to, sel, "the test", dry, 0, nil)
		require.NoError(t, err)
		took := time.Since(start)
		var ddb, sqs accounting.Usage
		for k, u := range meter.Snapshot() {
			if k.Function != "operator" {
				continue
			}
			switch k.Service {
			case "DynamoDB":
				ddb = ddb.Add(u)
			case "SQS":
				sqs = sqs.Add(u)
			}
		}
		per := float64(max(rep.Moves, 1))
		cost := (ddb.WriteUnits*pricePerWriteUnit + ddb.ReadUnits*pricePerReadUnit + float64(sqs.Requests)*pricePerSQS) / per * 1e6
		t.Logf("%s: %d looked at, %d moves, %d already, %d refused in %s (%.0f a second); per order moved: %.2f DynamoDB requests, "+
			"%.2f write units, %.2f read units, %.2f SQS requests: $%.2f a million moved", what, rep.Seen, rep.Moves, rep.Already, rep.Refused,
			took.Round(time.Millisecond), float64(rep.Seen)/took.Seconds(), float64(ddb.Requests)/per, ddb.WriteUnits/per,
			ddb.ReadUnits/per, float64(sqs.Requests)/per, cost)
		return rep
	}
	dry := move("dry run", operator.MoveSelect{}, true, v2)
	require.Equal(t, n, dry.Moves)
	canary := move("canary", operator.MoveSelect{Count: max(n/20, 1)}, false, v2)
	require.Equal(t, max(n/20, 1), canary.Moves)
	rest := move("the rest", operator.MoveSelect{}, false, v2)
	require.Equal(t, n-canary.Moves, rest.Moves)
	require.Equal(t, canary.Moves, rest.Already)
	for _, id := range ids {
		e.parked(id, 2) // the fraud check ran: waiting again
	}
	v1, ok := e.stack.Deployment.Config.Workflows.Get("approval")
	require.True(t, ok)
	back := move("moved back", operator.MoveSelect{Orders: ids[:max(n/10, 1)]}, false, v1)
	require.Equal(t, max(n/10, 1), back.Moves)
	for _, id := range ids {
		e.signal(id, "approved", "e-"+id, `{"amountCents":1998,"by":"ana"}`)
	}
	tasks := e.waitEnded(ids)
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State, id)
		e.requireLedger(id, "reserve-inventory", "fraud-check", "charge-payment")
	}
}

// Orders waiting for their approval move to a version whose plan rewrites
// their data and the reservation each kept: the charge after the approval
// reads the data rewritten, the undo of a cancelled one the reservation
// rewritten, and a resend of an order as first accepted is a duplicate
// still, not a conflict.
func TestAMovedOrderRunsOnItsDataRewritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, approval("72h", "")))
	ctx := context.Background()
	ids := []string{"rw-approved", "rw-cancelled"}
	sent := map[string]string{}
	for i, id := range ids {
		sent[id] = localrun.DemoOrder(id, i).JSON()
		require.NoError(t, e.stack.SendOrders(ctx, sent[id]))
		e.parked(id, 1)
	}
	v2, err := workflow.ParseFile("approval.yaml", []byte(approval("96h", "")+`migrate:
  transform:
    order: '.customerId |= ("vip-" + .)'
    results:
      reserve-inventory: '{held: ., moved: true}'
`), workflow.Options{})
	require.NoError(t, err)
	op := e.operatorOf()
	for _, id := range ids {
		m, err := op.MigrateOrder(ctx, id, v2, "the test", false)
		require.NoError(t, err)
		require.True(t, m.Moves, "%s: %s", id, m.Why)
		require.True(t, m.Rewritten, id)
	}
	e.signal("rw-approved", "approved", "e-1", `{"amountCents":1998,"by":"ana"}`)
	e.cancelMessage("rw-cancelled")
	tasks := e.waitEnded(ids)
	require.Equal(t, workflow.Processed, tasks["rw-approved"].State)
	require.Equal(t, workflow.Cancelled, tasks["rw-cancelled"].State)
	require.Equal(t, "vip-customer-0", e.input("rw-approved", "charge-payment")["customerId"], "the charge reads the data rewritten")
	undo := e.input("rw-cancelled", "release-inventory")
	require.Equal(t, true, undo["reservation"].(map[string]any)["moved"], "the undo reads the reservation rewritten: %v", undo)

	require.NoError(t, e.stack.SendOrders(ctx, sent["rw-approved"]))
	e.eventually("the resend counted", 30*time.Second, func() bool { return e.stack.Tally.Sum(metrics.DuplicateOrders) >= 1 })
	require.Zero(t, e.stack.Tally.Sum(metrics.ConflictingOrders), "the order as first accepted is the order still")
}
