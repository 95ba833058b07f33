// Package topology is the one description of the deployment's resources:
// table, index, queue and topic names, which queues pair with which consumer,
// and their timeouts. The local provisioner and the CDK stack both read it, so
// what runs locally and what is deployed cannot drift.
package topology

import (
	"fmt"
	"strings"
	"time"
)

// DeadlineIndex is the sparse, keys-only global secondary index of the state
// table: only orders with work in flight or an alert unconfirmed carry its
// keys, DueShard and DueAt (when the Supervisor must look next).
const DeadlineIndex = "Deadlines"

// EndIndex is the sparse, keys-only global secondary index of the state
// table's orders that ended other than Processed (Failed,
// CompensationFailed, Cancelled): keyed EndPartition(state, shard) and
// KeyEndedAt, when it ended. A search of ended orders by state and end time
// reads the orders of that state ended in that time, not the table; the
// happy path (Processed) writes no entry.
const EndIndex = "Ends"

// Attribute names of the tables' keys.
const (
	KeyOrderID  = "OrderID"
	KeySort     = "SK"
	KeyDueShard = "DueShard"
	KeyDueAt    = "DueAt"
	// KeyEndShard and KeyEndedAt are the end index's keys: the state an
	// order ended in and its shard (EndPartition), and when it ended (Unix
	// ms: the state item's own end time).
	KeyEndShard = "EndShard"
	KeyEndedAt  = "E"
	// KeyExpires is the attribute both tables' time to live reads: when an
	// ended order may be deleted, in Unix seconds.
	KeyExpires = "Exp"
)

// The deadline index's capacity: a partition of a global secondary index
// takes about PartitionWritesPerSecond write units a second, an order writes
// its entry IndexWritesPerOrder times on the happy path (entering the index,
// leaving it), and a deployment has at most MaxDeadlineShards partition keys.
const (
	PartitionWritesPerSecond = 1000
	IndexWritesPerOrder      = 2
	MaxDeadlineShards        = 256
)

// EndPartition is the end index's partition key of the orders that ended
// in state, in shard (one of the deadline index's: DeadlineShards).
func EndPartition(state string, shard string) string { return state + "#" + shard }

// ShardsFor is the deadline index's shards for rate orders a second with
// headroom: each shard at most half a partition's writes.
func ShardsFor(rate int) int {
	per := PartitionWritesPerSecond / 2 / IndexWritesPerOrder // orders a second a shard takes at half
	return min(max((rate+per-1)/per, 1), MaxDeadlineShards)
}

// Consumer names the function that reads a queue.
type Consumer string

// The product's functions.
const (
	Submission Consumer = "submission"
	Scheduler  Consumer = "scheduler"
	Agent      Consumer = "agent"
	Supervisor Consumer = "supervisor"
)

// The queues' sizes (SQS's MaximumMessageSize: a message's body and its
// attributes' names, types and values).
const (
	// MaxMessageBytes is the largest message a work queue takes: SQS's
	// classic bound, within which the product keeps every message it sends
	// (a larger payload travels as its claim check, a larger order or event
	// by pointer: offload.MaxMessageBytes).
	MaxMessageBytes = 256 << 10
	// DLQMaxMessageBytes is the largest a dead-letter queue takes: SQS's
	// largest (1 MiB since 2025), so that a message refused there as its
	// queue took it, with its RejectReason and SourceQueue beside it
	// (queue.Sender.Reject), always fits, and SQS's own redrive too.
	DLQMaxMessageBytes = 1 << 20
)

// Queue is a work queue and its dead-letter queue.
type Queue struct {
	Name              string
	DLQName           string
	Consumer          Consumer
	Agent             string // for agent queues: which agent
	VisibilityTimeout time.Duration
	MaxReceiveCount   int
	// MaxMessageBytes and DLQMaxMessageBytes are the queue's and its
	// DLQ's MaximumMessageSize.
	MaxMessageBytes, DLQMaxMessageBytes int
}

// Function memory sizes (MB). The handlers are I/O-bound Go: 256 MB buys the
// CPU share that keeps the DynamoDB and SQS calls of Submission, Scheduler and
// Supervisor quick; Agents mostly wait on the remote service. The stack sets
// them; the cost bench prices handler time with them.
const (
	CoordinatorMemoryMB = 256
	AgentMemoryMB       = 128
)

// Topology describes one deployment.
type Topology struct {
	Prefix            string        // prepended to every name
	Agents            []string      // one request/response queue pair each
	DeadlineShards    int           // partitions of the deadline index
	FunctionTimeout   time.Duration // each queue-driven function's timeout
	VisibilityTimeout time.Duration // 0: six times FunctionTimeout
	MaxReceiveCount   int           // receives before SQS moves a message to its DLQ
	// BatchWindow is every event source mapping's batching window
	// (MaximumBatchingWindowInSeconds: whole seconds, at most 5 minutes):
	// Lambda waits up to this long to fill a batch of 10 before it invokes.
	// Fuller batches cost fewer invocations and SQS requests; each hop can
	// wait this long when traffic is light. Zero invokes at once.
	BatchWindow time.Duration
}

// DefaultBatchWindow is the batching window a deployment has unless
// configured: a second per hop, for batches about half as many (see the
// README's Cost section).
const DefaultBatchWindow = time.Second

// DefaultPrefix names a deployment's resources when nothing else does.
const DefaultPrefix = "sas"

// CheckBatchWindow says why d cannot be a batching window: Lambda takes
// whole seconds from 0 to 5 minutes.
func CheckBatchWindow(d time.Duration) error {
	if d < 0 || d > 5*time.Minute || d%time.Second != 0 {
		return fmt.Errorf("%s is not whole seconds from 0 to 5m", d)
	}
	return nil
}

// Default returns the topology used when nothing is configured.
func Default(prefix string, agents ...string) Topology {
	return Topology{
		Prefix:          prefix,
		Agents:          agents,
		DeadlineShards:  4,
		FunctionTimeout: 30 * time.Second,
		MaxReceiveCount: 5,
		BatchWindow:     DefaultBatchWindow,
	}
}

// Validate checks the description is usable.
func (t Topology) Validate() error {
	switch {
	case t.Prefix == "":
		return fmt.Errorf("topology: empty prefix")
	case len(t.Agents) == 0:
		return fmt.Errorf("topology: no agents")
	case t.DeadlineShards < 1:
		return fmt.Errorf("topology: deadline shards must be >= 1")
	case t.FunctionTimeout <= 0:
		return fmt.Errorf("topology: function timeout must be positive")
	case t.MaxReceiveCount < 1:
		return fmt.Errorf("topology: max receive count must be >= 1")
	case CheckBatchWindow(t.BatchWindow) != nil:
		return fmt.Errorf("topology: batch window %w", CheckBatchWindow(t.BatchWindow))
	}
	return nil
}

// OrdersTable holds orders as submitted, keyed by OrderID.
func (t Topology) OrdersTable() string { return t.Prefix + "-orders" }

// StateTable is the state store: task and step records.
func (t Topology) StateTable() string { return t.Prefix + "-state" }

// AlertTopic receives a per-order failure event for every Error.
func (t Topology) AlertTopic() string { return t.Prefix + "-alerts" }

// PayloadBucket is the local stack's payload bucket (shared/payload),
// lower-cased as S3 wants; a deployed stack's is named by CloudFormation and
// given to its functions (deployment.EnvPayloadBucket).
func (t Topology) PayloadBucket() string { return strings.ToLower(t.Prefix) + "-payloads" }

// AlertInbox is a queue subscribed to the alert topic, where an operator
// (the console, a test) reads the alerts sent.
func (t Topology) AlertInbox() string { return t.Prefix + "-alerts-inbox" }

func (t Topology) queue(name string, c Consumer, agent string) Queue {
	vis := t.VisibilityTimeout
	if vis == 0 {
		vis = 6 * t.FunctionTimeout
	}
	n := t.Prefix + "-" + name
	return Queue{Name: n, DLQName: n + "-dlq", Consumer: c, Agent: agent,
		VisibilityTimeout: vis, MaxReceiveCount: t.MaxReceiveCount,
		MaxMessageBytes: MaxMessageBytes, DLQMaxMessageBytes: DLQMaxMessageBytes}
}

// OrdersQueue is where clients send orders; Submission reads it.
func (t Topology) OrdersQueue() Queue { return t.queue("orders", Submission, "") }

// EventsQueue is where services and operators send events and async
// callbacks ({"kind":"event",...}); Submission reads it. It has its own
// grant, so a submitter of orders cannot send an order's approval, and its
// own pollers, so an event never waits behind a burst of orders.
func (t Topology) EventsQueue() Queue { return t.queue("events", Submission, "") }

// SchedulerQueue carries work to start; the Scheduler reads it.
func (t Topology) SchedulerQueue() Queue { return t.queue("scheduler", Scheduler, "") }

// AgentRequests carries the Scheduler's requests to one Agent.
func (t Topology) AgentRequests(agent string) Queue {
	return t.queue("agent-"+agent+"-requests", Agent, agent)
}

// AgentResponses carries one Agent's replies; the Scheduler reads it.
func (t Topology) AgentResponses(agent string) Queue {
	return t.queue("agent-"+agent+"-responses", Scheduler, agent)
}

// Queues lists every queue of the deployment.
func (t Topology) Queues() []Queue {
	qs := []Queue{t.OrdersQueue(), t.EventsQueue(), t.SchedulerQueue()}
	for _, a := range t.Agents {
		qs = append(qs, t.AgentRequests(a), t.AgentResponses(a))
	}
	return qs
}
