// Package agent is the Agent handler: it claims the ready step a request
// names (the claim starts the attempt and its clock, CompleteBy), wraps the
// calls to one remote service with retries (exponential backoff and jitter),
// a circuit breaker and an idempotency key, all bounded by CompleteBy,
// records the outcome in the order's state (shared/outcome) and replies on
// its response queue, so that the Scheduler starts what follows.
package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
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
// order (for a request that does not carry it) and the step's document, the
// outcome's record, and the definition of an order of a workflow version the
// deployment no longer runs.
type Store interface {
	Claim(ctx context.Context, c statestore.Claim) (statestore.Step, error)
	Abandon(ctx context.Context, st statestore.Step, reason string, now time.Time) error
	Accept(ctx context.Context, st statestore.Step, now time.Time) error
	Order(ctx context.Context, orderID string) (string, error)
	Inputs(ctx context.Context, st statestore.Step, order kept.Value) (kept.Inputs, error)
	outcome.Store
	dispatch.DefinitionReader
}

// Config is what an Agent needs to know of its deployment.
type Config struct {
	Workflows        workflow.Set // the deployment's: what follows an outcome
	Name             string       // the agent (remote service) name
	InstanceID       string       // this instance's name in the records it claims (LockedBy)
	ResponseQueueURL string
	RequestQueueURL  string // its own: a request that must wait is sent again there, delayed
	DLQURL           string // its request queue's DLQ
	// RateLimit bounds its calls across every instance (zero: none).
	RateLimit workflow.Rate
	// PerKey bounds its calls in flight per key (nil: none).
	PerKey      *workflow.PerKey
	Backoff     resilience.Backoff
	CallTimeout time.Duration // bound on one remote call
	// Margin is kept free before CompleteBy so a reply can still arrive in time.
	Margin time.Duration
}

// Outcomes records an attempt's outcome and what follows it
// (outcome.Recorder).
type Outcomes interface {
	Record(ctx context.Context, def workflow.Definition, a outcome.Attempt) (outcome.Recorded, error)
}

// Deps are what an Agent calls.
type Deps struct {
	Remote  Remote
	Breaker *resilience.Breaker
	Store   Store
	Send    Sender
	Metrics *metrics.Emitter
	Log     *slog.Logger
	// Outcomes records outcomes (nil: outcome.Recorder over Store).
	Outcomes Outcomes
	// Gate is the agent's flow control (a rate limit, a back-off its
	// service asked for, a pause); nil: none.
	Gate *flow.Gate
	// Kept keeps a step's result (sealed under its order's data key, if its
	// order is, and over the inline limit in the payload bucket) and opens
	// what the step's document is made of (nil: every result inline, at
	// most kept.MaxInline, and nothing sealed).
	Kept *kept.Boundary
	// Budget bounds the payload bytes this instance's attempts hold at once
	// (a batch's run at once); nil: none.
	Budget *kept.Budget
	// Lines keeps PerKey's key lines (keyline.Store): a call holds a slot
	// of its key, or waits in its line (nil, or no Gate: no limit per
	// key).
	Lines keyline.Items
	// Names names PerKey's keys, so that they are kept by their names,
	// not their values, in a deployment that seals its orders' data
	// (sealData), where a key's value is its order's; nil: by value.
	Names *keyname.Namer
}

// Handler is the Agent Lambda handler.
type Handler struct {
	cfg      Config
	remote   Remote
	breaker  *resilience.Breaker
	store    Store
	outcomes Outcomes
	send     Sender
	metrics  *metrics.Emitter
	log      *slog.Logger
	batch    *sqsbatch.Processor
	catalog  *dispatch.Catalog
	gate     *flow.Gate // nil: no flow control
	lines    KeyLines   // nil: no limit per key
	kept     *kept.Boundary
	budget   *kept.Budget
	names    *keyname.Namer // nil: keys kept by their values
	Now      func() time.Time
	Sleep    func(ctx context.Context, d time.Duration) error
	// Crash, if set, is called after the remote call and before the reply; a
	// chaos test makes it panic there. Nil in production.
	Crash func(point string)
}

// New builds the handler.
func New(cfg Config, d Deps) *Handler {
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if d.Outcomes == nil {
		d.Outcomes = outcome.Recorder{Store: d.Store}
	}
	h := &Handler{cfg: cfg, remote: d.Remote, names: d.Names, breaker: d.Breaker, store: d.Store, outcomes: d.Outcomes, send: d.Send, metrics: d.Metrics,
		log: d.Log, Now: time.Now, Sleep: resilience.Sleep, catalog: &dispatch.Catalog{Workflows: cfg.Workflows, Store: d.Store}, gate: d.Gate, kept: d.Kept, budget: d.Budget,
		batch: &sqsbatch.Processor{Name: "agent-" + cfg.Name, DLQURL: cfg.DLQURL, Rejecter: d.Send, Metrics: d.Metrics,
			Log: d.Log, Buffer: sqsbatch.BufferingOf(d.Send), FlushEvery: ReplyFlush}}
	if d.Lines != nil {
		h.lines = keyline.Lines{Items: d.Lines, Log: d.Log, Now: func() time.Time { return h.Now() },
			HandOff: keyline.HandOff{Send: d.Send, Queues: map[string]string{cfg.Name: cfg.RequestQueueURL}}}
	}
	return h
}

// Handle processes a batch from the agent's request queue.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return h.batch.Handle(ctx, ev, h.handle), nil
}

// claim starts an attempt of the record the request names. It returns nil,
// and no error, when there is nothing to run: a duplicate or late request,
// the record claimed already, done, or gone.
func (h *Handler) claim(ctx context.Context, req message.AgentRequest, nonce string) (*statestore.Step, error) {
	now := h.Now()
	st, err := h.store.Claim(ctx, statestore.Claim{OrderID: req.OrderID, Ref: req.Ref(), Agent: h.cfg.Name,
		Owner: h.cfg.InstanceID, Token: nonce, Version: req.Version, Now: now})
	var late *statestore.LateLook
	if errors.As(err, &late) { // claimed: it runs (given back, it would be as late for the next claim)
		h.log.Warn("claimed; its order's next look not moved to the attempt's CompleteBy", "order_id", req.OrderID, "step", req.StepName, "err", err)
		err = nil
	}
	switch {
	case errors.Is(err, statestore.ErrNotClaimable):
		h.leaveLine(ctx, req)
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
