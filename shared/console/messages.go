package console

import (
	"slices"
	"time"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// statusMessage is one status notification an order was sent.
type statusMessage struct {
	At    time.Time
	Event workflow.Event
	Step  string
	State workflow.State
	Error string
}

// statusMessages derives the status notifications an order was sent from its
// task and records, by the rules the handlers post them by (Submission: it
// was received; the Scheduler: each step and undo action done, a step
// failed, the end; a cancel accepted). The reply queue is not read: it is
// the order's caller's. They are the latest round's: the records keep no
// earlier round's times.
func statusMessages(s operator.Status) []statusMessage {
	t := s.Order
	out := []statusMessage{{At: t.CreatedAt, Event: workflow.EventReceived, State: workflow.Pending}}
	out = append(out, recordMessages(s)...)
	if t.CancelledBy != "" {
		out = append(out, statusMessage{At: t.CancelledAt, Event: workflow.EventCancelRequested, State: workflow.Pending})
	}
	if end, ok := endEvent(t.State); ok {
		out = append(out, statusMessage{At: t.CompletedAt, Event: end, State: t.State})
	}
	slices.SortStableFunc(out, func(a, b statusMessage) int { return a.At.Compare(b.At) })
	if n := len(out); t.State.Ended() && n > 1 {
		out[n-2].State = t.State // the last record's message already says the end
	}
	return out
}

// recordMessages are the messages the Scheduler sent for the records: each
// step and undo action done, and a step failed for good.
func recordMessages(s operator.Status) []statusMessage {
	compensated := false
	for _, r := range s.Records {
		compensated = compensated || (r.Undo && r.State != workflow.Pending && r.State != operator.NotNeeded)
	}
	var out []statusMessage
	for _, r := range s.Records {
		switch {
		case r.State == workflow.Processed && !r.Undo:
			out = append(out, statusMessage{At: r.DoneAt, Event: workflow.EventStepDone, Step: r.Name, State: workflow.Pending})
		case r.State == workflow.Processed:
			out = append(out, statusMessage{At: r.DoneAt, Event: workflow.EventUndoDone, Step: r.Name, State: workflow.Compensating})
		case r.State == workflow.Error && !r.Undo:
			next := s.Order.State
			if compensated {
				next = workflow.Compensating
			}
			out = append(out, statusMessage{At: r.DoneAt, Event: workflow.EventFailed, Step: r.Name, State: next, Error: r.LastError})
		}
	}
	return out
}

func endEvent(s workflow.State) (workflow.Event, bool) {
	switch s {
	case workflow.Processed:
		return workflow.EventProcessed, true
	case workflow.Failed:
		return workflow.EventCompensated, true
	case workflow.Cancelled:
		return workflow.EventCancelled, true
	case workflow.CompensationFailed:
		return workflow.EventCompensationFailed, true
	}
	return "", false
}
