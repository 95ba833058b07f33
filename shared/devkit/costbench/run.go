package costbench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/devkit/runner"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Memory of each kind of function, in GB, as the stack deploys them.
const (
	CoordinatorMemoryGB = topology.CoordinatorMemoryMB / 1024.0
	AgentMemoryGB       = topology.AgentMemoryMB / 1024.0
)

// Producer is the function name the orders' sends are counted under: the
// client's requests, part of what an order costs.
const Producer = "producer"

// Plan is what to measure.
type Plan struct {
	Orders     int      // per run
	Workflows  []string // workflow.SingleWorkflow, workflow.OrderWorkflow
	BatchSizes []int    // event source mapping batch sizes, 1..10
	// ResultBytes are the sizes of the services' answers to measure with:
	// 0 answers nothing (the steps keep no result), n about n bytes of
	// JSON, kept as each step's result (default: 0).
	ResultBytes []int
	Endpoint    string // SQS and SNS (moto_server)
	// DynamoDBEndpoint is DynamoDB Local, or LocalStack (which runs it): an
	// engine that reports consumed capacity per table and index, read with
	// accounting.NewForDynamoDBLocal. moto reports a flat 1 per request.
	DynamoDBEndpoint string
	Timeout          time.Duration // per run
	// BatchWindow is the event source mappings' batching window (zero:
	// none); a deployment's by default.
	BatchWindow time.Duration
	Prices      Prices
}

// DefaultPlan measures n orders of both workflows at batch sizes 1, 2, 5, 10.
func DefaultPlan(n int) Plan {
	return Plan{Orders: n, Workflows: []string{workflow.SingleWorkflow, workflow.OrderWorkflow},
		BatchSizes: []int{1, 2, 5, 10}, Timeout: 5 * time.Minute, Prices: ListPrices, BatchWindow: topology.DefaultBatchWindow}
}

// Run is one measured run: one workflow at one batch size.
type Run struct {
	Workflow  string `json:"workflow"`
	Steps     int    `json:"steps"`
	BatchSize int    `json:"batchSize"`
	// ResultBytes is about how much each step's service answered (0:
	// nothing), each answer kept as the step's result.
	ResultBytes int     `json:"resultBytes"`
	Orders      int     `json:"orders"`
	Seconds     float64 `json:"seconds"`
	// MeanBatch is the messages per invocation actually delivered.
	MeanBatch float64 `json:"meanBatch"`
	// LatencyP50 is the median time from an order's submission to its end,
	// in seconds: what the batching window costs in waiting.
	LatencyP50 float64       `json:"latencyP50Seconds"`
	PerOrder   PerOrder      `json:"perOrder"`
	Cost       Cost          `json:"costPerMillion"`
	SFN        StepFunctions `json:"stepFunctions"`
	// Ratio is Step Functions Standard's cost over this run's.
	Ratio float64 `json:"ratioToStandard"`
	// Requests are the counted requests per order, "function service operation".
	Requests map[string]float64 `json:"requestsPerOrder"`
	// Units are the DynamoDB capacity units per order, by the same key.
	Units map[string]float64 `json:"dynamodbUnitsPerOrder"`
	// IdleReceivesPerMinute are the pollers' empty receives, a fixed cost
	// (it follows the time the queues are polled, not the orders).
	IdleReceivesPerMinute float64 `json:"idleReceivesPerMinute"`
	// Functions are the Lambda figures by function (the Supervisor apart).
	Functions map[string]FunctionUse `json:"functions"`
	// Logs are the bytes written to CloudWatch Logs per order, by kind (the
	// Supervisor apart).
	Logs LogUse `json:"logsPerOrder"`
	// CoordinatorsAt128MB is the cost per million with Submission and the
	// Scheduler at 128 MB instead of 256, were their handler time to hold
	// (they mostly wait on DynamoDB and SQS; Lambda gives less CPU below
	// 1,769 MB, so it is a floor, not a measurement).
	CoordinatorsAt128MB float64 `json:"costPerMillionCoordinatorsAt128MB"`
}

// FunctionUse is one function's share of a run's Lambda figures.
type FunctionUse struct {
	InvocationsPerOrder   float64 `json:"invocationsPerOrder"`
	MessagesPerInvocation float64 `json:"messagesPerInvocation"`
	MsPerInvocation       float64 `json:"msPerInvocation"` // handler time, against the local emulators
	GBSecondsPerOrder     float64 `json:"gbSecondsPerOrder"`
	Logs                  LogUse  `json:"logsPerOrder"`
}

// Result is every run of a plan.
type Result struct {
	Orders             int     `json:"orders"`
	BatchWindowSeconds float64 `json:"batchWindowSeconds"` // every event source mapping's
	Runs               []Run   `json:"runs"`
	// Stages are, by workflow, one order's state item after each write of
	// its life and what each write cost (Lifecycle).
	Stages map[string][]Stage `json:"stages"`
}

var seq atomic.Int64

// Execute runs the plan; progress, if set, hears about each run.
func Execute(ctx context.Context, p Plan, progress func(string)) (Result, error) {
	res := Result{Orders: p.Orders, BatchWindowSeconds: p.BatchWindow.Seconds(), Stages: map[string][]Stage{}}
	for _, wf := range p.Workflows {
		def, err := workflow.Example(wf)
		if err != nil {
			return res, err
		}
		if res.Stages[wf], err = Lifecycle(ctx, cmp.Or(p.DynamoDBEndpoint, p.Endpoint), def); err != nil {
			return res, fmt.Errorf("%s workflow's lifecycle: %w", wf, err)
		}
		sizes := p.ResultBytes
		if len(sizes) == 0 {
			sizes = []int{0}
		}
		for _, rb := range sizes {
			for _, b := range p.BatchSizes {
				if progress != nil {
					progress(fmt.Sprintf("%s workflow, batch size %d, %s: %d orders", wf, b, answers(rb), p.Orders))
				}
				r, err := measure(ctx, p, wf, b, rb)
				if err != nil {
					return res, fmt.Errorf("%s workflow, batch size %d, %s: %w", wf, b, answers(rb), err)
				}
				res.Runs = append(res.Runs, r)
			}
		}
	}
	return res, nil
}

// answers says what the services answer in a run.
func answers(resultBytes int) string {
	if resultBytes == 0 {
		return "no results"
	}
	return fmt.Sprintf("%dB results", resultBytes)
}

func measure(ctx context.Context, p Plan, wf string, batch, resultBytes int) (Run, error) {
	sim := remotesim.New(1)
	sim.SetFaults("", remotesim.Faults{NoResult: resultBytes == 0, ResultBytes: resultBytes})
	srv, err := sim.Start("127.0.0.1:0")
	if err != nil {
		return Run{}, err
	}
	defer srv.Close()
	def, err := workflow.Example(wf)
	if err != nil {
		return Run{}, err
	}
	meter := accounting.NewForDynamoDBLocal() // the state store is on DynamoDB Local, or LocalStack's
	logs := newLogMeter()                     // what the functions write, as CloudWatch Logs ingests it
	stack, err := localrun.New(ctx, localrun.Options{
		Endpoint: p.Endpoint, DynamoDBEndpoint: p.DynamoDBEndpoint, Meter: meter, BatchSize: batch,
		Prefix:    fmt.Sprintf("bench%d-%d", time.Now().UnixNano()%1e6, seq.Add(1)),
		Workflows: workflow.MustSet(def), RemoteURL: srv.URL,
		// Lambda polls each queue with at least five pollers; two are
		// enough here and keep the local batches full. The same for the
		// agents' queues: the simulator answers at once, so no agent batch
		// waits on a slow call.
		Pollers: 2, AgentPollers: 2, SupervisorEvery: time.Second, BatchWindow: p.BatchWindow,
		Log: logs.logger(), Metrics: logs,
	})
	if err != nil {
		return Run{}, err
	}
	meter.Reset() // provisioning is not an order's cost

	stop := stack.Start(ctx)
	defer stop()

	ids := make([]string, p.Orders)
	bodies := make([]string, p.Orders)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%s-%d-%05d", wf, batch, i)
		bodies[i] = localrun.DemoOrder(ids[i], i).JSON()
	}
	start := time.Now()
	if err := stack.SendOrders(accounting.WithFunction(ctx, Producer), bodies...); err != nil {
		return Run{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	tasks, err := stack.WaitEnded(wctx, ids, 100*time.Millisecond, nil)
	if err != nil {
		return Run{}, err
	}
	elapsed := time.Since(start)
	stop() // the handlers' counts are final
	for id, t := range tasks {
		if t.State != workflow.Processed {
			return Run{}, fmt.Errorf("order %s ended %s with no fault injected", id, t.State)
		}
	}
	r := tally(p, def, batch, resultBytes, elapsed, meter.Snapshot(), stack, logs.snapshot())
	r.LatencyP50 = medianLatency(tasks).Seconds()
	return r, nil
}

// medianLatency is the median time from submission to end of the tasks.
func medianLatency(tasks map[string]statestore.Task) time.Duration {
	var lat []time.Duration
	for _, t := range tasks {
		lat = append(lat, t.CompletedAt.Sub(t.CreatedAt))
	}
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[len(lat)/2]
}

func tally(p Plan, def workflow.Definition, batch, resultBytes int, elapsed time.Duration, counts map[accounting.Key]accounting.Usage,
	stack *localrun.Stack, logs map[string]LogUse) Run {
	r := Run{Workflow: def.Name, Steps: len(def.Steps), BatchSize: batch, ResultBytes: resultBytes, Orders: p.Orders, Seconds: elapsed.Seconds(),
		Requests: map[string]float64{}, Units: map[string]float64{}}
	u := r.countRequests(counts, elapsed)
	agentSeconds := r.countLambda(&u, stack.Stats.Snapshot(), logs)
	r.PerOrder = u
	r.Cost = p.Prices.PerMillion(u)
	lighter := u
	for fn, f := range r.Functions {
		if !strings.HasPrefix(fn, "agent-") {
			lighter.LambdaGBSeconds -= f.GBSecondsPerOrder / 2
		}
	}
	r.CoordinatorsAt128MB = p.Prices.PerMillion(lighter).Total
	r.SFN = p.Prices.SFN(len(def.Steps), agentSeconds)
	if r.Cost.Total > 0 {
		r.Ratio = r.SFN.Standard.Total / r.Cost.Total
	}
	return r
}

// countRequests adds up the counted AWS requests and DynamoDB units per
// order, by service and by function and operation.
func (r *Run) countRequests(counts map[accounting.Key]accounting.Usage, elapsed time.Duration) PerOrder {
	n := float64(r.Orders)
	var u PerOrder
	for k, c := range counts {
		switch {
		case k.Function == "" || k.Function == "supervisor":
			continue // the bench's own reads; the Supervisor's fixed schedule
		case k.Operation == accounting.EmptyReceive:
			r.IdleReceivesPerMinute += float64(c.Requests) / elapsed.Minutes()
			continue
		}
		r.Requests[k.Function+" "+k.Service+" "+k.Operation] += float64(c.Requests) / n
		switch k.Service {
		case "SQS":
			u.SQSRequests += float64(c.Requests) / n
		case "SNS":
			u.SNSPublishes += float64(c.Requests) / n
		case "DynamoDB":
			r.Units[k.Function+" "+k.Service+" "+k.Operation] += (c.ReadUnits + c.WriteUnits) / n
			u.ReadUnits += c.ReadUnits / n
			u.WriteUnits += c.WriteUnits / n
			u.ReportedWriteUnits += c.ReportedWriteUnits / n
		}
	}
	return u
}

// countLambda adds the functions' invocations, GB-seconds and log bytes per
// order to u, r.Functions and r.Logs, and returns the agents' seconds per
// order.
func (r *Run) countLambda(u *PerOrder, stats map[string]runner.FunctionStats, logs map[string]LogUse) (agentSeconds float64) {
	n := float64(r.Orders)
	var msgs, invocations int
	r.Functions = map[string]FunctionUse{}
	for fn, s := range stats {
		if fn == "supervisor" {
			continue
		}
		mem, memMB := CoordinatorMemoryGB, topology.CoordinatorMemoryMB
		if strings.HasPrefix(fn, "agent-") {
			mem, memMB = AgentMemoryGB, topology.AgentMemoryMB
			agentSeconds += s.HandlerTime.Seconds() / n
		}
		l := asLambdaWrites(logs[fn], s.Invocations, memMB).per(n)
		r.Logs.add(l)
		u.LambdaInvocations += float64(s.Invocations) / n
		u.LambdaGBSeconds += s.HandlerTime.Seconds() * mem / n
		if s.Invocations > 0 {
			r.Functions[fn] = FunctionUse{InvocationsPerOrder: float64(s.Invocations) / n,
				MessagesPerInvocation: float64(s.Messages) / float64(s.Invocations),
				MsPerInvocation:       s.HandlerTime.Seconds() * 1000 / float64(s.Invocations),
				GBSecondsPerOrder:     s.HandlerTime.Seconds() * mem / n, Logs: l}
		}
		msgs += s.Messages
		invocations += s.Invocations
	}
	if invocations > 0 {
		r.MeanBatch = float64(msgs) / float64(invocations)
	}
	r.Logs.add(logs["other"].per(n)) // lines no function claims: counted, none expected
	u.LogBytes = r.Logs.Total()
	return agentSeconds
}
