package costbench_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shirou/gopsutil/v4/process"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/costbench"
	"github.com/sas-go/sas/shared/workflow"
)

// dynamoDBLocalPID is the DynamoDB Local this test binary started.
func dynamoDBLocalPID(tb testing.TB) int {
	tb.Helper()
	self, err := process.NewProcess(int32(os.Getpid()))
	require.NoError(tb, err)
	children, err := self.Children()
	require.NoError(tb, err)
	for _, c := range children {
		if cmdline, _ := c.Cmdline(); strings.Contains(cmdline, "DynamoDBLocal") {
			return int(c.Pid)
		}
	}
	tb.Skip("DynamoDB Local is not this test binary's child (AWS_ENDPOINT_URL names another engine)")
	return 0
}

// Each kind of request is measured on its own requests: the order's writes
// as the handlers make them (a claim and a completion per step), then the
// reads and the Supervisor's move-on on orders in flight.
func TestMeasureEngineMeasuresEachKindOnItsOwnRequests(t *testing.T) {
	pid := dynamoDBLocalPID(t)
	const orders = 20
	def := workflow.MustExample(workflow.OrderWorkflow)
	k, err := costbench.MeasureEngine(context.Background(), costbench.EnginePlan{Endpoint: ddbURL, PID: pid, Orders: orders,
		Parallel: 4, Workflow: def})
	require.NoError(t, err)
	want := map[string]map[string]int64{
		costbench.KindSubmit:       {"TransactWriteItems": orders},
		costbench.KindClaim:        {"UpdateItem": 3 * orders},
		costbench.KindComplete:     {"UpdateItem": 2 * orders},
		costbench.KindEnd:          {"UpdateItem": 2 * orders}, // the end, and its count in its workflow's health
		costbench.KindResult:       {"PutItem": orders},
		costbench.KindResults:      {"Query": orders},
		costbench.KindGet:          {"GetItem": orders},
		costbench.KindBatchGetItem: {"BatchGetItem": 1},
		costbench.KindMoveOn:       {"UpdateItem": orders},
	}
	for kind, ops := range want {
		require.Equal(t, ops, k[kind].Requests, kind)
		require.Positive(t, k[kind].Units, kind)
	}
	require.Equal(t, float64(orders), k[costbench.KindBatchGetItem].Units, "a BatchGetItem's CPU is per item read")
	require.Equal(t, k[costbench.KindQuery].Requests["Query"], k[costbench.KindQuery].Requests["BatchGetItem"],
		"a due page: a Query of the index, a BatchGetItem of its orders")
	require.InDelta(t, 2, k[costbench.KindIdle].Units, 0.001, "the idle measure's seconds")
	var cpu float64
	for _, c := range k {
		cpu += c.CPUSeconds
	}
	require.Positive(t, cpu, "the engine's CPU time is read")
}

// The table shares out a burst's requests by kind: of the functions'
// UpdateItems one a step is a claim, the rest completions; the polls'
// BatchGetItems count their items (half a unit each), the Supervisor's
// (consistent) a unit each.
func TestCPUTableSharesABurstsRequestsByKind(t *testing.T) {
	key := func(fn, op string) accounting.Key {
		return accounting.Key{Function: fn, Service: "DynamoDB", Operation: op}
	}
	b := costbench.BurstResult{Orders: 10, Seconds: 2, EngineCPUSeconds: 1, Counts: map[accounting.Key]accounting.Usage{
		key("submission", "TransactWriteItems"): {Requests: 10},
		key("agent-inventory", "UpdateItem"):    {Requests: 25},
		key("agent-payment", "UpdateItem"):      {Requests: 40},
		key("supervisor", "UpdateItem"):         {Requests: 5},
		key("", "BatchGetItem"):                 {Requests: 4, ReadUnits: 200},
		key("supervisor", "BatchGetItem"):       {Requests: 2, ReadUnits: 30},
		key("submission", "PutItem"):            {Requests: 1},
	}}
	b.Counts[accounting.Key{Service: "SQS", Operation: "SendMessageBatch"}] = accounting.Usage{Requests: 1}
	each := func(kind string, ms float64) costbench.KindCost {
		return costbench.KindCost{Kind: kind, Units: 1000, CPUSeconds: ms}
	}
	k := map[string]costbench.KindCost{costbench.KindSubmit: each(costbench.KindSubmit, 4), costbench.KindClaim: each(costbench.KindClaim, 2),
		costbench.KindComplete: each(costbench.KindComplete, 1), costbench.KindEnd: each(costbench.KindEnd, 3),
		costbench.KindMoveOn: each(costbench.KindMoveOn, 1), costbench.KindBatchGetItem: each(costbench.KindBatchGetItem, 0.1),
		costbench.KindIdle: {Kind: costbench.KindIdle, Units: 1, CPUSeconds: 0.01}}
	got := map[string]costbench.CPURow{}
	for _, r := range costbench.CPUTable(b, k, 3) {
		got[r.Kind+"/"+r.Who] = r
	}
	agents := "agents"
	require.InDelta(t, 1, got[costbench.KindSubmit+"/submission"].PerOrder, 1e-9)
	require.InDelta(t, 4, got[costbench.KindSubmit+"/submission"].MsPerOrder, 1e-9)
	require.InDelta(t, 0.04, got[costbench.KindSubmit+"/submission"].Share, 1e-9, "4 of the 100 ms an order measured")
	require.InDelta(t, 3, got[costbench.KindClaim+"/"+agents].PerOrder, 1e-9)
	require.InDelta(t, 3.5, got[costbench.KindComplete+"/"+agents].PerOrder, 1e-9)
	require.InDelta(t, 2, got[costbench.KindComplete+"/"+agents].MsEach, 1e-9, "completions at the mean of a step's and the last one's")
	require.InDelta(t, 0.5, got[costbench.KindMoveOn+"/supervisor"].PerOrder, 1e-9)
	require.InDelta(t, 40, got[costbench.KindBatchGetItem+"/"+costbench.Polls].PerOrder, 1e-9, "200 units of half an item")
	require.InDelta(t, 3, got[costbench.KindBatchGetItem+"/supervisor"].PerOrder, 1e-9)
	require.InDelta(t, 0.2, got[costbench.KindIdle+"/DynamoDB Local itself"].PerOrder, 1e-9)
	require.Zero(t, got["PutItem (not measured alone)/submission"].MsEach)
	require.Len(t, got, 8, "SQS is not the engine's")
}

// BenchmarkDynamoDBLocalCPU measures where DynamoDB Local's CPU goes in a
// burst of SAS_CPU_ORDERS (default 1,000) three-step orders, as sasctl demo
// sends them: the burst's requests per order, each kind's CPU per request
// measured alone, the table. Run it alone:
//
//	go test -run '^$' -bench DynamoDBLocalCPU -benchtime 1x ./shared/devkit/costbench
func BenchmarkDynamoDBLocalCPU(b *testing.B) {
	pid := dynamoDBLocalPID(b)
	orders := 1000
	if v := os.Getenv("SAS_CPU_ORDERS"); v != "" {
		var err error
		orders, err = strconv.Atoi(v)
		require.NoError(b, err, "SAS_CPU_ORDERS")
	}
	ctx := context.Background()
	def := workflow.MustExample(workflow.OrderWorkflow)
	parallel := 0
	if v := os.Getenv("SAS_CPU_PARALLEL"); v != "" {
		var err error
		parallel, err = strconv.Atoi(v)
		require.NoError(b, err, "SAS_CPU_PARALLEL")
	}
	// The queues in process, as sasctl demo's: the SDK's
	// AWS_ENDPOINT_URL_SQS does not win over a client's own endpoint (moto's).
	plan := costbench.BurstPlan{Orders: orders, Endpoint: motoURL, DynamoDBEndpoint: ddbURL,
		QueuesEndpoint: os.Getenv("AWS_ENDPOINT_URL_SQS"), PID: pid, Timeout: 10 * time.Minute}
	for range b.N {
		// The first burst meets a fresh JVM, as sasctl demo's does: its
		// CPU includes compiling DynamoDB Local's code (a fixed cost, not
		// the orders'); the table is the second's.
		cold, err := costbench.Burst(ctx, plan)
		require.NoError(b, err)
		burst, err := costbench.Burst(ctx, plan)
		require.NoError(b, err)
		k, err := costbench.MeasureEngine(ctx, costbench.EnginePlan{Endpoint: ddbURL, PID: pid, Orders: orders, Workflow: def,
			Parallel: parallel})
		require.NoError(b, err)
		fmt.Printf("The first burst, on a fresh DynamoDB Local: drained in %.1f s, %.1f CPU s (%.2f ms an order)\n\n",
			cold.Seconds, cold.EngineCPUSeconds, 1000*cold.EngineCPUSeconds/float64(orders))
		costbench.PrintCPUTable(os.Stdout, burst, costbench.CPUTable(burst, k, len(def.Steps)))
	}
}
