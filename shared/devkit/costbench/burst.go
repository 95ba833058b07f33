package costbench

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/workflow"
)

// DemoSettings are sasctl demo's overrides of the workflow's settings, which
// a burst runs with too.
var DemoSettings = workflow.Settings{StepTimeout: 3 * time.Second, MaxFailures: 3, RetryBackoff: time.Second,
	PickupTimeout: 10 * time.Second}

// DemoPoll is how often sasctl demo reads every order's task while it
// shows progress, as a burst does.
const DemoPoll = 250 * time.Millisecond

// BurstPlan is a burst of the example order workflow's orders through the
// whole local pipeline, sent at once, as `sasctl demo --orders N
// --malformed 0 --transient 0 --stall 0 --permanent 0 --latency 0` runs it.
type BurstPlan struct {
	Orders           int
	Endpoint         string // moto (Secrets Manager, SSM; SQS and SNS unless QueuesEndpoint)
	DynamoDBEndpoint string // the DynamoDB engine
	QueuesEndpoint   string // the in-process queues, if set
	PID              int    // the DynamoDB engine's process, whose CPU time is read
	Timeout          time.Duration
}

// BurstResult is what a burst took.
type BurstResult struct {
	Orders  int     `json:"orders"`
	Seconds float64 `json:"seconds"` // from the first send to the last order ended
	// EngineCPUSeconds is the DynamoDB engine's CPU time over Seconds.
	EngineCPUSeconds float64 `json:"engineCpuSeconds"`
	// Counts are every AWS request made over Seconds, the progress polls'
	// (function "") included.
	Counts map[accounting.Key]accounting.Usage `json:"-"`
}

// Burst sends p.Orders orders at once, polls their tasks as sasctl demo
// does (DemoPoll), and counts every request made and the engine's CPU time
// until the last one ended. Every order must end Processed.
func Burst(ctx context.Context, p BurstPlan) (BurstResult, error) {
	sim := remotesim.New(1)
	sim.SetFaults("", remotesim.Faults{})
	srv, err := sim.Start("127.0.0.1:0")
	if err != nil {
		return BurstResult{}, err
	}
	defer srv.Close()
	meter := accounting.NewForDynamoDBLocal()
	stack, err := localrun.New(ctx, localrun.Options{Endpoint: p.Endpoint, DynamoDBEndpoint: p.DynamoDBEndpoint,
		QueuesEndpoint: p.QueuesEndpoint, Meter: meter, Prefix: fmt.Sprintf("burst%d-%d", time.Now().UnixNano()%1e6, seq.Add(1)),
		Settings: DemoSettings, SupervisorEvery: time.Second, RemoteURL: srv.URL})
	if err != nil {
		return BurstResult{}, err
	}
	stop := stack.Start(ctx)
	defer stop()
	ids, bodies := make([]string, p.Orders), make([]string, p.Orders)
	for i := range ids {
		ids[i] = fmt.Sprintf("burst-%05d", i)
		bodies[i] = localrun.DemoOrder(ids[i], i).JSON()
	}
	meter.Reset() // provisioning is not the orders'
	before, err := ProcessCPU(p.PID)
	if err != nil {
		return BurstResult{}, err
	}
	start := time.Now()
	if err := stack.SendOrders(ctx, bodies...); err != nil {
		return BurstResult{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, cmp.Or(p.Timeout, 5*time.Minute))
	defer cancel()
	tasks, err := stack.WaitEnded(wctx, ids, DemoPoll, nil)
	if err != nil {
		return BurstResult{}, err
	}
	elapsed := time.Since(start)
	after, err := ProcessCPU(p.PID)
	if err != nil {
		return BurstResult{}, err
	}
	counts := meter.Snapshot()
	for id, t := range tasks {
		if t.State != workflow.Processed {
			return BurstResult{}, fmt.Errorf("order %s ended %s with no fault injected", id, t.State)
		}
	}
	return BurstResult{Orders: p.Orders, Seconds: elapsed.Seconds(), EngineCPUSeconds: (after - before).Seconds(), Counts: counts}, nil
}
