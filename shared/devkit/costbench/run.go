package costbench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

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
	// Seal seals every run's orders (sealData), its KMS requests counted.
	Seal bool
	// PayloadBytes are sizes of order and of each step's answer to measure
	// the order workflow with (its schema off, its result limit the
	// largest): each size's run sends orders of that many bytes whose
	// services answer as many, kept in the payload bucket over the inline
	// limit; fewer orders for the largest (PayloadOrders).
	PayloadBytes []int
	Endpoint     string // SQS and SNS (moto_server); S3 (the payload bucket)
	// DynamoDBEndpoint is DynamoDB Local, or LocalStack (which runs it): an
	// engine that reports consumed capacity per table and index, read with
	// accounting.NewForDynamoDBLocal. moto reports a flat 1 per request.
	DynamoDBEndpoint string
	// QueuesEndpoint serves SQS and SNS instead of Endpoint, if set (the
	// in-process queues of shared/devkit/sqsmem).
	QueuesEndpoint string
	Timeout        time.Duration // per run
	// BatchWindow is the event source mappings' batching window (zero:
	// none); a deployment's by default.
	BatchWindow time.Duration
	Prices      Prices
	// Lambda prices the functions' time from what they did (zero:
	// NominalLambda); the handler time measured against the emulators is
	// reported beside it.
	Lambda LambdaModel
}

// DefaultPlan measures n orders of both workflows at batch sizes 1, 2, 5, 10.
func DefaultPlan(n int) Plan {
	return Plan{Orders: n, Workflows: []string{workflow.SingleWorkflow, workflow.OrderWorkflow},
		BatchSizes: []int{1, 2, 5, 10}, Timeout: 5 * time.Minute, Prices: ListPrices, BatchWindow: topology.DefaultBatchWindow,
		Lambda: NominalLambda}
}

// Run is one measured run: one workflow at one batch size.
type Run struct {
	Workflow  string `json:"workflow"`
	Steps     int    `json:"steps"`
	BatchSize int    `json:"batchSize"`
	// ResultBytes is about how much each step's service answered (0:
	// nothing), each answer kept as the step's result.
	ResultBytes int `json:"resultBytes"`
	// PayloadBytes is the order's size of a payload run, and its services'
	// answers' (0: not one).
	PayloadBytes int     `json:"payloadBytes,omitempty"`
	Orders       int     `json:"orders"`
	Seconds      float64 `json:"seconds"`
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
	// Refused are the writes per order refused by their condition (a
	// duplicate's claim, a race lost), by the same key: billed, though no
	// engine reports them (accounting.Usage.Refused).
	Refused map[string]float64 `json:"refusedWritesPerOrder,omitempty"`
	// Unpriced are the requests per order, by the same key, counted but
	// not priced: the sends a handler flushed while its records ran
	// because its invocation outlasted, against the emulators, what the
	// model prices (LambdaModel.BatchSends).
	Unpriced map[string]float64 `json:"unpricedRequestsPerOrder,omitempty"`
	// IdleReceivesPerMinute are the pollers' empty receives, a fixed cost
	// (it follows the time the queues are polled, not the orders).
	IdleReceivesPerMinute float64 `json:"idleReceivesPerMinute"`
	// Functions are the Lambda figures by function (the Supervisor apart).
	Functions map[string]FunctionUse `json:"functions"`
	// Logs are the bytes written to CloudWatch Logs per order, by kind (the
	// Supervisor apart).
	Logs LogUse `json:"logsPerOrder"`
	// CoordinatorsAt128MB is the cost per million with Submission and the
	// Scheduler at 128 MB instead of 256, their time priced by the same
	// model (they mostly wait on DynamoDB and SQS; their CPU work takes
	// twice as long at half the memory).
	CoordinatorsAt128MB float64 `json:"costPerMillionCoordinatorsAt128MB"`
}

// FunctionUse is one function's share of a run's Lambda figures.
type FunctionUse struct {
	InvocationsPerOrder   float64 `json:"invocationsPerOrder"`
	MessagesPerInvocation float64 `json:"messagesPerInvocation"`
	// MsPerInvocation is the handler time measured against the local
	// emulators: theirs, and it grows with the machine's load; not priced.
	MsPerInvocation float64 `json:"msPerInvocation"`
	// BilledMsPerInvocation is the time priced, from what the invocations
	// did (Plan.Lambda).
	BilledMsPerInvocation float64 `json:"billedMsPerInvocation"`
	GBSecondsPerOrder     float64 `json:"gbSecondsPerOrder"` // billed
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
	for _, size := range p.PayloadBytes {
		b := slices.Max(p.BatchSizes)
		q := p
		q.Orders = PayloadOrders(p.Orders, size)
		if progress != nil {
			progress(fmt.Sprintf("order workflow, batch size %d, %d-byte orders and answers: %d orders", b, size, q.Orders))
		}
		r, err := measurePayloads(ctx, q, b, size)
		if err != nil {
			return res, fmt.Errorf("order workflow, %d-byte payloads: %w", size, err)
		}
		res.Runs = append(res.Runs, r)
	}
	return res, nil
}

// PayloadOrders is how many orders a payload run of size bytes sends: n, or
// as many as move about 1 GB of payloads through the emulator (an order's
// payloads are read back by each step after them), at least 3.
func PayloadOrders(n, size int) int {
	return min(n, max(3, (1<<30)/(size*10)))
}

// measurePayloads is a payload run (Plan.PayloadBytes).
func measurePayloads(ctx context.Context, p Plan, batch, size int) (Run, error) {
	def := workflow.MustExample(workflow.OrderWorkflow)
	def.Schema, def.SchemaFile, def.ResultLimit = nil, "", workflow.MaxResultLimit
	body := func(id string, i int) string {
		o := localrun.DemoOrder(id, i)
		head, _ := json.Marshal(o)
		pad := max(size-len(head)-len(`,"documents":""`), 0)
		return string(head[:len(head)-1]) + `,"documents":"` + strings.Repeat("d", pad) + `"}`
	}
	// The simulator pads an answer past the size by up to a line: one line
	// short, the largest stays within the result limit.
	r, err := measureWith(ctx, p, def, batch, size-256, body)
	r.PayloadBytes = size
	return r, err
}

// answers says what the services answer in a run.
func answers(resultBytes int) string {
	if resultBytes == 0 {
		return "no results"
	}
	return fmt.Sprintf("%dB results", resultBytes)
}

func measure(ctx context.Context, p Plan, wf string, batch, resultBytes int) (Run, error) {
	def, err := workflow.Example(wf)
	if err != nil {
		return Run{}, err
	}
	return measureWith(ctx, p, def, batch, resultBytes, func(id string, i int) string { return localrun.DemoOrder(id, i).JSON() })
}

// measureWith runs p.Orders orders of def (body makes the i-th) whose
// services answer about resultBytes, at batch size batch.
func measureWith(ctx context.Context, p Plan, def workflow.Definition, batch, resultBytes int, body func(id string, i int) string) (Run, error) {
	wf := def.Name
	sim := remotesim.New(1)
	sim.SetFaults("", remotesim.Faults{NoResult: resultBytes == 0, ResultBytes: resultBytes})
	srv, err := sim.Start("127.0.0.1:0")
	if err != nil {
		return Run{}, err
	}
	defer srv.Close()
	meter := accounting.NewForDynamoDBLocal() // the state store is on DynamoDB Local, or LocalStack's
	logs := newLogMeter()                     // what the functions write, as CloudWatch Logs ingests it
	stack, err := localrun.New(ctx, localrun.Options{
		Endpoint: p.Endpoint, DynamoDBEndpoint: p.DynamoDBEndpoint, QueuesEndpoint: p.QueuesEndpoint, Meter: meter, BatchSize: batch,
		Prefix:    fmt.Sprintf("bench%d-%d", time.Now().UnixNano()%1e6, seq.Add(1)),
		Workflows: workflow.MustSet(def), RemoteURL: srv.URL,
		// Lambda polls each queue with at least five pollers; two are
		// enough here and keep the local batches full. The same for the
		// agents' queues: the simulator answers at once, so no agent batch
		// waits on a slow call.
		Pollers: 2, AgentPollers: 2, SupervisorEvery: time.Second, BatchWindow: p.BatchWindow,
		Log: logs.logger(), Metrics: logs, SealData: p.Seal,
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
		bodies[i] = body(ids[i], i)
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
	kept, err := keptBytes(ctx, stack)
	if err != nil {
		return Run{}, err
	}
	r := tally(p, def, batch, resultBytes, elapsed, meter.Snapshot(), stack.Stats.Snapshot(), sim.Stats().Calls, logs.snapshot(), kept)
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

// keptBytes is what the stack's payload bucket holds.
func keptBytes(ctx context.Context, stack *localrun.Stack) (int64, error) {
	bucket := stack.Resources.PayloadBucket
	var n int64
	pages := s3.NewListObjectsV2Paginator(stack.Deployment.Clients.S3, &s3.ListObjectsV2Input{Bucket: &bucket})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("list the payload bucket: %w", err)
		}
		for _, o := range page.Contents {
			n += aws.ToInt64(o.Size)
		}
	}
	return n, nil
}

func tally(p Plan, def workflow.Definition, batch, resultBytes int, elapsed time.Duration, counts map[accounting.Key]accounting.Usage,
	stats map[string]runner.FunctionStats, serviceCalls int, logs map[string]LogUse, kept int64) Run {
	r := Run{Workflow: def.Name, Steps: len(def.Steps), BatchSize: batch, ResultBytes: resultBytes, Orders: p.Orders, Seconds: elapsed.Seconds(),
		Requests: map[string]float64{}, Units: map[string]float64{}, Refused: map[string]float64{}}
	u := r.countRequests(counts, elapsed)
	u.S3KeptBytes = float64(kept) / float64(p.Orders)
	model := p.Lambda
	if model.Latency == nil {
		model = NominalLambda
	}
	fns := invocations(counts, stats, serviceCalls)
	r.priceBatchSends(&u, fns, model)
	agentSeconds, lighterGBs := r.countLambda(&u, fns, model, logs)
	// A payload's transfer to or from S3, priced at the larger memory
	// (Submission's and the Scheduler's), on top of what the model prices.
	if p.Prices.S3BytesPerSecond > 0 {
		u.LambdaGBSeconds += u.S3Bytes / p.Prices.S3BytesPerSecond * CoordinatorMemoryGB
	}
	r.PerOrder = u
	r.Cost = p.Prices.PerMillion(u)
	lighter := u
	lighter.LambdaGBSeconds = lighterGBs
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
		case "KMS":
			u.KMSRequests += float64(c.Requests) / n
		case "S3":
			switch k.Operation {
			case "PutObject", "CopyObject":
				u.S3Puts += float64(c.Requests) / n
			default:
				u.S3Gets += float64(c.Requests) / n
			}
			u.S3Bytes += float64(c.Bytes) / n
		case "DynamoDB":
			r.Units[k.Function+" "+k.Service+" "+k.Operation] += (c.ReadUnits + c.WriteUnits) / n
			if c.Refused > 0 {
				r.Refused[k.Function+" "+k.Service+" "+k.Operation] += float64(c.Refused) / n
			}
			u.ReadUnits += c.ReadUnits / n
			u.WriteUnits += c.WriteUnits / n
			u.ReportedWriteUnits += c.ReportedWriteUnits / n
			u.RefusedWriteUnits += c.RefusedUnits / n
		}
	}
	return u
}

// functionRun is one function's invocations in a run: what the model
// prices, and the handler time measured.
type functionRun struct {
	Invocation
	HandlerTime time.Duration
}

// invocations gathers each function's invocations, messages and handler
// time (stats), the requests its handlers made (counts, the event source
// mapping's apart), and the agents' service calls, shared out by their
// messages (the Supervisor apart).
func invocations(counts map[accounting.Key]accounting.Usage, stats map[string]runner.FunctionStats, serviceCalls int) map[string]functionRun {
	out := map[string]functionRun{}
	agentMsgs := 0
	for fn, s := range stats {
		if fn == "supervisor" {
			continue
		}
		out[fn] = functionRun{Invocation: Invocation{Invocations: s.Invocations, Messages: s.Messages, Requests: map[string]int64{}},
			HandlerTime: s.HandlerTime}
		if strings.HasPrefix(fn, "agent-") {
			agentMsgs += s.Messages
		}
	}
	for k, c := range counts {
		if f, ok := out[k.Function]; ok && !mappingOperations[k.Operation] {
			f.Requests[k.Service+" "+k.Operation] += c.Requests
		}
	}
	for fn, f := range out {
		if strings.HasPrefix(fn, "agent-") && agentMsgs > 0 {
			f.ServiceCalls = int(math.Round(float64(serviceCalls) * float64(f.Messages) / float64(agentMsgs)))
			out[fn] = f
		}
	}
	return out
}

// priceBatchSends prices each function's PerBatch requests as the model
// does (LambdaModel.BatchSends): those counted beyond it are in
// r.Unpriced, out of u and of fns.
func (r *Run) priceBatchSends(u *PerOrder, fns map[string]functionRun, model LambdaModel) {
	n := float64(r.Orders)
	for fn, f := range fns {
		memMB := topology.CoordinatorMemoryMB
		if strings.HasPrefix(fn, "agent-") {
			memMB = topology.AgentMemoryMB
		}
		for op := range model.PerBatch {
			counted := f.Requests[op]
			priced := model.BatchSends(fn, op, memMB, f.Invocation)
			if priced >= counted {
				continue
			}
			f.Requests[op] = priced
			if r.Unpriced == nil {
				r.Unpriced = map[string]float64{}
			}
			r.Unpriced[fn+" "+op] = float64(counted-priced) / n
			if strings.HasPrefix(op, "SQS ") {
				u.SQSRequests -= float64(counted-priced) / n
			}
		}
	}
}

// countLambda adds the functions' invocations, billed GB-seconds (priced
// by model) and log bytes per order to u, r.Functions and r.Logs. It
// returns the agents' billed seconds per order, and the GB-seconds per order
// were Submission and the Scheduler at 128 MB (their CPU work takes twice as
// long there).
func (r *Run) countLambda(u *PerOrder, fns map[string]functionRun, model LambdaModel,
	logs map[string]LogUse) (agentSeconds, coordinatorsAt128MB float64) {
	n := float64(r.Orders)
	var msgs, invocations int
	r.Functions = map[string]FunctionUse{}
	for fn, s := range fns {
		mem, memMB := CoordinatorMemoryGB, topology.CoordinatorMemoryMB
		if strings.HasPrefix(fn, "agent-") {
			mem, memMB = AgentMemoryGB, topology.AgentMemoryMB
		}
		billed := model.Billed(fn, memMB, s.Invocation).Seconds() * float64(s.Invocations)
		if strings.HasPrefix(fn, "agent-") {
			agentSeconds += billed / n
			coordinatorsAt128MB += billed * mem / n
		} else {
			coordinatorsAt128MB += model.Billed(fn, topology.AgentMemoryMB, s.Invocation).Seconds() * float64(s.Invocations) * AgentMemoryGB / n
		}
		l := asLambdaWrites(logs[fn], s.Invocations, memMB).per(n)
		r.Logs.add(l)
		u.LambdaInvocations += float64(s.Invocations) / n
		u.LambdaGBSeconds += billed * mem / n
		if s.Invocations > 0 {
			r.Functions[fn] = FunctionUse{InvocationsPerOrder: float64(s.Invocations) / n,
				MessagesPerInvocation: float64(s.Messages) / float64(s.Invocations),
				MsPerInvocation:       s.HandlerTime.Seconds() * 1000 / float64(s.Invocations),
				BilledMsPerInvocation: billed * 1000 / float64(s.Invocations),
				GBSecondsPerOrder:     billed * mem / n, Logs: l}
		}
		msgs += s.Messages
		invocations += s.Invocations
	}
	if invocations > 0 {
		r.MeanBatch = float64(msgs) / float64(invocations)
	}
	r.Logs.add(logs["other"].per(n)) // lines no function claims: counted, none expected
	u.LogBytes = r.Logs.Total()
	return agentSeconds, coordinatorsAt128MB
}
