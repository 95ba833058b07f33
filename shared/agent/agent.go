// Package agent is the Agent handler: it wraps the calls to one remote
// service with retries (exponential backoff and jitter), a circuit breaker and
// an idempotency key, all bounded by the step's CompleteBy, and replies on its
// response queue.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/sqsbatch"
)

// errDeadline means CompleteBy passed before the remote call succeeded.
var errDeadline = errors.New("CompleteBy passed")

// Sender sends queue messages.
type Sender interface {
	SendJSON(ctx context.Context, queueURL string, v any, delay time.Duration) error
	Reject(ctx context.Context, dlqURL, body, source, reason string) error
}

// Config is what an Agent needs to know of its deployment.
type Config struct {
	Name             string // the agent (remote service) name
	ResponseQueueURL string
	DLQURL           string // its request queue's DLQ
	Backoff          resilience.Backoff
	CallTimeout      time.Duration // bound on one remote call
	// Margin is kept free before CompleteBy so a reply can still arrive in time.
	Margin time.Duration
}

// Handler is the Agent Lambda handler.
type Handler struct {
	cfg     Config
	remote  Remote
	breaker *resilience.Breaker
	send    Sender
	metrics *metrics.Emitter
	log     *slog.Logger
	batch   *sqsbatch.Processor
	Now     func() time.Time
	Sleep   func(ctx context.Context, d time.Duration) error
	// Crash, if set, is called after the remote call and before the reply; a
	// chaos test makes it panic there. Nil in production.
	Crash func(point string)
}

// New builds the handler.
func New(cfg Config, remote Remote, breaker *resilience.Breaker, send Sender, m *metrics.Emitter, log *slog.Logger) *Handler {
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	return &Handler{cfg: cfg, remote: remote, breaker: breaker, send: send, metrics: m, log: log,
		Now: time.Now, Sleep: sleep,
		batch: &sqsbatch.Processor{Name: "agent-" + cfg.Name, DLQURL: cfg.DLQURL, Rejecter: send, Metrics: m, Log: log,
			Buffer: sqsbatch.BufferingOf(send)}}
}

// Handle processes a batch from the agent's request queue.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return h.batch.Handle(ctx, ev, h.record), nil
}

func (h *Handler) record(ctx context.Context, rec events.SQSMessage) error {
	req, err := message.DecodeAgentRequest(rec.Body)
	if err != nil {
		return err
	}
	deadline := req.Deadline().Add(-h.cfg.Margin)
	if !h.Now().Before(deadline) {
		h.expired(req, "request arrived after CompleteBy")
		return nil
	}
	result, err := h.call(ctx, req, deadline)
	if h.Crash != nil {
		h.Crash("agent.after-call")
	}
	reply := message.AgentReply{Kind: message.KindReply, OrderID: req.OrderID, Step: req.Step, Undo: req.Undo,
		StepName: req.StepName, Attempt: req.Attempt, ReplyTo: req.ReplyTo, Round: req.Round}
	switch {
	case err == nil:
		reply.OK, reply.Result = true, resultJSON(result)
	case IsPermanent(err):
		reply.Error = err.Error()
		h.log.Warn("non-transient remote fault; replying with the error", "order_id", req.OrderID, "err", err)
	case errors.Is(err, errDeadline):
		h.expired(req, err.Error())
		return nil // send nothing: the Supervisor recovers the step
	default:
		return err // the function itself is out of time: SQS retries the request
	}
	return h.send.SendJSON(ctx, h.cfg.ResponseQueueURL, reply, 0)
}

// call runs the remote call with retries until it succeeds, fails
// permanently, or the deadline (CompleteBy less the margin) comes.
func (h *Handler) call(ctx context.Context, req message.AgentRequest, deadline time.Time) ([]byte, error) {
	for n := 0; ; n++ {
		if err := h.breaker.Allow(); err == nil {
			res, err := h.try(ctx, req, deadline)
			h.breaker.Record(err != nil && !IsPermanent(err))
			if err == nil || IsPermanent(err) {
				return res, err
			}
			h.log.Debug("transient remote fault", "order_id", req.OrderID, "attempt", req.Attempt, "try", n, "err", err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		wait := h.cfg.Backoff.Delay(n)
		if !h.Now().Add(wait).Before(deadline) {
			return nil, errDeadline
		}
		h.metrics.Count(metrics.AgentRetries, 1, map[string]any{"OrderID": req.OrderID, "Try": n + 1})
		if err := h.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

func (h *Handler) try(ctx context.Context, req message.AgentRequest, deadline time.Time) ([]byte, error) {
	limit := h.Now().Add(h.cfg.CallTimeout)
	if deadline.Before(limit) {
		limit = deadline
	}
	cctx, cancel := context.WithDeadline(ctx, limit)
	defer cancel()
	return h.remote.Apply(cctx, req.StepName, req.IdempotencyKey, req.Payload)
}

func (h *Handler) expired(req message.AgentRequest, why string) {
	h.metrics.Count(metrics.AgentDeadlineExpired, 1, map[string]any{"OrderID": req.OrderID, "Attempt": req.Attempt})
	h.log.Warn("attempt abandoned; no reply sent", "order_id", req.OrderID, "attempt", req.Attempt, "why", why)
}

// resultJSON keeps a JSON result as is and quotes anything else.
func resultJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return b
	}
	q, _ := json.Marshal(string(b))
	return q
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
