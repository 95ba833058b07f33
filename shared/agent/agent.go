// Package agent is the Agent handler: it claims the ready step a request
// names (the claim starts the attempt and its clock, CompleteBy), wraps the
// calls to one remote service with retries (exponential backoff and jitter),
// a circuit breaker and an idempotency key, all bounded by CompleteBy, and
// replies on its response queue.
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
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// errDeadline means CompleteBy passed before the remote call succeeded.
var errDeadline = errors.New("CompleteBy passed")

// Sender sends queue messages.
type Sender interface {
	SendJSON(ctx context.Context, queueURL string, v any, delay time.Duration) error
	Reject(ctx context.Context, dlqURL, body, source, reason string) error
}

// ReplyFlush is how long an Agent holds the replies of a batch's quick
// calls for the slow ones: the batch's replies go out in one request if its
// calls end within it, and a slow call delays the others' replies at most
// this long.
const ReplyFlush = 250 * time.Millisecond

// Store is the part of the state store an Agent uses: the claim, and the
// order, for a request that does not carry it.
type Store interface {
	Claim(ctx context.Context, c statestore.Claim) (statestore.Step, error)
	Order(ctx context.Context, orderID string) (string, error)
}

// Config is what an Agent needs to know of its deployment.
type Config struct {
	Name             string // the agent (remote service) name
	InstanceID       string // this instance's name in the records it claims (LockedBy)
	ResponseQueueURL string
	DLQURL           string // its request queue's DLQ
	Backoff          resilience.Backoff
	CallTimeout      time.Duration // bound on one remote call
	// Margin is kept free before CompleteBy so a reply can still arrive in time.
	Margin time.Duration
}

// Deps are what an Agent calls.
type Deps struct {
	Remote  Remote
	Breaker *resilience.Breaker
	Store   Store
	Send    Sender
	Metrics *metrics.Emitter
	Log     *slog.Logger
}

// Handler is the Agent Lambda handler.
type Handler struct {
	cfg     Config
	remote  Remote
	breaker *resilience.Breaker
	store   Store
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
func New(cfg Config, d Deps) *Handler {
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	return &Handler{cfg: cfg, remote: d.Remote, breaker: d.Breaker, store: d.Store, send: d.Send, metrics: d.Metrics,
		log: d.Log, Now: time.Now, Sleep: sleep,
		batch: &sqsbatch.Processor{Name: "agent-" + cfg.Name, DLQURL: cfg.DLQURL, Rejecter: d.Send, Metrics: d.Metrics,
			Log: d.Log, Buffer: sqsbatch.BufferingOf(d.Send), FlushEvery: ReplyFlush}}
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
	st, err := h.claim(ctx, req)
	if err != nil || st == nil {
		return err
	}
	if h.Crash != nil {
		h.Crash("agent.after-claim") // the attempt runs out at CompleteBy; the Supervisor recovers it
	}
	payload := req.Payload
	if len(payload) == 0 {
		order, err := h.store.Order(ctx, st.OrderID) // a re-sent message carries no order
		if err != nil {
			return err // SQS delivers it again; the claim is this attempt's already
		}
		payload = json.RawMessage(order)
	}
	deadline := st.CompleteBy.Add(-h.cfg.Margin)
	result, err := h.call(ctx, st, payload, deadline)
	if h.Crash != nil {
		h.Crash("agent.after-call")
	}
	reply := message.AgentReply{Kind: message.KindReply, OrderID: st.OrderID, Step: st.Index, Undo: st.Undo,
		StepName: st.Name, Attempt: st.Attempt, ReplyTo: st.ReplyQueue, Round: st.Round,
		Workflow: st.Workflow, Version: st.WfVersion, Payload: payload}
	switch {
	case err == nil:
		reply.OK, reply.Result = true, resultJSON(result)
	case IsPermanent(err):
		reply.Error = err.Error()
		h.log.Warn("non-transient remote fault; replying with the error", "order_id", st.OrderID, "err", err)
	case errors.Is(err, errDeadline):
		h.expired(st, err.Error())
		return nil // send nothing: the Supervisor recovers the step
	default:
		return err // the function itself is out of time: SQS retries the request
	}
	// If this send is lost, the attempt is overdue at CompleteBy and the
	// Supervisor recovers it.
	return h.send.SendJSON(ctx, h.cfg.ResponseQueueURL, reply, 0)
}

// claim starts an attempt of the record the request names. It returns nil,
// and no error, when there is nothing to run: a duplicate or late request,
// the record claimed already, done, or gone.
func (h *Handler) claim(ctx context.Context, req message.AgentRequest) (*statestore.Step, error) {
	now := h.Now()
	st, err := h.store.Claim(ctx, statestore.Claim{OrderID: req.OrderID, Ref: req.Ref(), Agent: h.cfg.Name,
		Owner: h.cfg.InstanceID, Now: now})
	switch {
	case errors.Is(err, statestore.ErrNotClaimable):
		h.metrics.Count(metrics.NothingToClaim, 1, map[string]any{"OrderID": req.OrderID, "Step": req.Step, "Undo": req.Undo})
		h.log.Debug("request dropped: nothing claimable (a duplicate, a late request, or no such order or step)",
			"order_id", req.OrderID, "step", req.Step, "undo", req.Undo)
		return nil, nil
	case errors.Is(err, statestore.ErrWrongAgent):
		return nil, message.Invalid("request routed to agent %q: %v", h.cfg.Name, err)
	case err != nil:
		return nil, err
	}
	h.metrics.Count(metrics.StepsClaimed, 1, map[string]any{"OrderID": st.OrderID, "Step": st.Name, "Attempt": st.Attempt})
	if !st.ReadyAt.IsZero() {
		h.metrics.Duration(metrics.QueueWait, max(st.ClaimedAt.Sub(st.ReadyAt), 0),
			map[string]any{"OrderID": st.OrderID, "Step": st.Name})
	}
	return &st, nil
}

// call runs the remote call with retries until it succeeds, fails
// permanently, or the deadline (CompleteBy less the margin) comes.
func (h *Handler) call(ctx context.Context, st *statestore.Step, payload []byte, deadline time.Time) ([]byte, error) {
	for n := 0; ; n++ {
		if err := h.breaker.Allow(); err == nil {
			res, err := h.try(ctx, st, payload, deadline)
			h.breaker.Record(err != nil && !IsPermanent(err))
			if err == nil || IsPermanent(err) {
				return res, err
			}
			h.log.Debug("transient remote fault", "order_id", st.OrderID, "attempt", st.Attempt, "try", n, "err", err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		wait := h.cfg.Backoff.Delay(n)
		if !h.Now().Add(wait).Before(deadline) {
			return nil, errDeadline
		}
		h.metrics.Count(metrics.AgentRetries, 1, map[string]any{"OrderID": st.OrderID, "Try": n + 1})
		if err := h.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

func (h *Handler) try(ctx context.Context, st *statestore.Step, payload []byte, deadline time.Time) ([]byte, error) {
	limit := h.Now().Add(h.cfg.CallTimeout)
	if deadline.Before(limit) {
		limit = deadline
	}
	cctx, cancel := context.WithDeadline(ctx, limit)
	defer cancel()
	return h.remote.Apply(cctx, st.Definition().DoName(), workflow.IdempotencyKey(st.OrderID, st.Name, st.Round), payload)
}

func (h *Handler) expired(st *statestore.Step, why string) {
	h.metrics.Count(metrics.AgentDeadlineExpired, 1, map[string]any{"OrderID": st.OrderID, "Attempt": st.Attempt})
	h.log.Warn("attempt abandoned; no reply sent", "order_id", st.OrderID, "attempt", st.Attempt, "why", why)
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
