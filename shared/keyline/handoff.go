package keyline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sender sends a queue message (the queue package's sender does).
type Sender interface {
	SendJSON(ctx context.Context, queueURL string, v any, delay time.Duration) error
}

// NotHandedOn is what is logged when a freed slot's hand-off was not sent
// (waiter attribute: to whom): its reservation lapses after ReserveFor and
// goes to the next in line, and the waiter looks again at its fallback
// poll.
const NotHandedOn = "a slot's hand-off not sent: its reservation ends by itself"

// HandOff hands freed slots on: it sends the request of each waiter a slot
// was reserved for, at once, to its agent's request queue, where the call
// comes back and takes it (Lines.Acquire). It is the one place a waiter's
// request is sent from.
type HandOff struct {
	Send Sender
	// Queues maps each agent's name to its request queue's URL.
	Queues map[string]string
}

// Hand sends the requests of the waiters handed a slot of agent's key. A
// request not sent costs its waiter time, no more: its reservation lapses
// after ReserveFor and goes to the next in line.
func (h HandOff) Hand(ctx context.Context, agent, key string, handed []Waiter) error {
	var errs []error
	for _, w := range handed {
		url := h.Queues[agent]
		if url == "" {
			errs = append(errs, fmt.Errorf("hand a slot of agent %s on: no request queue", agent))
			continue
		}
		if err := h.Send.SendJSON(ctx, url, json.RawMessage(w.Request), 0); err != nil {
			errs = append(errs, fmt.Errorf("hand a slot of agent %s's key %q on to %s: %w", agent, key, w.ID, err))
		}
	}
	return errors.Join(errs...)
}
