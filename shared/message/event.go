package message

import (
	"encoding/json"
	"regexp"

	"github.com/sas-go/sas/shared/workflow"
)

// KindEvent marks an event on the orders queue.
const KindEvent = "event"

// MaxEventBytes is the largest event body accepted: the largest result a
// workflow may keep (16 MB: its data, kept in the payload bucket, comes by
// an SQS Extended Client pointer) and the envelope.
const MaxEventBytes = workflow.MaxResultLimit + 4*1024

var (
	eventPattern   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)
	eventIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)
)

// Event is sent to an order on the orders queue: to the step that waits for
// it by name (its data becomes that step's result), or, with a token, as an
// async step's callback (its data the step's result, or its error the
// step's refusal).
type Event struct {
	Kind    string          `json:"kind"` // KindEvent
	OrderID string          `json:"orderId"`
	Event   string          `json:"event,omitempty"`
	EventID string          `json:"eventId,omitempty"` // a repeat of one eventId is a no-op
	Token   string          `json:"token,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	Error   string          `json:"error,omitempty"` // a callback's refusal
}

// Validate checks every field of the event.
func (e Event) Validate() error {
	switch {
	case !idPattern.MatchString(e.OrderID):
		return Invalid("event: bad orderId %q", truncate(e.OrderID))
	case (e.Event == "") == (e.Token == ""):
		return Invalid("event for %s: give an event's name, or an async step's token (not both)", e.OrderID)
	case e.Token == "" && !eventPattern.MatchString(e.Event):
		return Invalid("event for %s: event %q must be 1-64 letters, digits or _.-, starting with a letter", e.OrderID, truncate(e.Event))
	case e.Token == "" && !eventIDPattern.MatchString(e.EventID):
		return Invalid("event %s for %s: eventId %q must be 1-128 letters, digits or _.:-", e.Event, e.OrderID, truncate(e.EventID))
	case e.Error != "" && e.Token == "":
		return Invalid("event %s for %s: only a callback (with a token) carries an error", e.Event, e.OrderID)
	case len(e.Error) > MaxReasonBytes:
		return Invalid("event for %s: error is %d bytes, over %d", e.OrderID, len(e.Error), MaxReasonBytes)
	}
	return nil
}
