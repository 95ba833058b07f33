// Package statestore is the DynamoDB state store: the orders table and the
// task and step records, with the conditional writes that implement the
// pattern's claim, fencing and recovery rules.
package statestore

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Task is the record of one order's whole operation.
type Task struct {
	OrderID     string
	Workflow    string
	State       workflow.State
	StepCount   int
	LastError   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time // zero until the task ends
}

// Step is the record of one step of one order.
type Step struct {
	OrderID      string
	Index        int
	Name         string
	Agent        string
	Timeout      time.Duration
	MaxFailures  int
	RetryBackoff time.Duration
	State        workflow.State
	Attempt      int
	FailureCount int
	LockedBy     string
	CompleteBy   time.Time // zero when not claimed
	DueAt        time.Time // zero when no work is due (not in the deadline index)
	LastError    string
	Payload      string // the order, as the Agent receives it
	Alerted      bool
	Version      int // incremented by every write; the supervisor's fence
	UpdatedAt    time.Time
}

// Definition is the workflow step this record runs.
func (s Step) Definition() workflow.Step {
	return workflow.Step{Name: s.Name, Agent: s.Agent, Timeout: s.Timeout,
		MaxFailures: s.MaxFailures, RetryBackoff: s.RetryBackoff}
}

// Key identifies the record in log lines.
func (s Step) Key() string { return fmt.Sprintf("%s/%d(%s)", s.OrderID, s.Index, s.Name) }

// taskItem and stepItem are the records as stored; times are Unix milliseconds.
type taskItem struct {
	OrderID      string `dynamodbav:"OrderID"`
	SK           string `dynamodbav:"SK"`
	Workflow     string `dynamodbav:"Workflow"`
	ProcessState string `dynamodbav:"ProcessState"`
	StepCount    int    `dynamodbav:"StepCount"`
	LastError    string `dynamodbav:"LastError,omitempty"`
	CreatedAt    int64  `dynamodbav:"CreatedAt"`
	UpdatedAt    int64  `dynamodbav:"UpdatedAt"`
	CompletedAt  int64  `dynamodbav:"CompletedAt,omitempty"`
}

type stepItem struct {
	OrderID        string `dynamodbav:"OrderID"`
	SK             string `dynamodbav:"SK"`
	StepIndex      int    `dynamodbav:"StepIndex"`
	StepName       string `dynamodbav:"StepName"`
	Agent          string `dynamodbav:"Agent"`
	TimeoutMs      int64  `dynamodbav:"TimeoutMs"`
	MaxFailures    int    `dynamodbav:"MaxFailures"`
	RetryBackoffMs int64  `dynamodbav:"RetryBackoffMs"`
	ProcessState   string `dynamodbav:"ProcessState"`
	Attempt        int    `dynamodbav:"Attempt"`
	FailureCount   int    `dynamodbav:"FailureCount"`
	LockedBy       string `dynamodbav:"LockedBy,omitempty"`
	CompleteBy     int64  `dynamodbav:"CompleteBy,omitempty"`
	DueShard       string `dynamodbav:"DueShard,omitempty"`
	DueAt          int64  `dynamodbav:"DueAt,omitempty"`
	LastError      string `dynamodbav:"LastError,omitempty"`
	Payload        string `dynamodbav:"Payload,omitempty"`
	Alerted        bool   `dynamodbav:"Alerted,omitempty"`
	Version        int    `dynamodbav:"Version"`
	CreatedAt      int64  `dynamodbav:"CreatedAt"`
	UpdatedAt      int64  `dynamodbav:"UpdatedAt"`
}

const taskSK = "TASK"

func stepSK(i int) string { return fmt.Sprintf("STEP#%03d", i) }

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

func (it taskItem) task() Task {
	return Task{OrderID: it.OrderID, Workflow: it.Workflow, State: workflow.State(it.ProcessState),
		StepCount: it.StepCount, LastError: it.LastError, CreatedAt: fromMs(it.CreatedAt),
		UpdatedAt: fromMs(it.UpdatedAt), CompletedAt: fromMs(it.CompletedAt)}
}

func (it stepItem) step() Step {
	return Step{OrderID: it.OrderID, Index: it.StepIndex, Name: it.StepName, Agent: it.Agent,
		Timeout: time.Duration(it.TimeoutMs) * time.Millisecond, MaxFailures: it.MaxFailures,
		RetryBackoff: time.Duration(it.RetryBackoffMs) * time.Millisecond,
		State:        workflow.State(it.ProcessState), Attempt: it.Attempt, FailureCount: it.FailureCount,
		LockedBy: it.LockedBy, CompleteBy: fromMs(it.CompleteBy), DueAt: fromMs(it.DueAt),
		LastError: it.LastError, Payload: it.Payload, Alerted: it.Alerted, Version: it.Version,
		UpdatedAt: fromMs(it.UpdatedAt)}
}

// shardOf spreads deadline-index entries over n partitions.
func shardOf(orderID string, step, n int) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", orderID, step)
	return fmt.Sprint(h.Sum32() % uint32(n))
}
