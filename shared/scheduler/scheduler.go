// Package scheduler is the Scheduler handler: it sends each ready step (and
// undo action) to its Agent, whose claim starts the attempt; on an Agent's
// reply (whose outcome the Agent recorded, and with it the task's next move:
// shared/outcome) it starts what the outcome made ready, posts the order's
// status notifications and alerts on a refusal.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/sqsbatch"
	"github.com/sas-go/sas/shared/workflow"
)

// Store is the part of the state store the Scheduler uses: the alert's
// record; a wait or a timer armed, woken or completed; the outcome of a reply
// an Agent did not record.
type Store interface {
	AlertPending(ctx context.Context, orderID string, r workflow.Ref) (bool, error)
	MarkAlerted(ctx context.Context, orderID string, r workflow.Ref, now time.Time) error
	outcome.Store
	outcome.StartStore
	dispatch.DefinitionReader
}

// Sender sends queue messages.
type Sender interface {
	SendJSON(ctx context.Context, queueURL string, v any, delay time.Duration) error
	Reject(ctx context.Context, dlqURL, body, source, reason string) error
}

// Alerter tells the operator a step failed for good.
type Alerter interface {
	StepFailed(ctx context.Context, f alert.Failure) error
}

// Config is what the Scheduler needs to know of its deployment.
type Config struct {
	Workflows   workflow.Set      // the workflows the deployment runs (an order of another version reads its own back)
	AgentQueues map[string]string // agent name → its request queue URL
	DLQURL      string            // the scheduler queue's DLQ, for rejected messages
}

// Deps are what the Scheduler calls.
type Deps struct {
	Store   Store
	Send    Sender
	Alerts  Alerter
	Notify  *notify.Notifier
	Metrics *metrics.Emitter
	Log     *slog.Logger
	// Budget bounds the payload bytes the timers' until documents it reads
	// hold at once (nil: none).
	Budget *kept.Budget
	// Kept opens what those documents are made of (nil: inline values
	// only, none sealed).
	Kept *kept.Boundary
}

// Handler is the Scheduler Lambda handler.
type Handler struct {
	cfg      Config
	store    Store
	send     Sender
	alerts   Alerter
	notify   *notify.Notifier
	metrics  *metrics.Emitter
	log      *slog.Logger
	batch    *sqsbatch.Processor
	dispatch dispatch.Dispatcher
	catalog  *dispatch.Catalog
	recorder outcome.Recorder
	budget   *kept.Budget
	kept     *kept.Boundary
	Now      func() time.Time
	// Crash, if set, is called at each crash point (after a write, before the
	// send that follows it); a chaos test makes it panic there. Nil in production.
	Crash func(point string)
}

// New builds the handler; it fails if an agent of the workflows has no queue.
func New(cfg Config, d Deps) (*Handler, error) {
	if cfg.Workflows.IsZero() {
		return nil, fmt.Errorf("scheduler: no workflow")
	}
	disp := dispatch.Dispatcher{AgentQueues: cfg.AgentQueues, Send: d.Send}
	if err := disp.Check(cfg.Workflows); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return &Handler{cfg: cfg, store: d.Store, send: d.Send, alerts: d.Alerts, notify: d.Notify, metrics: d.Metrics,
		log: d.Log, Now: time.Now, dispatch: disp, catalog: &dispatch.Catalog{Workflows: cfg.Workflows, Store: d.Store},
		recorder: outcome.Recorder{Store: d.Store}, budget: d.Budget, kept: d.Kept,
		batch: &sqsbatch.Processor{Name: "scheduler", DLQURL: cfg.DLQURL, Rejecter: d.Send, Metrics: d.Metrics, Log: d.Log,
			Buffer: sqsbatch.BufferingOf(d.Send), OnceAtEnd: true}}, nil
}

// Handle processes a batch from the scheduler queue or an agent response queue.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return h.batch.Handle(ctx, ev, h.record), nil
}

func (h *Handler) record(ctx context.Context, rec events.SQSMessage) error {
	err := h.take(ctx, rec)
	if errors.Is(err, outcome.ErrMoved) {
		// Sent before its order moved to another version: what the move
		// made ready was sent again under it.
		h.log.Info("message of a version its order no longer runs dropped", "err", err)
		return nil
	}
	return err
}

// take acts on one message of the scheduler queue or a response queue.
func (h *Handler) take(ctx context.Context, rec events.SQSMessage) error {
	msg, err := message.DecodeSchedulerMessage(rec.Body)
	if err != nil {
		return err
	}
	switch m := msg.(type) {
	case message.Schedule:
		def, err := h.definition(ctx, "schedule", m.OrderID, m.Workflow, m.Version, m.Ref())
		if err != nil {
			return err
		}
		if m.Wake {
			return h.wake(ctx, def, m)
		}
		return h.start(ctx, def, m.OrderID, []workflow.Ref{m.Ref()}, m.Payload)
	case message.AgentReply:
		def, err := h.definition(ctx, "reply", m.OrderID, m.Workflow, m.Version, m.Ref())
		if err != nil {
			return err
		}
		h.replyWait(rec, m)
		return h.reply(ctx, def, m)
	}
	return fmt.Errorf("scheduler: unhandled message %T", msg)
}

// replyWait reports how long a reply waited in its response queue, from
// the message's SentTimestamp (SQS sets it; Lambda passes it on): the queue
// wait of the Scheduler's own backlog.
func (h *Handler) replyWait(rec events.SQSMessage, r message.AgentReply) {
	sent, err := strconv.ParseInt(rec.Attributes["SentTimestamp"], 10, 64)
	if err != nil {
		return
	}
	h.metrics.Duration(metrics.ReplyWait, max(h.Now().Sub(time.UnixMilli(sent)), 0),
		map[string]any{"OrderID": r.OrderID, "Step": r.StepName})
}

// definition is the workflow the order runs, which must have record r.
func (h *Handler) definition(ctx context.Context, what, orderID, name, version string, r workflow.Ref) (workflow.Definition, error) {
	def, err := h.catalog.For(ctx, orderID, name, version)
	if err != nil {
		return def, err
	}
	if _, ok := def.Action(r); !ok && (r.Undo || r.Index < 0 || r.Index >= len(def.Steps)) {
		return def, message.Invalid("%s for %s: %s is not in workflow %q", what, orderID, describe(r), def.Name)
	}
	return def, nil
}

func describe(r workflow.Ref) string {
	if r.Undo {
		return fmt.Sprintf("the undo of step %d", r.Index)
	}
	return fmt.Sprintf("step %d", r.Index)
}
