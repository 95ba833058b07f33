// Package scheduler is the Scheduler handler: it claims ready steps and asks
// their Agents to run them, and records the Agents' replies, fenced by the
// attempt, moving the task on to its next step or its end.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/sqsbatch"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Store is the part of the state store the Scheduler uses.
type Store interface {
	Claim(ctx context.Context, orderID string, step int, owner string, now time.Time) (statestore.Step, error)
	Complete(ctx context.Context, c statestore.Completion) error
	Fail(ctx context.Context, orderID string, step, attempt int, reason string, alertDue, now time.Time) error
	MarkAlerted(ctx context.Context, orderID string, step int, now time.Time) error
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
	Workflow    workflow.Definition
	AgentQueues map[string]string // agent name → its request queue URL
	DLQURL      string            // the scheduler queue's DLQ, for rejected messages
	InstanceID  string            // this instance's LockedBy value
}

// Handler is the Scheduler Lambda handler.
type Handler struct {
	cfg     Config
	store   Store
	send    Sender
	alerts  Alerter
	metrics *metrics.Emitter
	log     *slog.Logger
	batch   *sqsbatch.Processor
	Now     func() time.Time
}

// New builds the handler; it fails if an agent of the workflow has no queue.
func New(cfg Config, store Store, send Sender, alerts Alerter, m *metrics.Emitter, log *slog.Logger) (*Handler, error) {
	for _, a := range cfg.Workflow.Agents() {
		if cfg.AgentQueues[a] == "" {
			return nil, fmt.Errorf("scheduler: no request queue configured for agent %q", a)
		}
	}
	if cfg.InstanceID == "" {
		return nil, errors.New("scheduler: empty instance id")
	}
	return &Handler{cfg: cfg, store: store, send: send, alerts: alerts, metrics: m, log: log, Now: time.Now,
		batch: &sqsbatch.Processor{Name: "scheduler", DLQURL: cfg.DLQURL, Rejecter: send, Metrics: m, Log: log}}, nil
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
		if m.Step >= len(h.cfg.Workflow.Steps) {
			return message.Invalid("schedule for %s: step %d is not in workflow %q", m.OrderID, m.Step, h.cfg.Workflow.Name)
		}
		return h.start(ctx, m.OrderID, m.Step)
	case message.AgentReply:
		if m.Step >= len(h.cfg.Workflow.Steps) {
			return message.Invalid("reply for %s: step %d is not in workflow %q", m.OrderID, m.Step, h.cfg.Workflow.Name)
		}
		if m.OK {
			return h.complete(ctx, m)
		}
		return h.fail(ctx, m)
	}
	return fmt.Errorf("scheduler: unhandled message %T", msg)
}

// start claims a ready step and sends its Agent the request.
func (h *Handler) start(ctx context.Context, orderID string, step int) error {
	st, err := h.store.Claim(ctx, orderID, step, h.cfg.InstanceID, h.Now())
	if errors.Is(err, statestore.ErrNotClaimable) {
		h.log.Debug("step not claimable; nothing to do", "order_id", orderID, "step", step)
		return nil
	}
	if err != nil {
		return err
	}
	h.metrics.Count(metrics.StepsClaimed, 1, map[string]any{"OrderID": orderID, "Step": st.Name, "Attempt": st.Attempt})
	req := message.AgentRequest{
		OrderID: orderID, Step: step, StepName: st.Name, Attempt: st.Attempt,
		CompleteBy: st.CompleteBy.UnixMilli(), IdempotencyKey: workflow.IdempotencyKey(orderID, st.Name),
		Payload: []byte(st.Payload),
	}
	// If this send is lost the claim times out and the Supervisor recovers it.
	return h.send.SendJSON(ctx, h.cfg.AgentQueues[st.Agent], req, 0)
}

func (h *Handler) complete(ctx context.Context, r message.AgentReply) error {
	now := h.Now()
	next := r.Step + 1
	if next >= len(h.cfg.Workflow.Steps) {
		next = -1
	}
	err := h.store.Complete(ctx, statestore.Completion{OrderID: r.OrderID, Step: r.Step, Attempt: r.Attempt,
		Result: string(r.Result), Next: next, NextDueAt: now.Add(h.cfg.Workflow.PickupTimeout), Now: now})
	if errors.Is(err, statestore.ErrStale) {
		h.stale(r)
		return nil
	}
	if err != nil {
		return err
	}
	if next < 0 {
		h.metrics.Count(metrics.OrdersProcessed, 1, map[string]any{"OrderID": r.OrderID})
		h.log.Info("order processed", "order_id", r.OrderID)
		return nil
	}
	// If this start is lost, the ready step's pickup deadline brings the
	// Supervisor.
	return h.start(ctx, r.OrderID, next)
}

func (h *Handler) fail(ctx context.Context, r message.AgentReply) error {
	now := h.Now()
	err := h.store.Fail(ctx, r.OrderID, r.Step, r.Attempt, r.Error, now.Add(h.cfg.Workflow.PickupTimeout), now)
	if errors.Is(err, statestore.ErrStale) {
		h.stale(r)
		return nil
	}
	if err != nil {
		return err
	}
	h.log.Error("step failed with a non-transient error", "order_id", r.OrderID, "step", r.StepName, "err", r.Error)
	f := alert.Failure{OrderID: r.OrderID, Step: r.Step, StepName: r.StepName, Attempt: r.Attempt,
		LastError: r.Error, DetectedBy: "scheduler", At: now}
	if err := h.alerts.StepFailed(ctx, f); err != nil {
		// The step stays in the deadline index: the Supervisor will alert.
		h.log.Warn("alert not sent; the supervisor will send it", "order_id", r.OrderID, "err", err)
		return nil
	}
	return h.store.MarkAlerted(ctx, r.OrderID, r.Step, now)
}

func (h *Handler) stale(r message.AgentReply) {
	h.metrics.Count(metrics.StaleReplies, 1, map[string]any{"OrderID": r.OrderID, "Attempt": r.Attempt})
	h.log.Info("reply of an attempt that is not current ignored", "order_id", r.OrderID, "step", r.Step, "attempt", r.Attempt)
}
