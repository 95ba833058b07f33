// Package agent is the Agent handler: it claims the ready step a request
// names (the claim starts the attempt and its clock, CompleteBy), wraps the
// calls to one remote service with retries (exponential backoff and jitter),
// a circuit breaker and an idempotency key, all bounded by CompleteBy,
// records the outcome in the order's state (shared/outcome) and replies on
// its response queue, so that the Scheduler starts what follows.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/outcome"
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

// Store is the part of the state store an Agent uses: the claim, the
// order (for a request that does not carry it), the outcome's record, and
// the definition of an order of a workflow version the deployment no longer
// runs.
type Store interface {
	Claim(ctx context.Context, c statestore.Claim) (statestore.Step, error)
	Order(ctx context.Context, orderID string) (string, error)
	outcome.Store
	dispatch.DefinitionReader
}

// Config is what an Agent needs to know of its deployment.
type Config struct {
	Workflows        workflow.Set // the deployment's: what follows an outcome
	Name             string       // the agent (remote service) name
	InstanceID       string       // this instance's name in the records it claims (LockedBy)
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
	catalog *dispatch.Catalog
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
		log: d.Log, Now: time.Now, Sleep: sleep, catalog: &dispatch.Catalog{Workflows: cfg.Workflows, Store: d.Store},
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
	def, err := h.catalog.For(ctx, st.OrderID, st.Workflow, st.WfVersion)
	if err != nil {
		return err // SQS delivers it again, or it is rejected; the claim runs out at CompleteBy
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
		h.Crash("agent.after-call") // the outcome is not recorded: the Supervisor recovers the attempt at CompleteBy
	}
	a := outcome.Attempt{OrderID: st.OrderID, Ref: st.Ref(), Name: st.Name, Attempt: st.Attempt, Round: st.Round}
	switch {
	case err == nil:
	case IsPermanent(err):
		a.Refusal = err.Error()
		h.log.Warn("non-transient remote fault; recorded as a refusal", "order_id", st.OrderID, "err", err)
	case errors.Is(err, errDeadline):
		h.expired(st, err.Error())
		return nil // record and send nothing: the Supervisor recovers the step
	default:
		return err // the function itself is out of time: SQS retries the request
	}
	return h.recordOutcome(ctx, def, st, a, result, payload)
}

// recordOutcome writes the attempt's outcome and what follows it in the order's
// state, then replies, so that the Scheduler starts what was made ready and
// tells the order's caller. An attempt that is no longer current records
// nothing and replies nothing.
func (h *Handler) recordOutcome(ctx context.Context, def workflow.Definition, st *statestore.Step, a outcome.Attempt, result []byte, payload json.RawMessage) error {
	a.Now = h.Now()
	rec, err := outcome.Recorder{Store: h.store}.Record(ctx, def, a)
	if err != nil {
		// Not recorded: SQS delivers the request again, and its claim is
		// refused; the Supervisor recovers the attempt at its CompleteBy
		// (the idempotency key makes the next attempt safe).
		return err
	}
	if rec.Stale {
		h.metrics.Count(metrics.StaleReplies, 1, map[string]any{"OrderID": st.OrderID, "Attempt": st.Attempt})
		h.log.Info("outcome of an attempt that is no longer current: nothing recorded", "order_id", st.OrderID,
			"step", st.Name, "attempt", st.Attempt)
		return nil
	}
	if rec.State.Ended() {
		notify.CountEnd(h.metrics, st.OrderID, rec.State) // here, once: the reply may be delivered twice
	}
	if h.Crash != nil {
		h.Crash("agent.after-record") // recorded: what it made ready waits for its pickup deadline
	}
	reply := message.AgentReply{Kind: message.KindReply, OrderID: st.OrderID, Step: st.Index, Undo: st.Undo,
		StepName: st.Name, Attempt: st.Attempt, ReplyTo: st.ReplyQueue, Round: st.Round,
		Workflow: st.Workflow, Version: st.WfVersion, Payload: payload,
		OK: a.Refusal == "", Error: a.Refusal, Recorded: true, State: string(rec.State), Ready: message.Starts(rec.Ready)}
	if reply.OK {
		reply.Result = resultJSON(result)
	}
	// If this send is lost, what the outcome made ready is found unclaimed
	// at its pickup deadline, and the Supervisor sends it again.
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
