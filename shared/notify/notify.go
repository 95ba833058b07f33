// Package notify posts status notifications to the reply queues orders name,
// and only to queues the deployment allows: otherwise anyone who can send an
// order could make the pipeline write anywhere.
package notify

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/sas-go/sas/shared/health"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/workflow"
)

// Sender sends queue messages.
type Sender interface {
	SendJSON(ctx context.Context, queueURL string, v any, delay time.Duration) error
}

// Checker says whether a reply queue may be written to.
type Checker interface {
	Check(queueURL string) error
}

// Stored allows the reply queue an order was stored with: it was checked
// against the deployment's Allowed when the order was accepted. For the
// operator's tools, which tell an order's caller of what they did.
type Stored struct{}

// Check allows every queue.
func (Stored) Check(string) error { return nil }

// Notifier posts status messages; delivery is best effort (a failed send is
// logged and counted, and never undoes the state change it reports).
type Notifier struct {
	send    Sender
	allowed Checker
	metrics *metrics.Emitter
	log     *slog.Logger
}

// New returns a notifier.
func New(send Sender, allowed Checker, m *metrics.Emitter, log *slog.Logger) *Notifier {
	return &Notifier{send: send, allowed: allowed, metrics: m, log: log}
}

// Event describes what happened to an order.
type Event struct {
	OrderID    string
	ReplyQueue string // "" means nobody asked: nothing is sent
	Round      int
	Event      workflow.Event
	Ref        workflow.Ref // the record the event is about (a forEach item's included)
	Step       string       // its name
	State      workflow.State
	Error      string
	Result     json.RawMessage // the remote's answer to a step done
	At         time.Time
}

// Post sends the status message for e, if its order named an allowed queue.
func (n *Notifier) Post(ctx context.Context, e Event) {
	if e.ReplyQueue == "" {
		return
	}
	if err := n.allowed.Check(e.ReplyQueue); err != nil {
		n.log.Warn("status not sent", "order_id", e.OrderID, "err", err)
		return
	}
	st := message.Status{Kind: message.KindStatus, OrderID: e.OrderID, Round: max(e.Round, 1),
		Seq: workflow.Seq(max(e.Round, 1), e.Event, e.Ref), Event: string(e.Event), Step: e.Step,
		State: string(e.State), Error: message.Clip(e.Error, message.MaxErrorBytes), Result: e.Result, At: e.At.UTC()}
	if err := n.send.SendJSON(ctx, e.ReplyQueue, st, 0); err != nil {
		n.metrics.Count(metrics.NotificationsFailed, 1, map[string]any{"OrderID": e.OrderID})
		n.log.Warn("status not sent", "order_id", e.OrderID, "event", e.Event, "err", err)
	}
}

// PostEnded posts a task's end; it counts nothing: the state store's write
// that ended the task counted it (EndCounter). The events: processed,
// compensated (Failed, its work undone), cancelled (its work undone) or
// compensation-failed.
func (n *Notifier) PostEnded(ctx context.Context, orderID, replyTo string, round int, end workflow.State, why string, now time.Time) {
	e := Event{OrderID: orderID, ReplyQueue: replyTo, Round: round, State: end, Error: why, At: now}
	switch end {
	case workflow.Processed:
		e.Event = workflow.EventProcessed
	case workflow.Failed:
		e.Event = workflow.EventCompensated
	case workflow.Cancelled:
		e.Event = workflow.EventCancelled
	default:
		e.Event = workflow.EventCompensationFailed
	}
	level := slog.LevelInfo
	if end == workflow.Processed {
		level = slog.LevelDebug // every order that goes well: its metric counts it
	}
	n.log.Log(ctx, level, "order ended", "order_id", orderID, "state", end)
	n.Post(ctx, e)
}

// EndCounter is CountEnd on m, for the state store to call at each end its
// writes make (statestore.Store.WithEnds): every end, whoever wrote it, is
// counted in the metrics of the function (or the operator's tool) whose
// write ended it, once.
func EndCounter(m *metrics.Emitter) func(health.End) {
	return func(e health.End) { CountEnd(m, e) }
}

// CountEnd counts a task's end in its metric (OrdersProcessed,
// OrdersCompensated or OrdersCancelled), once: the writer whose conditional
// write ended the task counts it (EndCounter). A CompensationFailed end is
// counted with the alert that reports it (alert.Alerter.StepFailed): every
// one is alerted. Every end, CompensationFailed included, is also kept for
// its workflow's health metrics (health.Emit), when e names its workflow.
func CountEnd(m *metrics.Emitter, e health.End) {
	health.Emit(m, e)
	var name string
	switch e.State {
	case workflow.Processed:
		name = metrics.OrdersProcessed
	case workflow.Failed:
		name = metrics.OrdersCompensated
	case workflow.Cancelled:
		name = metrics.OrdersCancelled
	default:
		return
	}
	m.Count(name, 1, map[string]any{"OrderID": e.OrderID})
}

// Failed announces that a record failed for good (e has the order, the step
// and the error) and the task is now next: for a step, "failed", then the
// task's end if it ended (nothing to undo, or a pivot left to the operator);
// for an undo action, the end in CompensationFailed. It counts nothing: the
// write that failed the record counted an end (EndCounter).
func (n *Notifier) Failed(ctx context.Context, e Event, undo bool, next workflow.State) {
	if !undo {
		e.Event, e.State = workflow.EventFailed, next
		n.Post(ctx, e)
	}
	if next.Ended() {
		n.PostEnded(ctx, e.OrderID, e.ReplyQueue, e.Round, next, e.Error, e.At)
	}
}

// CancelAccepted tells the order's caller its cancel was accepted, and the
// order's end if the cancel ended it at once (nothing had run).
func (n *Notifier) CancelAccepted(ctx context.Context, e Event, state workflow.State) {
	e.Event, e.State = workflow.EventCancelRequested, state
	n.Post(ctx, e)
	if state == workflow.Cancelled {
		n.PostEnded(ctx, e.OrderID, e.ReplyQueue, e.Round, state, "", e.At)
	}
}
