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
// included), so a caller can order status messages and drop duplicates. r
// is the record the event is about, a forEach item's included (ignored
// where the event is about none): each item done has a number of its own.
func Seq(round int, e Event, r Ref) int {
	base := round * 1_000_000
	rec := r.Index*(MaxForEachItems+1) + r.Item // unique per record: < 50·101
	switch e {
	case EventReceived:
		return base
	case EventStepDone:
		return base + 1_000 + rec
	case EventProcessed:
		return base + 10_000
	case EventFailed:
		return base + 20_000 + rec
	case EventCancelRequested:
		return base + 30_000
	case EventCancelRefused:
		return base + 30_001
	case EventUndoDone:
		return base + 40_000 + (MaxSteps*(MaxForEachItems+1) - rec) // undos run from the latest back
	case EventCompensated:
		return base + 50_000
	case EventCompensationFailed:
		return base + 50_001
	case EventCancelled:
		return base + 50_002
	default: // EventRejected: about another message than the order's
		return base + 99_999
	}
}
