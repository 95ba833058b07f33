// Package statestore is the DynamoDB state store: the orders table and the
// task and step records, with the conditional writes that implement the
// pattern's claim, fencing and recovery rules.
package statestore

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Task is the record of one order's whole operation.
type Task struct {
	OrderID     string
	Workflow    string
	Version     string // the workflow's version the order runs (its records carry the steps)
	State       workflow.State
	StepCount   int
	Round       int    // 1, then one more for each resubmission of a failed task
	ReplyQueue  string // where status notifications go, if anywhere
	LastError   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time // zero until the task ends
	// CancelledBy, if set, asked for the order's cancellation, at
	// CancelledAt, for CancelReason.
	CancelledBy  string
	CancelledAt  time.Time
	CancelReason string
	// Events are the round's events received, by name: their eventId.
	Events map[string]string
	// Moves are its moves to other versions of its workflow (sasctl
	// migrate): when, from which version to which, by whom.
	Moves []Event
	// Due is when the Supervisor looks at the order next (its deadline-index
	// entry); zero once it left the index.
	Due time.Time
	// HeldAt and HeldUntil, for a Held order: since when, and when its
	// hold ends (it is undone then).
	HeldAt, HeldUntil time.Time
	// Deadline is the round's deadline, then its compensation's.
	Deadline time.Time
	// FlowWaiting counts the steps ready again after their agent's flow
	// control gave their attempt back before its call (a key full, a pause,
	// a Retry-After): they wait, they did not fail. FlowWhy is why one of
	// them (the first by its name) waits.
	FlowWaiting int
	FlowWhy     string
	// Sealed says its order's data is sealed (Submission.Sealed), so that a
	// function with no data key (its configuration lagging a deploy that
	// set kms) keeps none of its events' data in clear. Orders submitted
	// before the state item carried it say false.
	Sealed bool
	// Trace is the order's trace context (a W3C traceparent; "": none):
	// what happens to it later (an event, a callback, the Supervisor's
	// wake) joins its trace (tracing.Join).
	Trace string
	// ReadyFor counts, by agent, the other steps ready for a claim (their
	// request sent, or on its way back from a delay): an agent that holds
	// its calls (paused, slowed, its rate turns queued) makes them wait.
	ReadyFor map[string]int
	// At are the records the order is at: at work, or failed for good
	// (Spot).
	At []Spot
}

// stateItem is an order's live state as stored: ONE item per order, the task
// with its records (steps and undo actions) inside, so that a step's
// transition and the task's are one conditional write. DynamoDB bills each
// write a unit per started KB of the item, attribute names included, so the
// names are short (this struct is their table) and the item holds no more
// than the work needs: not the order (it is in the orders table, and travels
// in the messages), no result, and no history but the incidents. Times are
// Unix milliseconds. DueShard and DueAt are the order's key in the sparse
// deadline index: when the Supervisor must look next (see Overdue).
type stateItem struct {
	OrderID     string             `dynamodbav:"OrderID"`
	SK          string             `dynamodbav:"SK"`
	Workflow    string             `dynamodbav:"Wf"`
	WfVersion   string             `dynamodbav:"Wv,omitempty"`
	PickupMs    int64              `dynamodbav:"Pk,omitempty"` // the workflow's pickup timeout
	State       string             `dynamodbav:"St"`           // the task's ProcessState
	Round       int                `dynamodbav:"Rd"`
	ReplyQueue  string             `dynamodbav:"Rq,omitempty"`
	LastError   string             `dynamodbav:"Err,omitempty"`
	Version     int                `dynamodbav:"V"`
	DueShard    string             `dynamodbav:"DueShard,omitempty"`
	Shard       string             `dynamodbav:"Dsh,omitempty"` // its shard of the deadline index, as Submission picked it (DueShard while in it)
	DueAt       int64              `dynamodbav:"DueAt,omitempty"`
	DeadlineAt  int64              `dynamodbav:"Dl,omitempty"`   // the round's deadline, then its compensation's
	DeadlineMs  int64              `dynamodbav:"DlMs,omitempty"` // the workflow's order deadline, for later rounds
	LifetimeMs  int64              `dynamodbav:"LfMs,omitempty"` // the workflow's Lifetime: what the order keeps outlives it
	KeepS       int64              `dynamodbav:"KpS,omitempty"`  // the retention it was submitted with, in seconds (-1: forever; none: stored before items carried it)
	Sealed      bool               `dynamodbav:"Sl,omitempty"`   // its order's data is sealed (Submission.Sealed): set at its submission since this attribute exists
	Trace       string             `dynamodbav:"Tp,omitempty"`   // its trace context (W3C traceparent), Submission.Trace
	Unalerted   []string           `dynamodbav:"Ua,stringset,omitempty"`
	CxBy        string             `dynamodbav:"CxBy,omitempty"`  // who asked for the order's cancellation
	CxAt        int64              `dynamodbav:"CxAt,omitempty"`  // when
	CxWhy       string             `dynamodbav:"CxWhy,omitempty"` // and why
	EndAs       string             `dynamodbav:"Ea,omitempty"`    // Cancelled: the order was cancelled, its undoing ends so
	ItemsDone   map[string]int     `dynamodbav:"P,omitempty"`     // a forEach step's items done in the round, by step index
	Finished    *int               `dynamodbav:"Fn,omitempty"`    // the writes that finished a step in the round: they are ordered by it
	Events      map[string]string  `dynamodbav:"Evt,omitempty"`   // the round's events received, by name: their eventId
	Moves       []string           `dynamodbav:"Mv,omitempty"`    // its moves to other versions of its workflow, one line each (incident's form)
	Gone        map[string]int     `dynamodbav:"Ak,omitempty"`    // the latest attempt of each record a move left behind, by its key: a record there later counts on from it
	HeldAt      int64              `dynamodbav:"Ha,omitempty"`    // Held: since when
	HeldUntil   int64              `dynamodbav:"Hu,omitempty"`    // Held: when its hold ends (it is undone)
	CreatedAt   int64              `dynamodbav:"C"`
	UpdatedAt   int64              `dynamodbav:"U"`
	CompletedAt int64              `dynamodbav:"E,omitempty"`
	EndShard    string             `dynamodbav:"EndShard,omitempty"` // its key in the end index (topology.EndPartition) once ended other than Processed
	Expires     int64              `dynamodbav:"Exp,omitempty"`      // ExpiresAttribute: set when the task ends
	Recs        map[string]recItem `dynamodbav:"R"`                  // by sortKey
}

// recItem is one record inside the state item. The first group is the
// action it runs (from the workflow, so that the Supervisor needs no
// workflow), the second its state.
type recItem struct {
	Name        string `dynamodbav:"n"`
	Agent       string `dynamodbav:"a"`
	Do          string `dynamodbav:"do,omitempty"` // the service's action, when not Name
	TimeoutMs   int64  `dynamodbav:"t"`
	MaxFailures int    `dynamodbav:"m"`
	BackoffMs   int64  `dynamodbav:"b,omitempty"`
	HasUndo     bool   `dynamodbav:"h,omitempty"`
	NoUndo      bool   `dynamodbav:"nu,omitempty"` // its step changes nothing to undo (undo: none): no pivot
	HoldMs      int64  `dynamodbav:"hf,omitempty"` // its failure holds the order this long (onFailure: hold)

	State        string   `dynamodbav:"s"` // ProcessState
	Round        int      `dynamodbav:"r"`
	Attempt      int      `dynamodbav:"k,omitempty"` // (AT is a reserved word)
	FailureCount int      `dynamodbav:"fc,omitempty"`
	LockedBy     string   `dynamodbav:"lk,omitempty"`
	CompleteBy   int64    `dynamodbav:"cb,omitempty"`
	DueAt        int64    `dynamodbav:"d,omitempty"` // the record's own deadline
	ReadyAt      int64    `dynamodbav:"ra,omitempty"`
	ClaimedAt    int64    `dynamodbav:"ca,omitempty"`
	ClaimWrite   string   `dynamodbav:"cw,omitempty"` // the write id of the claim that started its latest attempt
	DoneAt       int64    `dynamodbav:"dn,omitempty"`
	Waits        int      `dynamodbav:"w,omitempty"`
	Resent       int      `dynamodbav:"rs,omitempty"`
	Cause        string   `dynamodbav:"c,omitempty"`
	After        string   `dynamodbav:"af,omitempty"` // an Error's: the task's state its failure led to
	LastError    string   `dynamodbav:"e,omitempty"`
	Alerted      bool     `dynamodbav:"al,omitempty"`
	Incidents    []string `dynamodbav:"ev,omitempty"` // "<Unix ms, base 36> <what>"
	FlowWaits    int      `dynamodbav:"hw,omitempty"` // attempts its flow control gave back before their call
	FlowWhy      string   `dynamodbav:"hy,omitempty"` // why the latest was, while it waits to be claimed again
	MayHaveRun   bool     `dynamodbav:"mr,omitempty"` // an attempt of the round given back after its request went (no failure counted) may have taken effect

	Kind     string `dynamodbav:"ki,omitempty"` // "" an agent's, "event" a wait, "timer"
	Event    string `dynamodbav:"wn,omitempty"` // the event a wait waits for
	Continue bool   `dynamodbav:"oc,omitempty"` // a wait whose timeout lets the order go on
	Async    bool   `dynamodbav:"as,omitempty"` // its service answers later, with a token
	Token    string `dynamodbav:"tk,omitempty"` // the current async attempt's token nonce
	Accepted int64  `dynamodbav:"ac,omitempty"` // when the current async attempt's service accepted its call
	Slot     string `dynamodbav:"hk,omitempty"` // the key of the calls in flight whose slot the accepted attempt holds
	Armed    int64  `dynamodbav:"wa,omitempty"` // when a ready wait or timer was armed
	Woken    int64  `dynamodbav:"wk,omitempty"` // when the Supervisor found its time passed and woke it
	Result   int    `dynamodbav:"o,omitempty"`  // the bytes of its stored result (0: none)
	Starts   bool   `dynamodbav:"st,omitempty"` // ready when a round starts (its step needs nothing)
}

const taskSK = "TASK"

// sortKey is a record's key in the item's map: s0, s1… for steps, u0, u1…
// for their undo actions, and s3#1, u3#1… for a forEach step's items.
func sortKey(r workflow.Ref) string {
	k := "s" + strconv.Itoa(r.Index)
	if r.Undo {
		k = "u" + strconv.Itoa(r.Index)
	}
	if r.Item > 0 {
		k += "#" + strconv.Itoa(r.Item)
	}
	return k
}

// refOf is the record a sort key names.
func refOf(sk string) workflow.Ref {
	index, item, _ := strings.Cut(sk[1:], "#")
	i, _ := strconv.Atoi(index)
	k, _ := strconv.Atoi(item)
	return workflow.Ref{Index: i, Undo: strings.HasPrefix(sk, "u"), Item: k}
}

// incident is one line of a record's incidents, at now.
func incident(now time.Time, format string, args ...any) string {
	return strconv.FormatInt(ms(now), 36) + " " + fmt.Sprintf(format, args...)
}

// parseIncident reads an incident line back (a line it cannot read keeps
// its text, at the zero time).
func parseIncident(line string) Event {
	at, what, _ := strings.Cut(line, " ")
	v, err := strconv.ParseInt(at, 36, 64)
	if err != nil {
		return Event{What: line}
	}
	return Event{At: time.UnixMilli(v), What: what}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

func (it stateItem) task() Task {
	steps, waiting, why, whySK := 0, 0, "", ""
	var ready map[string]int
	for sk, r := range it.Recs {
		if !refOf(sk).Undo {
			steps++
		}
		if r.State != string(workflow.Pending) || r.DueAt == 0 || r.Kind != "" || !it.runs(refOf(sk)) {
			continue
		}
		if r.FlowWhy != "" {
			waiting++
			if whySK == "" || sk < whySK {
				why, whySK = r.FlowWhy, sk
			}
		} else if r.Agent != "" {
			if ready == nil {
				ready = map[string]int{}
			}
			ready[r.Agent]++
		}
	}
	return Task{FlowWaiting: waiting, FlowWhy: why, ReadyFor: ready, OrderID: it.OrderID, Workflow: it.Workflow, Version: it.WfVersion, State: workflow.State(it.State),
		StepCount: steps, Round: it.Round, ReplyQueue: it.ReplyQueue, LastError: it.LastError, CreatedAt: fromMs(it.CreatedAt),
		UpdatedAt: fromMs(it.UpdatedAt), CompletedAt: fromMs(it.CompletedAt),
		CancelledBy: it.CxBy, CancelledAt: fromMs(it.CxAt), CancelReason: it.CxWhy, Events: it.Events, Due: fromMs(it.DueAt),
		HeldAt: fromMs(it.HeldAt), HeldUntil: fromMs(it.HeldUntil), Deadline: fromMs(it.DeadlineAt), Sealed: it.Sealed, Moves: it.moves(), Trace: it.Trace,
		At: it.spots()}
}

// ran reports whether the record may have taken effect though it is not
// Processed: claimed in the round (a resubmission clears the claim), then
// given up on or its answer over the limit, or given back to run again, or
// failed for good after an attempt given back (workflow.Rec.Retried).
func (r recItem) ran() bool {
	cause := workflow.Cause(r.Cause)
	switch workflow.State(r.State) {
	case workflow.Error:
		return r.ClaimedAt != 0 && (cause.GaveUp() || cause == workflow.Oversized || r.FailureCount > 0 || r.MayHaveRun)
	case workflow.Pending:
		return r.ClaimedAt != 0
	}
	return false
}

// runs reports whether the task runs record r now: a step's record while it
// runs forward, an undo action's while it is undone.
func (it stateItem) runs(r workflow.Ref) bool { return it.State == string(taskFrom(r)) }

// taskFrom is the state a task is in while r runs.
func taskFrom(r workflow.Ref) workflow.State {
	if r.Undo {
		return workflow.Compensating
	}
	return workflow.Pending
}

// live reports whether record sk has work due that the Supervisor must look
// at: a deadline, and not a step stopped because its order is undone.
func (it stateItem) live(sk string) bool {
	r := it.Recs[sk]
	if r.DueAt == 0 {
		return false
	}
	return r.State != string(workflow.Pending) || it.runs(refOf(sk))
}

// view is what every record of one item shares, worked out once per read
// (an order may have 400 records).
type view struct {
	snap    *Snapshot
	done    []workflow.Ref // done in the round with a result stored (Inputs reads them)
	items   map[int]int    // the items of each forEach step
	doneAts []doneAt       // the records done, by time, for ReadiedBy
}

type doneAt struct {
	at    int64
	agent string
}

func (it stateItem) view() view {
	v := view{snap: &Snapshot{it: it}}
	for sk, r := range it.Recs {
		ref := refOf(sk)
		if r.Result > 0 && r.State == string(workflow.Processed) && r.Round == it.Round {
			v.done = append(v.done, ref)
		}
		if ref.Item > 0 && !ref.Undo {
			if v.items == nil {
				v.items = map[int]int{}
			}
			v.items[ref.Index] = max(v.items[ref.Index], ref.Item)
		}
		if r.DoneAt != 0 {
			v.doneAts = append(v.doneAts, doneAt{r.DoneAt, r.Agent})
		}
	}
	slices.SortFunc(v.doneAts, func(a, b doneAt) int { return int(a.at - b.at) })
	return v
}

// readiedBy is the agent of the record done last before a record made ready
// at readyAt ("" if none).
func (v view) readiedBy(readyAt int64) string {
	i, _ := slices.BinarySearchFunc(v.doneAts, readyAt+1, func(d doneAt, t int64) int { return int(d.at - t) })
	if i == 0 {
		return ""
	}
	return v.doneAts[i-1].agent
}

// nextDue is when the Supervisor must look at the order next: its live
// records' earliest deadline, or the order's deadline while a record it
// covers is at work (zero: never).
func (it stateItem) nextDue() int64 {
	var due int64
	for sk, r := range it.Recs {
		if !it.live(sk) {
			continue
		}
		due = earliest(due, r.DueAt)
		if it.runs(refOf(sk)) {
			due = earliest(due, it.DeadlineAt)
		}
	}
	if it.State == string(workflow.Held) {
		due = earliest(due, it.HeldUntil)
	}
	return due
}

// shard is the order's shard of the deadline index, for a writer of n
// shards: the one Submission picked, with the deployment's shards, which
// every writer keeps (an operator's store, whose count may be another,
// too: an order put in a shard the Supervisor does not sweep would never
// be looked at); else, for an order stored before items carried it, the
// one it is in; else, for such an order out of the index (one ended
// Failed, its alert sent), shard 0, which every deployment sweeps, as its
// writer's n may not be the deployment's (an operator's sasctl left at its
// default 4, against a deployment of fewer). A shard of n or more is not
// kept: the deployment's shards were lowered, and an order Submission put
// in one goes to its shard of n (a writer of fewer than the deployment's,
// as an operator's left at its default, puts it in one the Supervisor
// sweeps all the same); an order stored before goes to shard 0.
func (it stateItem) shard(n int) string {
	for _, s := range []string{it.Shard, it.DueShard} {
		if i, err := strconv.Atoi(s); err == nil && i < n {
			return s
		}
	}
	if it.Shard == "" {
		return "0"
	}
	return shardOf(it.OrderID, n)
}

// shardOf is orderID's shard of n, which spreads the orders' deadline-index
// entries over n partitions: its FNV-32a hash, modulo n.
func shardOf(orderID string, n int) string {
	h := fnv.New32a()
	h.Write([]byte(orderID))
	return strconv.FormatUint(uint64(h.Sum32()%uint32(n)), 10)
}

// earliest is the earlier of two Unix-millisecond times, zero meaning never.
func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}
