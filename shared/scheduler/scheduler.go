// Package scheduler is the Scheduler handler: it sends each ready step (and
// undo action) to its Agent, whose claim starts the attempt; on an Agent's
// reply (whose outcome the Agent recorded, and with it the task's next move:
// shared/outcome) it starts what the outcome made ready, posts the order's
// status notifications and alerts on a refusal.
package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/sqsbatch"
	"github.com/sas-go/sas/shared/workflow"
)

// Store is the part of the state store the Scheduler uses: the alert's
// record, and the outcome of a reply an Agent did not record.
type Store interface {
	AlertPending(ctx context.Context, orderID string, r workflow.Ref) (bool, error)
	MarkAlerted(ctx context.Context, orderID string, r workflow.Ref, now time.Time) error
	outcome.Store
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
		batch: &sqsbatch.Processor{Name: "scheduler", DLQURL: cfg.DLQURL, Rejecter: d.Send, Metrics: d.Metrics, Log: d.Log,
			Buffer: sqsbatch.BufferingOf(d.Send), OnceAtEnd: true}}, nil
}

// Handle processes a batch from the scheduler queue or an agent response queue.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return h.batch.Handle(ctx, ev, h.record), nil
}

func (h *Handler) record(ctx context.Context, rec events.SQSMessage) error {
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
		return h.start(ctx, def, m.OrderID, m.Ref(), m.Payload)
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
	if _, ok := def.Action(r); !ok {
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

// start sends a ready record's Agent the request to claim and run it.
func (h *Handler) start(ctx context.Context, def workflow.Definition, orderID string, r workflow.Ref, payload json.RawMessage) error {
	return h.dispatch.Start(ctx, def, orderID, r, payload)
}

// reply carries out what follows a reply: the records its outcome made ready
// are started, the order's caller is told, and a refusal is alerted. The
// Agent recorded the outcome before it replied; a reply it did not record
// (from an Agent of an earlier version) is recorded here first.
func (h *Handler) reply(ctx context.Context, def workflow.Definition, r message.AgentReply) error {
	if !r.Recorded {
		rec, err := outcome.Recorder{Store: h.store}.Record(ctx, def, outcome.Attempt{OrderID: r.OrderID, Ref: r.Ref(),
			Name: r.StepName, Attempt: r.Attempt, Round: r.Round, Refusal: r.Error, Now: h.Now()})
		if err != nil {
			return err
		}
		if rec.Stale {
			h.stale(r)
			return nil
		}
		if rec.State.Ended() {
			notify.CountEnd(h.metrics, r.OrderID, rec.State)
		}
		crash(h.Crash, "scheduler.after-record")
		r.State, r.Ready = string(rec.State), message.Starts(rec.Ready)
	}
	if r.OK {
		h.done(ctx, r)
	} else if err := h.refused(ctx, def, r); err != nil {
		return err
	}
	for _, s := range r.Ready {
		if err := h.start(ctx, def, r.OrderID, s.Ref(), r.Payload); err != nil {
			return err
		}
	}
	return nil
}

// done tells the order's caller a step or undo action is done, and, if the
// order ended with it, how it ended.
func (h *Handler) done(ctx context.Context, r message.AgentReply) {
	now, state, round := h.Now(), workflow.State(r.State), roundOf(r)
	ev := notify.Event{OrderID: r.OrderID, ReplyQueue: r.ReplyTo, Round: round, Event: workflow.EventStepDone,
		Index: r.Step, Step: r.StepName, State: state, Result: r.Result, At: now}
	if r.Undo {
		ev.Event = workflow.EventUndoDone
	}
	h.notify.Post(ctx, ev)
	if state.Ended() {
		h.notify.PostEnded(ctx, r.OrderID, r.ReplyTo, round, state, "", now) // its recorder counted the end
	}
}

// refused tells the order's caller and the operator that a record was
// refused for good by its service. The alert goes once: a reply delivered
// again finds it sent (if the send fails, the record stays due and the
// Supervisor sends it).
func (h *Handler) refused(ctx context.Context, def workflow.Definition, r message.AgentReply) error {
	now, ref := h.Now(), r.Ref()
	after := workflow.AfterRefusal(ref.Undo, def.UndoFrom(ref.Index))
	h.log.Error("failed with a non-transient error", "order_id", r.OrderID, "step", r.StepName, "undo", ref.Undo, "err", r.Error)
	h.notify.Failed(ctx, notify.Event{OrderID: r.OrderID, ReplyQueue: r.ReplyTo, Round: roundOf(r), Index: ref.Index,
		Step: r.StepName, Error: r.Error, At: now}, ref.Undo, workflow.State(r.State))
	if pending, err := h.store.AlertPending(ctx, r.OrderID, ref); err != nil || !pending {
		return err
	}
	a := alert.Failure{OrderID: r.OrderID, Step: r.Step, StepName: r.StepName, Undo: ref.Undo, Attempt: r.Attempt,
		LastError: r.Error, Compensation: alert.CompensationOf(ref.Undo, after), OrderState: after.Next, DetectedBy: "scheduler", At: now}
	if err := h.alerts.StepFailed(ctx, a); err != nil {
		// The record stays in the deadline index: the Supervisor will alert.
		h.log.Warn("alert not sent; the supervisor will send it", "order_id", r.OrderID, "err", err)
		return nil
	}
	return h.store.MarkAlerted(ctx, r.OrderID, ref, now)
}

func (h *Handler) stale(r message.AgentReply) {
	h.metrics.Count(metrics.StaleReplies, 1, map[string]any{"OrderID": r.OrderID, "Attempt": r.Attempt})
	h.log.Info("reply of an attempt that is not current ignored", "order_id", r.OrderID, "step", r.Step,
		"undo", r.Undo, "attempt", r.Attempt)
}

// roundOf is the round the reply belongs to (echoed from the request).
func roundOf(r message.AgentReply) int { return max(r.Round, 1) }

func crash(f func(string), point string) {
	if f != nil {
		f(point)
	}
}
