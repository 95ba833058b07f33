package handlerbench_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/handlerbench"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

var motoURL, ddbURL string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMotoAndDynamoDBLocal(m, &motoURL, &ddbURL)) }

// BenchmarkThroughput measures each handler's messages per second and
// GB-s per message for one instance (one invocation at a time, batches of
// ten), on moto's SQS and DynamoDB Local, with the three-step order
// workflow and a remote service that answers at once: every request the
// handler makes is real, to the local engines (slower than AWS's, so the
// figures are a floor of throughput). Each batch is what the handler
// upstream sent, read from its queue; the upstream work is not timed. The
// Supervisor's message is an order looked at: one sweep over due orders.
//
//	go test -run '^$' -bench Throughput -benchtime 20x ./shared/devkit/handlerbench
//
// handlerbench.ReadFigures reads the output.
func BenchmarkThroughput(b *testing.B) {
	orders := func(b *testing.B, p *pipeline) []events.SQSEvent { return p.orders(b.N) }
	requests := func(b *testing.B, p *pipeline) []events.SQSEvent {
		p.run(b, p.submission, p.orders(b.N))
		return p.drain(b, p.requests, 10*b.N)
	}
	replies := func(b *testing.B, p *pipeline) []events.SQSEvent {
		p.run(b, p.agent, requests(b, p))
		return p.drain(b, p.replies, 10*b.N)
	}
	b.Run("submission", stage(topology.CoordinatorMemoryMB, orders, func(p *pipeline) handlerbench.Handler { return p.submission }))
	b.Run("agent", stage(topology.AgentMemoryMB, requests, func(p *pipeline) handlerbench.Handler { return p.agent }))
	b.Run("scheduler", stage(topology.CoordinatorMemoryMB, replies, func(p *pipeline) handlerbench.Handler { return p.scheduler }))
	b.Run("supervisor", func(b *testing.B) {
		p := newPipeline(b)
		n := p.dueOrders(b, 100*b.N)
		cfg, deps := p.stack.Deployment.SupervisorParts("bench")
		cfg.TimeBudget = 10 * time.Minute // one sweep reads them all
		s := supervisor.New(cfg, deps)
		s.Now = func() time.Time { return time.Now().Add(time.Hour) }
		b.ResetTimer()
		rep, err := s.Sweep(context.Background())
		if err != nil || rep.Orders != n {
			b.Fatalf("sweep: %v, %d of %d orders looked at", err, rep.Orders, n)
		}
		handlerbench.Report(b, n, topology.CoordinatorMemoryMB)
	})
}

// stage times a handler of a function of memoryMB over b.N batches, each what
// upstream sent it (untimed).
func stage(memoryMB int, upstream func(*testing.B, *pipeline) []events.SQSEvent,
	handler func(*pipeline) handlerbench.Handler) func(*testing.B) {
	return func(b *testing.B) {
		p := newPipeline(b)
		batches := upstream(b, p)
		b.ResetTimer()
		p.run(b, handler(p), batches)
		handlerbench.Report(b, 10*b.N, memoryMB)
	}
}

var seq atomic.Int64

// pipeline is a local stack's handlers, called directly; its queues are
// read by the benchmark, not by a runner.
type pipeline struct {
	stack             *localrun.Stack
	submission, agent handlerbench.Handler
	scheduler         handlerbench.Handler
	requests, replies string
}

func newPipeline(b *testing.B) *pipeline {
	b.Helper()
	sim := remotesim.New(1)
	sim.SetFaults("", remotesim.Faults{NoResult: true})
	srv, err := sim.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	ctx := context.Background()
	stack, err := localrun.New(ctx, localrun.Options{Endpoint: motoURL, DynamoDBEndpoint: ddbURL, RemoteURL: srv.URL,
		Prefix: fmt.Sprintf("tp%d-%d", time.Now().UnixNano()%1e6, seq.Add(1)), DeadlineShards: 4})
	if err != nil {
		b.Fatal(err)
	}
	d, t := stack.Deployment, stack.Topology()
	sub, err := d.Submission()
	if err != nil {
		b.Fatal(err)
	}
	sched, err := d.Scheduler()
	if err != nil {
		b.Fatal(err)
	}
	first := workflow.Orders(workflow.Settings{}).Steps[0].Agent
	agent, err := d.Agent(ctx, first, deployment.InstanceID())
	if err != nil {
		b.Fatal(err)
	}
	return &pipeline{stack: stack, submission: sub.Handle, agent: agent.Handle, scheduler: sched.Handle,
		requests: stack.QueueURL(t.AgentRequests(first).Name), replies: stack.QueueURL(t.AgentResponses(first).Name)}
}

// orders are n batches of ten new orders, as the orders queue delivers them.
func (p *pipeline) orders(n int) []events.SQSEvent {
	out := make([]events.SQSEvent, n)
	for i := range out {
		var bodies []string
		for j := range 10 {
			id := fmt.Sprintf("tp-%d-%d-%d", seq.Add(1), i, j)
			bodies = append(bodies, localrun.DemoOrder(id, j).JSON())
		}
		out[i] = handlerbench.Batch(bodies...)
	}
	return out
}

// run invokes h with each batch in turn, one at a time, as one instance.
func (p *pipeline) run(b *testing.B, h handlerbench.Handler, batches []events.SQSEvent) {
	b.Helper()
	for _, ev := range batches {
		resp, err := h(context.Background(), ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			b.Fatalf("handle: %v %v", err, resp.BatchItemFailures)
		}
	}
}

// drain reads n messages from the queue (hiding them for ten minutes) and
// returns them as batches of ten, with the attributes Lambda passes on.
func (p *pipeline) drain(b *testing.B, url string, n int) []events.SQSEvent {
	b.Helper()
	api := p.stack.Deployment.Clients.SQS
	var msgs []types.Message
	for deadline := time.Now().Add(time.Minute); len(msgs) < n; {
		if time.Now().After(deadline) {
			b.Fatalf("%s: %d of %d messages", url, len(msgs), n)
		}
		out, err := api.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 600,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, out.Messages...)
	}
	var batches []events.SQSEvent
	for start := 0; start < n; start += 10 {
		var ev events.SQSEvent
		for _, m := range msgs[start:min(start+10, n)] {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId),
				Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs"})
		}
		batches = append(batches, ev)
	}
	return batches
}

// dueOrders stores n orders of the order workflow whose first step was
// claimed an hour and a half ago (overdue at the Supervisor's clock, an
// hour ahead) and returns n.
func (p *pipeline) dueOrders(b *testing.B, n int) int {
	b.Helper()
	ctx := context.Background()
	s, def := p.stack.Store, workflow.Orders(workflow.Settings{})
	t0 := time.Now().Add(-30 * time.Minute)
	for i := range n {
		id := fmt.Sprintf("due-%d-%d", seq.Add(1), i)
		if _, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: localrun.DemoOrder(id, i).JSON(), Workflow: def, Now: t0}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Claim(ctx, statestore.Claim{OrderID: id, Ref: workflow.Ref{}, Agent: def.Steps[0].Agent, Owner: "bench", Now: t0}); err != nil {
			b.Fatal(err)
		}
	}
	return n
}
