package message

import (
	"encoding/json"
	"time"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/workflow"
)

// MaxEnvelopeBytes bounds what a work message or a status carries beside
// its order and its result: every other field at its longest, escaped at
// its worst as Encode writes it (an error of MaxErrorBytes and a reply
// queue of MaxReplyQueueBytes, of control bytes, six bytes each; the
// records a reply makes ready, up to workflow.MaxRecords; the numbers at
// their largest). TestTheLargestEnvelopeFitsItsBound builds it: 30 KB.
const MaxEnvelopeBytes = 32 << 10

// MaxWorkBytes is the largest scheduler or agent message (and status
// notification) accepted: a reply carries the order and the step's result
// (each inline at its largest, kept.MaxInline as it travels, or its
// claim check), and the envelope. SQS takes up to 256 KiB with the
// message's attributes (and bills each started 64 KB as a request: only a
// large result costs more); queue.Sender refuses to send a body over it.
const MaxWorkBytes = 2*kept.MaxInline + MaxEnvelopeBytes

// The kinds of message the Scheduler reads.
const (
	KindSchedule = "schedule"
	KindReply    = "reply"
)

// Schedule tells the Scheduler that a step (or a step's undo action) of an
// order is ready to be claimed.
type Schedule struct {
	Kind    string `json:"kind"` // KindSchedule
	OrderID string `json:"orderId"`
	Step    int    `json:"step"`
	Undo    bool   `json:"undo,omitempty"`
	Item    int    `json:"item,omitempty"` // a forEach step's item (1-based)
	// Workflow and Version name the definition the order runs (none: the
	// deployment's default); a version the deployment no longer has is read
	// back from the order's records.
	Workflow string `json:"workflow,omitempty"`
	Version  string `json:"version,omitempty"`
	// Payload is the order, when the sender has it (Submission does; the
	// Supervisor does not): it rides to the Agent, which otherwise reads it.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Wake: the record is a wait or a timer the Supervisor found due and
	// marked woken: the Scheduler completes it (a timer's time came; a wait
	// that goes on at its timeout) and starts what follows.
	Wake bool `json:"wake,omitempty"`
}

// NewSchedule builds a Schedule message for record r of an order running
// version version of workflow wf.
func NewSchedule(orderID string, r workflow.Ref, wf, version string) Schedule {
	return Schedule{Kind: KindSchedule, OrderID: orderID, Step: r.Index, Undo: r.Undo, Item: r.Item, Workflow: wf, Version: version}
}

// Ref is the record the message is about.
func (s Schedule) Ref() workflow.Ref { return workflow.Ref{Index: s.Step, Undo: s.Undo, Item: s.Item} }

// AgentRequest asks an Agent to claim a ready step (or a step's undo action)
// of an order and run an attempt of it. It carries no attempt and no
// deadline: the Agent's claim starts the attempt (Attempt + 1, CompleteBy),
// so the time the request waited in a queue never counts against it, and a
// request the claim refuses (a duplicate, a late one) runs nothing.
type AgentRequest struct {
	OrderID  string `json:"orderId"`
	Step     int    `json:"step"`
	Undo     bool   `json:"undo,omitempty"`
	Item     int    `json:"item,omitempty"`   // a forEach step's item (1-based)
	StepName string `json:"stepName"`         // for logs; the claimed record is the authority
	Action   string `json:"action,omitempty"` // the service's action, when not StepName
	// Workflow and Version name the definition the order runs; the Agent
	// echoes them in its reply, for the Scheduler.
	Workflow string `json:"workflow,omitempty"`
	Version  string `json:"version,omitempty"`
	// Payload is the order, if the Scheduler had it; an Agent reads the
	// orders table for a request without one.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Turn was set by an Agent of an earlier version that booked its call's
	// turn of its rate limit ahead; none is booked now (the turn is decided
	// at the call's moment), and it is ignored.
	Turn time.Time `json:"turn,omitzero"`
	// Slot, on a request that waits in the line of its agent's key (the
	// key, workflow.Agent.PerKey), and Round, its attempt's round: if it
	// finds nothing to run (its order was cancelled or ended while it
	// waited), its Agent takes it out of the line.
	Slot  string `json:"slot,omitempty"`
	Round int    `json:"round,omitempty"`
}

// Ref is the record the request is about.
func (r AgentRequest) Ref() workflow.Ref {
	return workflow.Ref{Index: r.Step, Undo: r.Undo, Item: r.Item}
}

// Waiting is the request a call keeps in the line of its agent's key (its
// Slot), for round: what starts it again, without the order (its Agent
// reads it) and without its service's action (the claimed record names
// it). Each of its fields is bounded (an order's id, a step's name, a
// workflow's name and version by their patterns, the numbers by their
// type, the key by keyname.MaxKeyBytes), so that the largest, encoded as it
// is kept (Encode), fits keyline.MaxWaiterRequestBytes.
func (r AgentRequest) Waiting(round int, key string) AgentRequest {
	return AgentRequest{OrderID: r.OrderID, Step: r.Step, Undo: r.Undo, Item: r.Item, StepName: r.StepName,
		Workflow: r.Workflow, Version: r.Version, Round: round, Slot: key}
}

// AgentReply is an Agent's answer for one attempt of a step.
type AgentReply struct {
	Kind     string          `json:"kind"` // KindReply
	OrderID  string          `json:"orderId"`
	Step     int             `json:"step"`
	Undo     bool            `json:"undo,omitempty"`
	Item     int             `json:"item,omitempty"` // a forEach step's item (1-based)
	StepName string          `json:"stepName"`
	Attempt  int             `json:"attempt"` // 0 for a wait, which has no attempts (recorded only)
	OK       bool            `json:"ok"`
	Error    string          `json:"error,omitempty"` // set when !OK: a non-transient fault
	Result   json.RawMessage `json:"result,omitempty"`
	ReplyTo  string          `json:"replyTo,omitempty"`
	Round    int             `json:"round,omitempty"`
	Workflow string          `json:"workflow,omitempty"` // the order's workflow and version, echoed from the request
	Version  string          `json:"version,omitempty"`
	Payload  json.RawMessage `json:"payload,omitempty"` // the order, echoed for the Scheduler's next request
	// Recorded: the Agent recorded this outcome in the order's state before
	// it replied (every Agent of this version does): State is the task's
	// state after it, and Ready the records it made ready, which the
	// Scheduler starts. A reply without it (from an Agent of an earlier
	// version) the Scheduler records itself.
	Recorded bool    `json:"recorded,omitempty"`
	State    string  `json:"state,omitempty"`
	Ready    []Start `json:"ready,omitempty"`
	// GivenBack: the attempt was given back before its call was made (its
	// flow control held it) while the order is undone: nothing is done or
	// refused; the Scheduler only starts Ready (the undoing going on).
	GivenBack bool `json:"givenBack,omitempty"`
}

// Start names a record to start: a step, or a step's undo action.
type Start struct {
	Step int  `json:"step"`
	Undo bool `json:"undo,omitempty"`
	Item int  `json:"item,omitempty"` // a forEach step's item (1-based)
}

// Ref is the record s names.
func (s Start) Ref() workflow.Ref { return workflow.Ref{Index: s.Step, Undo: s.Undo, Item: s.Item} }

// Starts names the records refs.
func Starts(refs []workflow.Ref) []Start {
	out := make([]Start, 0, len(refs))
	for _, r := range refs {
		out = append(out, Start{Step: r.Index, Undo: r.Undo, Item: r.Item})
	}
	return out
}

// Ref is the record the reply is about.
func (r AgentReply) Ref() workflow.Ref {
	return workflow.Ref{Index: r.Step, Undo: r.Undo, Item: r.Item}
}

// DecodeAgentRequest parses and validates an Agent request body.
func DecodeAgentRequest(body string) (AgentRequest, error) {
	var r AgentRequest
	if err := decodeStrict(body, MaxWorkBytes, &r); err != nil {
		return r, err
	}
	switch {
	case !idPattern.MatchString(r.OrderID):
		return r, Invalid("agent request: bad orderId %q", truncate(r.OrderID))
	case r.Step < 0 || r.StepName == "" || !itemOK(r.Item):
		return r, Invalid("agent request for %s: needs step >= 0 and stepName", r.OrderID)
	}
	return r, nil
}

// DecodeSchedulerMessage parses a body from the scheduler queue or an agent
// response queue: it returns a Schedule or an AgentReply.
func DecodeSchedulerMessage(body string) (any, error) {
	var head struct {
		Kind string `json:"kind"`
	}
	if len(body) > MaxWorkBytes {
		return nil, Invalid("body is %d bytes, over the %d-byte limit", len(body), MaxWorkBytes)
	}
	if err := decodeHead(body, &head); err != nil {
		return nil, err
	}
	switch head.Kind {
	case KindSchedule:
		var s Schedule
		if err := decodeStrict(body, MaxWorkBytes, &s); err != nil {
			return nil, err
		}
		if !idPattern.MatchString(s.OrderID) || s.Step < 0 || !itemOK(s.Item) {
			return nil, Invalid("schedule: bad orderId %q or step %d", truncate(s.OrderID), s.Step)
		}
		return s, nil
	case KindReply:
		var r AgentReply
		if err := decodeStrict(body, MaxWorkBytes, &r); err != nil {
			return nil, err
		}
		if !idPattern.MatchString(r.OrderID) || r.Step < 0 || !itemOK(r.Item) || r.Attempt < 0 || (r.Attempt == 0 && !r.Recorded) {
			return nil, Invalid("reply: bad orderId %q, step %d or attempt %d", truncate(r.OrderID), r.Step, r.Attempt)
		}
		if !r.OK && r.Error == "" && !r.GivenBack { // given back: nothing done, nothing refused
			return nil, Invalid("reply for %s: not ok but no error given", r.OrderID)
		}
		return r, r.checkRecorded()
	default:
		return nil, Invalid("unknown kind %q (want %q or %q)", truncate(head.Kind), KindSchedule, KindReply)
	}
}

// checkRecorded checks what a recorded reply says followed it.
func (r AgentReply) checkRecorded() error {
	if !r.Recorded {
		if r.State != "" || len(r.Ready) > 0 {
			return Invalid("reply for %s: state and ready come only with recorded", r.OrderID)
		}
		return nil
	}
	switch st := workflow.State(r.State); st {
	case workflow.Pending, workflow.Compensating, workflow.Held, workflow.Processed, workflow.Failed, workflow.CompensationFailed, workflow.Cancelled:
	default:
		return Invalid("reply for %s: state %q is not a task's state", r.OrderID, truncate(r.State))
	}
	for _, s := range r.Ready {
		if s.Step < 0 || !itemOK(s.Item) {
			return Invalid("reply for %s: ready step %d", r.OrderID, s.Step)
		}
	}
	return nil
}

// itemOK reports whether item names no item (0) or one a forEach step can
// have.
func itemOK(item int) bool { return item >= 0 && item <= workflow.MaxForEachItems }
