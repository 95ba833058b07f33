package costbench

import (
	"maps"
	"math"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/devkit/accounting"
)

// LambdaModel prices a function's billed time from what its invocations did,
// not from the wall time measured against the local emulators: that time is
// the emulators' (slower than AWS's) and grows with the machine's load (on
// the project's 2-core machine a loaded run measured half as much again).
// Counted requests and messages do not move with the load, so neither does
// the time priced from them.
//
// An invocation's billed time, rounded up to the millisecond as Lambda
// bills it, is the sum of:
//   - its CPU work: each message's handler work (CPUPerMessage) and the SDK's
//     work for each AWS request (ClientCPUPerRequest), measured on one core
//     of this machine, stretched by the function's share of a vCPU (Lambda
//     gives a function CPU in proportion to its memory, one vCPU at
//     FullVCPUMemoryMB);
//   - what a message waits for, its requests one after another (the
//     messages of a batch run at once: sqsbatch): the mean requests of a
//     message, each at its Latency, and its service's answer
//     (ServiceLatency, for an Agent's call);
//   - the requests made once for the batch (PerBatch: the sends gathered at
//     the end), each at its Latency.
//
// Adding the waits to the CPU work, as if none overlapped, makes the sum an
// upper bound of the same requests' time in AWS.
type LambdaModel struct {
	// Latency is an AWS request's time in AWS as the handler waits for it,
	// by "Service Operation"; one not named takes DefaultLatency.
	Latency        map[string]time.Duration
	DefaultLatency time.Duration
	// PerBatch names the requests a handler makes once for its batch, by
	// "Service Operation": the others are a message's.
	PerBatch map[string]bool
	// CPUPerMessage is a handler's own work per message on one core, by
	// function kind ("submission", "scheduler", "agent"), as its quiet
	// benchmark measures it (docs/cost.md, Handler performance).
	CPUPerMessage map[string]time.Duration
	// ClientCPUPerRequest is the AWS SDK's work for one request on one
	// core (encode, sign, send, parse the answer), as
	// BenchmarkClientCPUPerRequest measures it.
	ClientCPUPerRequest time.Duration
	// ServiceLatency is an Agent's service's answer time (the bench's
	// simulator answers at once: 0). A deployment pays its services' own
	// time: 100 ms a call adds $0.17 per million calls at 128 MB.
	ServiceLatency time.Duration
	// Flushes are, by function kind, how often a handler sends its
	// batch's buffered messages while its records still run (the Agent's
	// replies every agent.ReplyFlush): an invocation that lasts longer
	// makes a PerBatch request more each time.
	Flushes map[string]time.Duration
}

// FullVCPUMemoryMB is the memory at which a Lambda function has the
// equivalent of one vCPU (AWS Lambda developer guide, "Configure Lambda
// function memory"); below it, its CPU is that share of one.
const FullVCPUMemoryMB = 1769

// NominalLambda is the model the bench prices Lambda time with. The
// latencies are at the top of what AWS states or was measured, so that the
// estimate errs high: DynamoDB answers a single-item request or a query in
// "single-digit milliseconds" (AWS), priced at 10 ms, and a transaction,
// which prepares and then commits, at twice that; an SQS send and an SNS
// publish at 20 ms, above the 16.2 ms median of a whole SQS hop from a
// producing Lambda function to the consuming one measured in eu-west-1
// (bitesizedserverless.com, "Serverless Messaging: Latency Compared").
// The CPU figures are the benchmarks' CPU time (cpu-ns/msg, cpu-ns/op) on
// the project's 2-core machine, rounded up: `go test -run '^$' -bench
// 'PerMessage|ClientCPUPerRequest' -benchtime 3000x ./shared/submission
// ./shared/scheduler ./shared/agent ./shared/devkit/costbench` measured
// 26.5-28.4, 11.8-14.7 and 13.5 µs a message, and 107-108 µs a request;
// the same with the machine loaded, 31-34, 14-22, 18 and 109-119.
var NominalLambda = LambdaModel{
	Latency: map[string]time.Duration{
		"DynamoDB GetItem": 10 * time.Millisecond, "DynamoDB PutItem": 10 * time.Millisecond,
		"DynamoDB UpdateItem": 10 * time.Millisecond, "DynamoDB DeleteItem": 10 * time.Millisecond,
		"DynamoDB Query": 10 * time.Millisecond, "DynamoDB BatchGetItem": 10 * time.Millisecond,
		"DynamoDB TransactWriteItems": 20 * time.Millisecond, "DynamoDB TransactGetItems": 20 * time.Millisecond,
		"SQS SendMessageBatch": 20 * time.Millisecond, "SQS SendMessage": 20 * time.Millisecond,
		"SQS ChangeMessageVisibility": 20 * time.Millisecond, "SNS Publish": 20 * time.Millisecond,
	},
	DefaultLatency: 20 * time.Millisecond,
	PerBatch:       map[string]bool{"SQS SendMessageBatch": true},
	Flushes:        map[string]time.Duration{"agent": agent.ReplyFlush},
	CPUPerMessage: map[string]time.Duration{
		"submission": 30 * time.Microsecond, "scheduler": 15 * time.Microsecond, "agent": 15 * time.Microsecond,
	},
	ClientCPUPerRequest: 110 * time.Microsecond,
}

// mappingOperations are the requests Lambda's event source mapping makes for
// a function (its pollers' receives and deletes): counted in SQS, not in the
// function's time.
var mappingOperations = map[string]bool{"ReceiveMessage": true, "DeleteMessageBatch": true, accounting.EmptyReceive: true}

// kindOf is a function's kind, for CPUPerMessage: "agent" for every agent.
func kindOf(function string) string {
	if strings.HasPrefix(function, "agent-") {
		return "agent"
	}
	return function
}

// Invocation is what one function's invocations did in a run.
type Invocation struct {
	Invocations, Messages int
	// Requests are the AWS requests its handlers made, by "Service
	// Operation" (the event source mapping's own apart).
	Requests map[string]int64
	// ServiceCalls are the calls to its agent's service (none for the
	// coordinators).
	ServiceCalls int
}

// BatchSends are the PerBatch requests op (a "Service Operation") of
// function's invocations that the model prices: one per invocation, and one
// more each Flushes interval its billed time lasts; never more than
// counted. Against the emulators an invocation lasts several times what it
// would in AWS, so a handler that flushes as it goes (an Agent's replies,
// every 250 ms) makes more of them than it would there, and more the more
// the machine is loaded.
func (m LambdaModel) BatchSends(function, op string, memoryMB int, u Invocation) int64 {
	counted := u.Requests[op]
	every, flushes := m.Flushes[kindOf(function)]
	if !flushes || !m.PerBatch[op] || u.Invocations == 0 {
		return counted
	}
	once := u
	once.Requests = maps.Clone(u.Requests)
	once.Requests[op] = min(counted, int64(u.Invocations)) // what an invocation sends at its end
	billed := m.Billed(function, memoryMB, once)
	perInvocation := 1 + int64(billed/every)
	return min(counted, int64(u.Invocations)*perInvocation)
}

// Billed is one invocation's billed time, in whole milliseconds, for a
// function named function of memoryMB whose invocations did u (its
// PerBatch requests as BatchSends prices them).
func (m LambdaModel) Billed(function string, memoryMB int, u Invocation) time.Duration {
	if u.Invocations == 0 {
		return 0
	}
	inv, msgs := float64(u.Invocations), float64(max(u.Messages, 1))
	var requests int64
	var wait float64 // seconds, per invocation
	for op, n := range u.Requests {
		requests += n
		lat := m.DefaultLatency
		if l, ok := m.Latency[op]; ok {
			lat = l
		}
		if m.PerBatch[op] {
			wait += lat.Seconds() * float64(n) / inv
		} else {
			wait += lat.Seconds() * float64(n) / msgs
		}
	}
	wait += m.ServiceLatency.Seconds() * float64(u.ServiceCalls) / msgs
	cpu := float64(u.Messages)*m.CPUPerMessage[kindOf(function)].Seconds() + float64(requests)*m.ClientCPUPerRequest.Seconds()
	cpu *= float64(FullVCPUMemoryMB) / float64(memoryMB) / inv
	ms := math.Ceil((cpu + wait) * 1000)
	return time.Duration(ms) * time.Millisecond
}
