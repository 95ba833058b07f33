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
	v2, err := workflow.ParseFile("approval.yaml", []byte(strings.Replace(approval("96h", ""), "  - name: await-approval\n",
		"  - name: fraud-check\n    agent: payment\n    undo: none\n  - name: await-approval\n", 1)), workflow.Options{})
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
