package statestore

import (
	"fmt"
	"slices"
	"time"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

// Step is one record of an order (a step's, one item's of a forEach step,
// an undo action's) as the store read it: the record as the rules, the
// Agents and the operator read it (workflow.Rec: which it is, the action it
// runs, where it stands, its attempts), and what the store keeps beside it,
// in groups: the order it is of (OrderOf), its attempt at work (AtWork),
// when it is due and what it waited for (Wait), a wait's or a timer's
// parking (Parked), and what it left (Outcome). Each group is embedded:
// st.OrderID, st.LockedBy and st.DueAt read as fields.
type Step struct {
	workflow.Rec
	OrderOf
	AtWork
	Wait
	Parked
	Outcome
}

// OrderOf is the order a record is of, as the read that gave the record
// found it.
type OrderOf struct {
	// OrderID is the order's id.
	OrderID string
	// Workflow and WfVersion are the order's workflow and its version: the
	// definition the order started with is stored under them
	// (Store.Definition).
	Workflow, WfVersion string
	// ReplyQueue is where the order's status notifications go ("": none).
	ReplyQueue string
	// Pickup is the workflow's pickup timeout: how long a record made
	// ready may wait for its claim before the Supervisor looks (0 for an
	// order stored before it was kept).
	Pickup time.Duration
	// Deadline is the order's deadline while the order runs its steps,
	// and its compensation's once it is undone; zero for a record the
	// order's phase does not run.
	Deadline time.Time
	// Version is the order's state item's version, one more at every
	// write: the Supervisor's writes are conditioned on the version read.
	Version int
	// Cancelling is set on a step's record of an order being undone (a
	// record failed, or the order was cancelled): nothing starts again,
	// and it is awaited if it runs.
	Cancelling bool
	// Read is the order as the read (or the write) that gave this record
	// left it: what the rules decide its outcome on, as a first guess.
	Read *Snapshot
}

// AtWork is a record's attempt at work, or its last one once it ended.
type AtWork struct {
	// Round is the round of the order the record is of: 1, then one more
	// at each resubmission of a failed order. An attempt's fence names
	// it, with the Attempt.
	Round int
	// LockedBy is the claimant of the current attempt while it runs, and
	// of the last attempt once it ended (who ran it).
	LockedBy string
	// ClaimedAt is when the latest attempt was claimed; CompleteBy is its
	// deadline (zero when the record is not claimed), also the record's
	// DueAt while it runs.
	ClaimedAt, CompleteBy time.Time
	// AcceptedAt, for an async attempt, is when its service accepted the
	// call (zero: not yet).
	AcceptedAt time.Time
	// Token is the current async attempt's token nonce: its callback must
	// carry it, and once the attempt was recovered it is refused.
	Token string
	// Slot, for an async attempt accepted, is the key of its agent's calls
	// in flight whose slot it holds (workflow.Agent.PerKey), let go by its
	// callback.
	Slot string
}

// Wait is when a record is due and what it waited for.
type Wait struct {
	// DueAt is the record's deadline: when the Supervisor must look at it
	// (zero when no work of it is due).
	DueAt time.Time
	// ReadyAt is when it was last made ready: its queue wait runs from
	// there to its claim, and is never counted against it.
	ReadyAt time.Time
	// ReadiedBy is the agent whose recorded outcome made this ready record
	// ready (the record done last before it became ready): its reply, in
	// that agent's response queue, carries the record's start. "" when
	// nothing before it was done (Submission started it).
	ReadiedBy string
	// Waits is how often the Supervisor found it waiting (unclaimed, or
	// its reply queued); Resent, of those, how often it sent its message
	// again.
	Waits, Resent int
	// FlowWaits is how often its agent's flow control gave an attempt back
	// before its call (no failure, nothing to undo); FlowWhy, while it
	// waits to be claimed again, is for what: its rate turn, a slot of its
	// key, a pause, its service's Retry-After.
	FlowWaits int
	FlowWhy   string
	// Stopped is set on a step's record made ready that will not run: its
	// order is being undone (workflow.Order.Stopped).
	Stopped bool
}

// Parked is what a wait for an event or a timer keeps of its parking: once
// armed, it is due at its timeout or its wake time, with nothing
// circulating meanwhile.
type Parked struct {
	// Event is the event a wait waits for; Continue is set on a wait whose
	// timeout lets the order go on.
	Event    string
	Continue bool
	// Armed is when the ready wait or timer was armed (zero: not yet);
	// Woken, when the Supervisor found its time passed and had it woken.
	Armed, Woken time.Time
	// EventKept is set when the event this wait waits for was received
	// (before the order reached the wait, or while its delivery was lost):
	// it is due now.
	EventKept bool
}

// Outcome is what a record left besides its state: its result, its
// failure's alert, its incidents.
type Outcome struct {
	// HasResult is set when the record's result is stored (Store.Results).
	HasResult bool
	// After is, for a record in Error, the order's state its failure led
	// to (Compensating, Failed, CompensationFailed): what its alert says.
	After workflow.State
	// Alerted is set once its failure's alert was sent. Unalerted is set
	// while an alert about the record is due and not confirmed sent (the
	// order's Ua): its failure, or, for a record that took effect and has
	// no undo, that the order cannot be undone.
	Alerted, Unalerted bool
	// Incidents are what happened to it besides being made ready, claimed
	// and done: recoveries, failures, alerts, resubmissions.
	Incidents []Event
}

// Event is one line of a record's history.
type Event struct {
	At   time.Time `json:"at"`
	What string    `json:"what"`
}

// History is the record's timeline, oldest first: when it was made ready,
// claimed and done (from the record's times, which every record carries),
// and its incidents (written only when one happens, to keep the item small).
func (s Step) History() []Event {
	var out []Event
	add := func(at time.Time, what string) {
		if !at.IsZero() {
			out = append(out, Event{At: at, What: what})
		}
	}
	add(s.ReadyAt, "ready")
	if s.Attempt > 0 {
		add(s.ClaimedAt, fmt.Sprintf("attempt %d claimed by %s/%s", s.Attempt, s.Agent, s.LockedBy))
	}
	switch {
	case s.State == workflow.Processed && s.Kind == workflow.KindEvent:
		add(s.DoneAt, "done: its event came (or its timeout let the order go on)")
	case s.State == workflow.Processed && s.Kind == workflow.KindTimer:
		add(s.DoneAt, "done: its time came")
	case s.State == workflow.Processed:
		add(s.DoneAt, fmt.Sprintf("processed (attempt %d)", s.Attempt))
	case s.State == workflow.Error:
		add(s.DoneAt, fmt.Sprintf("failed for good (%s)", s.Cause))
	}
	out = append(out, s.Incidents...)
	if s.Stopped && s.Read != nil {
		what := "stopped before it ran: the order is being undone"
		if s.Ran {
			what = fmt.Sprintf("stopped before its retry: attempt %d may have taken effect, so its undo runs", s.Attempt)
		}
		at := s.Read.undoneSince()
		if at.Before(s.ReadyAt) { // the clocks of who wrote each may disagree
			at = s.ReadyAt
		}
		add(at, what)
	}
	slices.SortStableFunc(out, func(a, b Event) int { return a.At.Compare(b.At) })
	return out
}

// GaveUp reports whether the Supervisor gave up on this record (its attempts
// timed out, or the order's deadline passed), as opposed to its remote
// refusing it.
func (s Step) GaveUp() bool { return s.State == workflow.Error && s.Cause.GaveUp() }

// Request is the request that starts the record at its Agent (an agent
// step's, or an undo action's), from what the record itself says: no
// workflow needed. It carries no order: the Agent reads it.
func (s Step) Request() message.AgentRequest {
	return message.AgentRequest{OrderID: s.OrderID, Step: s.Index, Undo: s.Undo, Item: s.Item, StepName: s.Name, Action: s.Do,
		Workflow: s.Workflow, Version: s.WfVersion}
}

// WaitsFor is what the record waits for, if not for its own work: its
// event, its timer, its service's callback, its agent's flow control.
func (s Step) WaitsFor() WaitsFor {
	return waitSigns{state: s.State, kind: s.Kind, armed: !s.Armed.IsZero(), woken: !s.Woken.IsZero(), async: s.Async,
		ready: !s.DueAt.IsZero(), flowWhy: s.FlowWhy}.waitsFor()
}

// Key identifies the record in log lines.
func (s Step) Key() string { return fmt.Sprintf("%s/%s(%s)", s.OrderID, sortKey(s.Ref), s.Name) }

// rec is the record named sk as the rules read it (and the Agents and the
// operator, through Step): one reading of the item, for both.
func (it stateItem) rec(sk string) workflow.Rec {
	r := it.Recs[sk]
	return workflow.Rec{Ref: refOf(sk), State: workflow.State(r.State), Kind: workflow.Kind(r.Kind),
		Action: workflow.Action{Name: r.Name, Agent: r.Agent, Do: r.Do, Timeout: time.Duration(r.TimeoutMs) * time.Millisecond,
			MaxFailures: r.MaxFailures, RetryBackoff: time.Duration(r.BackoffMs) * time.Millisecond, Async: r.Async},
		Ready: r.State == string(workflow.Pending) && r.DueAt != 0, DoneAt: fromMs(r.DoneAt), Cause: workflow.Cause(r.Cause),
		LastError: r.LastError, Attempt: r.Attempt, FailureCount: r.FailureCount, Ran: r.ran(),
		Retried: r.FailureCount > 0 || r.MayHaveRun, Accepted: r.State == string(workflow.Processing) && r.Accepted != 0,
		HasUndo: r.HasUndo, NothingToUndo: r.NoUndo, HoldFor: time.Duration(r.HoldMs) * time.Millisecond}
}

// order is the item as the rules read it.
func (it stateItem) order() workflow.Order {
	o := workflow.Order{State: workflow.State(it.State), Cancelled: it.EndAs == string(workflow.Cancelled),
		Recs: make(workflow.Records, len(it.Recs))}
	for sk := range it.Recs {
		o.Recs[refOf(sk)] = it.rec(sk)
	}
	return o
}

// step is the record named sk as a Step; Version is the item's.
func (it stateItem) step(sk string, v view) Step {
	r, rec := it.Recs[sk], it.rec(sk)
	st := Step{Rec: rec,
		OrderOf: OrderOf{OrderID: it.OrderID, Workflow: it.Workflow, WfVersion: it.WfVersion, ReplyQueue: it.ReplyQueue,
			Pickup: time.Duration(it.PickupMs) * time.Millisecond, Version: it.Version, Read: v.snap,
			Cancelling: !rec.Undo && it.State != string(workflow.Pending)},
		AtWork: AtWork{Round: r.Round, LockedBy: r.LockedBy, ClaimedAt: fromMs(r.ClaimedAt), CompleteBy: fromMs(r.CompleteBy),
			AcceptedAt: fromMs(r.Accepted), Token: r.Token, Slot: r.Slot},
		Wait: Wait{DueAt: fromMs(r.DueAt), ReadyAt: fromMs(r.ReadyAt), Waits: r.Waits, Resent: r.Resent, FlowWaits: r.FlowWaits,
			FlowWhy: r.FlowWhy, Stopped: !rec.Undo && rec.Ready && it.State != string(workflow.Pending)},
		Parked: Parked{Event: r.Event, Continue: r.Continue, Armed: fromMs(r.Armed), Woken: fromMs(r.Woken),
			EventKept: r.Event != "" && it.Events[r.Event] != "" && rec.Ready},
		Outcome: Outcome{HasResult: r.Result > 0, After: workflow.State(r.After), Alerted: r.Alerted,
			Unalerted: slices.Contains(it.Unalerted, sk)},
	}
	if it.runs(rec.Ref) {
		st.Deadline = fromMs(it.DeadlineAt)
	}
	st.Incidents = make([]Event, 0, len(r.Incidents))
	for _, line := range r.Incidents {
		st.Incidents = append(st.Incidents, parseIncident(line))
	}
	if rec.Ready && r.ReadyAt != 0 {
		st.ReadiedBy = v.readiedBy(r.ReadyAt)
	}
	return st
}

// steps are the item's records, steps first then undo actions, each by index
// and item.
func (it stateItem) steps() []Step {
	v := it.view()
	out := make([]Step, 0, len(it.Recs))
	for sk := range it.Recs {
		out = append(out, it.step(sk, v))
	}
	slices.SortFunc(out, func(a, b Step) int { return compareSteps(a.Ref, b.Ref) })
	return out
}

// compareSteps orders records: steps first, then undo actions, each by
// index and item.
func compareSteps(a, b workflow.Ref) int {
	switch {
	case a.Undo == b.Undo && a.Index == b.Index:
		return a.Item - b.Item
	case a.Undo == b.Undo:
		return a.Index - b.Index
	case a.Undo:
		return 1
	default:
		return -1
	}
}
