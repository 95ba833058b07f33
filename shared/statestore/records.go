// Package statestore is the DynamoDB state store: the orders table and the
// task and step records, with the conditional writes that implement the
// pattern's claim, fencing and recovery rules.
package statestore

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Task is the record of one order's whole operation.
type Task struct {
	OrderID     string
	Workflow    string
	State       workflow.State
	StepCount   int
	Round       int    // 1, then one more for each resubmission of a failed task
	ReplyQueue  string // where status notifications go, if anywhere
	LastError   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time // zero until the task ends
}

// Step is the record of one step of one order, or of a step's undo action.
type Step struct {
	OrderID      string
	Index        int  // the step's position in the workflow
	Undo         bool // this is the undo action of step Index
	UndoFrom     int  // for a step: the undo to start if it fails for good (-1: none)
	HasUndo      bool // for a step: it has an undo action (run too if it times out for good)
	Round        int
	ReplyQueue   string
	Name         string
	Agent        string
	Timeout      time.Duration
	MaxFailures  int
	RetryBackoff time.Duration
	State        workflow.State
	Attempt      int
	FailureCount int
	LockedBy     string
	CompleteBy   time.Time      // zero when not claimed
	DueAt        time.Time      // the record's deadline: zero when no work of it is due
	ReadyAt      time.Time      // when it was last made ready (queue wait runs from here to its claim)
	Waits        int            // times the Supervisor found it waiting (unclaimed, or its reply queued) in this state
	Cause        workflow.Cause // why it is in Error
	// Deadline is the order's deadline while the task runs its steps, and
	// its compensation's once it compensates; zero for a record the task's
	// phase does not run.
	Deadline  time.Time
	LastError string
	Payload   string // the order, as the Agent receives it
	Alerted   bool
	Version   int // the order's state item's, incremented by every write: the supervisor's fence
	ClaimedAt time.Time
	UpdatedAt time.Time
	Events    []string // the record's history, oldest first: "RFC3339 event"

	othersDue int64 // when the order's other records, and its deadline, are due (0: never): a write's index floor
}

// Definition is the action this record runs.
func (s Step) Definition() workflow.Action {
	return workflow.Action{Name: s.Name, Agent: s.Agent, Timeout: s.Timeout,
		MaxFailures: s.MaxFailures, RetryBackoff: s.RetryBackoff}
}

// GaveUp reports whether the Supervisor gave up on this record (its attempts
// timed out, or the order's deadline passed), as opposed to its remote
// refusing it.
func (s Step) GaveUp() bool { return s.State == workflow.Error && s.Cause.GaveUp() }

// AfterGiveUp is what follows giving up on this record after it timed out
// (workflow.AfterGiveUp): for a step with an undo, its own undo first; for a
// step without one that ran, nothing is undone and the operator decides.
func (s Step) AfterGiveUp() workflow.Aftermath {
	return workflow.AfterGiveUp(s.Undo, s.HasUndo, s.Attempt > 0, s.Index, s.UndoFrom)
}

// AfterError is what followed this Error record's failure, read back from the
// record (for an alert sent late): a give-up or a refusal.
func (s Step) AfterError() workflow.Aftermath {
	if s.GaveUp() {
		return s.AfterGiveUp()
	}
	return workflow.AfterRefusal(s.Undo, s.UndoFrom)
}

// Ref names the record within its task.
func (s Step) Ref() workflow.Ref { return workflow.Ref{Index: s.Index, Undo: s.Undo} }

// Key identifies the record in log lines.
func (s Step) Key() string { return fmt.Sprintf("%s/%s(%s)", s.OrderID, sortKey(s.Ref()), s.Name) }

// stateItem is an order's live state as stored: ONE item per order, the task
// with its records (steps and undo actions) inside, so that a step's
// transition and the task's are one conditional write. Times are Unix
// milliseconds. DueShard and DueAt are the order's key in the sparse deadline
// index: when the Supervisor must look next (see Overdue).
type stateItem struct {
	OrderID      string             `dynamodbav:"OrderID"`
	SK           string             `dynamodbav:"SK"`
	Workflow     string             `dynamodbav:"Workflow"`
	ProcessState string             `dynamodbav:"ProcessState"`
	StepCount    int                `dynamodbav:"StepCount"`
	Round        int                `dynamodbav:"Round"`
	ReplyQueue   string             `dynamodbav:"ReplyQueue,omitempty"`
	LastError    string             `dynamodbav:"LastError,omitempty"`
	Payload      string             `dynamodbav:"Payload,omitempty"`
	Version      int                `dynamodbav:"Version"`
	DueShard     string             `dynamodbav:"DueShard,omitempty"`
	DueAt        int64              `dynamodbav:"DueAt,omitempty"`
	DeadlineAt   int64              `dynamodbav:"DeadlineAt,omitempty"`          // the round's deadline
	DeadlineMs   int64              `dynamodbav:"DeadlineMs,omitempty"`          // the workflow's order deadline, for later rounds
	Unalerted    []string           `dynamodbav:"Unalerted,stringset,omitempty"` // records in Error not yet alerted
	CreatedAt    int64              `dynamodbav:"CreatedAt"`
	UpdatedAt    int64              `dynamodbav:"UpdatedAt"`
	CompletedAt  int64              `dynamodbav:"CompletedAt,omitempty"`
	Recs         map[string]recItem `dynamodbav:"Recs"` // by sortKey
}

// recItem is one record inside the state item.
type recItem struct {
	StepIndex      int      `dynamodbav:"StepIndex"`
	Undo           bool     `dynamodbav:"Undo,omitempty"`
	UndoFrom       int      `dynamodbav:"UndoFrom"`
	HasUndo        bool     `dynamodbav:"HasUndo,omitempty"`
	Round          int      `dynamodbav:"Round"`
	StepName       string   `dynamodbav:"StepName"`
	Agent          string   `dynamodbav:"Agent"`
	TimeoutMs      int64    `dynamodbav:"TimeoutMs"`
	MaxFailures    int      `dynamodbav:"MaxFailures"`
	RetryBackoffMs int64    `dynamodbav:"RetryBackoffMs"`
	ProcessState   string   `dynamodbav:"ProcessState"`
	Attempt        int      `dynamodbav:"Attempt"`
	FailureCount   int      `dynamodbav:"FailureCount"`
	LockedBy       string   `dynamodbav:"LockedBy,omitempty"`
	CompleteBy     int64    `dynamodbav:"CompleteBy,omitempty"`
	DueAt          int64    `dynamodbav:"DueAt,omitempty"` // the record's own deadline
	ReadyAt        int64    `dynamodbav:"ReadyAt,omitempty"`
	Waits          int      `dynamodbav:"Waits,omitempty"`
	Cause          string   `dynamodbav:"Cause,omitempty"`
	LastError      string   `dynamodbav:"LastError,omitempty"`
	StepResult     string   `dynamodbav:"StepResult,omitempty"`
	Alerted        bool     `dynamodbav:"Alerted,omitempty"`
	ClaimedAt      int64    `dynamodbav:"ClaimedAt,omitempty"`
	UpdatedAt      int64    `dynamodbav:"UpdatedAt,omitempty"`
	Events         []string `dynamodbav:"Events,omitempty"`
}

const taskSK = "TASK"

// sortKey is a record's SK: STEP#000 for a step, UNDO#000 for its undo action.
func sortKey(r workflow.Ref) string {
	if r.Undo {
		return fmt.Sprintf("UNDO#%03d", r.Index)
	}
	return fmt.Sprintf("STEP#%03d", r.Index)
}

// event is one line of a record's history.
func event(now time.Time, format string, args ...any) string {
	return now.UTC().Format(time.RFC3339Nano) + " " + fmt.Sprintf(format, args...)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

func (it stateItem) task() Task {
	return Task{OrderID: it.OrderID, Workflow: it.Workflow, State: workflow.State(it.ProcessState),
		StepCount: it.StepCount, Round: it.Round, ReplyQueue: it.ReplyQueue, LastError: it.LastError, CreatedAt: fromMs(it.CreatedAt),
		UpdatedAt: fromMs(it.UpdatedAt), CompletedAt: fromMs(it.CompletedAt)}
}

// step is the record named sk as a Step; Version is the item's.
func (it stateItem) step(sk string) Step {
	r := it.Recs[sk]
	var deadline time.Time
	if it.deadlineCovers(r) {
		deadline = fromMs(it.DeadlineAt)
	}
	return Step{Deadline: deadline, ReadyAt: fromMs(r.ReadyAt), Waits: r.Waits, Cause: workflow.Cause(r.Cause),
		othersDue: it.dueBesides(sk), OrderID: it.OrderID, Index: r.StepIndex, Undo: r.Undo, UndoFrom: r.UndoFrom, HasUndo: r.HasUndo, Round: r.Round,
		ReplyQueue: it.ReplyQueue, Name: r.StepName, Agent: r.Agent,
		Timeout: time.Duration(r.TimeoutMs) * time.Millisecond, MaxFailures: r.MaxFailures,
		RetryBackoff: time.Duration(r.RetryBackoffMs) * time.Millisecond,
		State:        workflow.State(r.ProcessState), Attempt: r.Attempt, FailureCount: r.FailureCount,
		LockedBy: r.LockedBy, CompleteBy: fromMs(r.CompleteBy), DueAt: fromMs(r.DueAt),
		LastError: r.LastError, Payload: it.Payload, Alerted: r.Alerted, Version: it.Version,
		ClaimedAt: fromMs(r.ClaimedAt), UpdatedAt: fromMs(r.UpdatedAt), Events: r.Events}
}

// steps are the item's records, steps first then undo actions, each by index.
func (it stateItem) steps() []Step {
	out := make([]Step, 0, len(it.Recs))
	for sk := range it.Recs {
		out = append(out, it.step(sk))
	}
	slices.SortFunc(out, func(a, b Step) int { return strings.Compare(sortKey(a.Ref()), sortKey(b.Ref())) })
	return out
}

// nextDue is when the Supervisor must look at the order next: its records'
// earliest deadline, or the order's deadline while it runs forward (zero:
// never).
func (it stateItem) nextDue() int64 { return it.dueBesides("") }

// deadlineCovers reports whether the order's deadline bounds record r: a
// step while the task runs forward, an undo action while it compensates.
func (it stateItem) deadlineCovers(r recItem) bool {
	return it.ProcessState == string(taskFrom(workflow.Ref{Undo: r.Undo}))
}

// dueBesides is nextDue leaving record sk out. The order's deadline counts
// while a record it covers is at work (ready or claimed).
func (it stateItem) dueBesides(sk string) int64 {
	var due int64
	for k, r := range it.Recs {
		if r.DueAt != 0 && it.deadlineCovers(r) {
			due = earliest(due, it.DeadlineAt)
		}
		if k != sk {
			due = earliest(due, r.DueAt)
		}
	}
	return due
}

// earliest is the earlier of two Unix-millisecond times, zero meaning never.
func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// shardOf spreads the orders' deadline-index entries over n partitions.
func shardOf(orderID string, n int) string {
	h := fnv.New32a()
	h.Write([]byte(orderID))
	return fmt.Sprint(h.Sum32() % uint32(n))
}
