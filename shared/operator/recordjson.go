package operator

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// recordJSON is a Record as output.schema.json's record has it: the keys
// the view's JSON reads and writes, nothing a Go reader uses.
type recordJSON struct {
	Name        string          `json:"name"`
	Index       int             `json:"index"`
	Item        int             `json:"item,omitempty"`
	Undo        bool            `json:"undo"`
	Kind        string          `json:"kind"`
	Agent       string          `json:"agent,omitempty"`
	Async       bool            `json:"async,omitempty"`
	Event       string          `json:"event,omitempty"`
	State       workflow.State  `json:"state"`
	Attempt     int             `json:"attempt"`
	FlowWaits   int             `json:"flowWaits,omitempty"`
	Failures    int             `json:"failures"`
	MaxFailures int             `json:"maxFailures"`
	Timeout     Duration        `json:"timeout,omitzero"`
	ReadyAt     time.Time       `json:"readyAt,omitzero"`
	ClaimedAt   time.Time       `json:"claimedAt,omitzero"`
	CompleteBy  time.Time       `json:"completeBy,omitzero"`
	DueAt       time.Time       `json:"dueAt,omitzero"`
	DoneAt      time.Time       `json:"doneAt,omitzero"`
	Cause       workflow.Cause  `json:"cause,omitempty"`
	LastError   string          `json:"lastError,omitempty"`
	Waiting     *Waiting        `json:"waiting,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
}

// MarshalJSON writes the record as output.schema.json describes it.
func (r Record) MarshalJSON() ([]byte, error) {
	return json.Marshal(recordJSON{Name: r.Name, Index: r.Index, Item: r.Item, Undo: r.Undo, Kind: r.Kind, Agent: r.Agent,
		Async: r.Async, Event: r.Event, State: r.State, Attempt: r.Attempt, FlowWaits: r.FlowWaits, Failures: r.FailureCount,
		MaxFailures: r.MaxFailures, Timeout: Duration(r.Timeout), ReadyAt: r.ReadyAt, ClaimedAt: r.ClaimedAt,
		CompleteBy: r.CompleteBy, DueAt: r.DueAt, DoneAt: r.DoneAt, Cause: r.Cause, LastError: r.LastError, Waiting: r.Waiting,
		Result: r.Result})
}

// UnmarshalJSON reads a record MarshalJSON wrote: its stored state is the
// state it was shown in, its action's name its name without its item.
func (r *Record) UnmarshalJSON(b []byte) error {
	var j recordJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("a record: %w", err)
	}
	*r = Record{Name: j.Name, State: j.State, Kind: j.Kind, Waiting: j.Waiting, Result: j.Result}
	r.Ref = workflow.Ref{Index: j.Index, Undo: j.Undo, Item: j.Item}
	r.Action = workflow.Action{Name: strings.TrimSuffix(j.Name, itemSuffix(j.Item)), Agent: j.Agent, Async: j.Async,
		MaxFailures: j.MaxFailures, Timeout: time.Duration(j.Timeout)}
	r.Rec.Kind, r.Rec.State = kindOf(j.Kind), j.State
	r.Attempt, r.FailureCount, r.Cause, r.LastError = j.Attempt, j.Failures, j.Cause, j.LastError
	r.Event, r.FlowWaits = j.Event, j.FlowWaits
	r.ReadyAt, r.ClaimedAt, r.CompleteBy, r.DueAt, r.DoneAt = j.ReadyAt, j.ClaimedAt, j.CompleteBy, j.DueAt, j.DoneAt
	return nil
}

// itemSuffix is what a forEach item's record name has after its action's
// (workflow.RecordName): "#item", or nothing.
func itemSuffix(item int) string {
	if item == 0 {
		return ""
	}
	return workflow.RecordName("", workflow.Ref{Item: item})
}

// kindName is a record's kind in a word: "agent", "event" or "timer".
func kindName(k workflow.Kind) string {
	if k == workflow.KindAgent {
		return "agent"
	}
	return string(k)
}

// kindOf is the kind a word of kindName names.
func kindOf(word string) workflow.Kind {
	if word == "agent" {
		return workflow.KindAgent
	}
	return workflow.Kind(word)
}
