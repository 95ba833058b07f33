package message

import (
	"encoding/json"
	"time"
)

// KindStatus marks a status notification.
const KindStatus = "status"

// Status is a notification posted to an order's reply queue.
type Status struct {
	Kind    string `json:"kind"` // KindStatus
	OrderID string `json:"orderId"`
	Round   int    `json:"round"` // 1, then one more per resubmission
	Seq     int    `json:"seq"`   // orders and dedupes the messages of an order
	Event   string `json:"event"`
	Step    string `json:"step,omitempty"`
	State   string `json:"state"` // the task's state after the event
	Error   string `json:"error,omitempty"`
	// Result is what the remote service answered a step (step-done,
	// undo-done): its JSON, or its text as a JSON string.
	Result json.RawMessage `json:"result,omitempty"`
	At     time.Time       `json:"at"`
}

// DecodeStatus parses a status notification as strictly as the product
// reads its own queues: for a client of a reply queue written in Go.
func DecodeStatus(body string) (Status, error) {
	var st Status
	if err := decodeStrict(body, MaxWorkBytes, &st); err != nil {
		return st, err
	}
	if st.Kind != KindStatus || !idPattern.MatchString(st.OrderID) || st.Event == "" {
		return st, Invalid("status: kind %q, orderId %q or event %q", truncate(st.Kind), truncate(st.OrderID), truncate(st.Event))
	}
	return st, nil
}
