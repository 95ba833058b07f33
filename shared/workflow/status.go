package workflow

// Event is a status notification's kind.
type Event string

// The events a caller is told about, in the order they can happen.
const (
	EventReceived           Event = "received"
	EventStepDone           Event = "step-done"
	EventProcessed          Event = "processed"
	EventFailed             Event = "failed"
	EventUndoDone           Event = "undo-done"
	EventCompensated        Event = "compensated"
	EventCompensationFailed Event = "compensation-failed"
	EventCancelRequested    Event = "cancel-requested" // accepted: nothing new starts
	EventCancelRefused      Event = "cancel-refused"   // refused, with the reason
	EventCancelled          Event = "cancelled"        // ended Cancelled, the completed steps undone
	EventRejected           Event = "rejected"         // a resend of the OrderID with other content, refused
)

// Seq is the sequence number of an event of a round: the same event always
// gets the same number, and numbers grow in the order events happen (rounds
// included), so a caller can order status messages and drop duplicates.
// index is the step the event is about (ignored where none is).
func Seq(round int, e Event, index int) int {
	base := round * 10_000
	switch e {
	case EventReceived:
		return base
	case EventStepDone:
		return base + 100 + index
	case EventProcessed:
		return base + 1000
	case EventFailed:
		return base + 1001
	case EventUndoDone:
		return base + 2000 + (999 - index) // undos run from the last step back
	case EventCancelRequested:
		return base + 1500
	case EventCancelRefused:
		return base + 1501
	case EventCompensated:
		return base + 3000
	case EventCompensationFailed:
		return base + 3001
	case EventCancelled:
		return base + 3002
	default: // EventRejected: about another message than the order's
		return base + 9999
	}
}
