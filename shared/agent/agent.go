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
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/smithy-go"

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
	return h.batch.Handle(ctx, ev, h.record), nil
}

func (h *Handler) record(ctx context.Context, rec events.SQSMessage) error {
	req, err := message.DecodeAgentRequest(rec.Body)
	if err != nil {
		return err
	}
	def, err := h.catalog.For(ctx, req.OrderID, req.Workflow, req.Version)
	if err != nil {
		return err // SQS delivers it again, or it is rejected
	}
	action, ok := def.Action(req.Ref())
	if !ok || action.Agent != h.cfg.Name {
		return message.Invalid("request for %s: %s is not an action of agent %q in workflow %q", req.OrderID, req.StepName, h.cfg.Name, def.Name)
	}
	waits, err := h.admit(ctx, &req)
	if err != nil || waits {
		return err
	}
	var nonce string
	if action.Async {
		nonce = newNonce()
	}
	st, err := h.claim(ctx, req, nonce)
	if err != nil || st == nil {
		return err
	}
	if h.Crash != nil {
		h.Crash("agent.after-claim") // the attempt runs out at CompleteBy; the Supervisor recovers it
	}
	// What its document weighs, and what its answer may (its workflow's
	// result limit), is held of the instance's payload budget from its read
	// to the end of its call and its result's keeping; it waits for it no
	// later than its call could still be made (then it is given back,
	// nothing called: notCalled), not through its CompleteBy.
	ctx, letBudget := kept.Reserving(ctx, h.budget, st.CompleteBy.Add(-h.cfg.Margin-min(h.cfg.CallTimeout, MinCallTime)),
		int64(def.Limit()))
	defer letBudget()
	order, doc, input, err := h.input(ctx, def, st, action, req.Payload)
	var key string
	if err == nil && h.cfg.PerKey != nil {
		if key, err = h.cfg.PerKey.KeyFor(doc.Document); err != nil && !errors.Is(err, workflow.ErrExpressionTimeout) {
			err = &PermanentError{Status: 0, Body: fmt.Sprintf("%s's key of its calls in flight: %v", h.cfg.Name, err), Cause: err}
		}
		if err == nil && key != "" {
			key, err = h.keyName(ctx, key)
		}
	}
	var perr *PermanentError
	if errors.As(err, &perr) { // the step cannot be given what it needs: refused, it ran nothing
		return h.recordOutcome(ctx, def, st, outcome.Attempt{Refusal: refusalOf(doc.Sealed, err)}, keptResult{}, order)
	}
	if errors.Is(err, workflow.ErrExpressionTimeout) {
		// As a call out of time: nothing is recorded, and the attempt is
		// ended now for the Supervisor to recover at its next sweep (a
		// failure counted, the step tried again after its backoff).
		h.expired(st, err.Error())
		if err := h.store.Abandon(ctx, *st, err.Error(), h.Now()); err != nil && !errors.Is(err, statestore.ErrStale) {
			h.log.Warn("attempt not abandoned: recovered at its CompleteBy", "order_id", st.OrderID, "err", err)
		}
		return nil
	}
	if err != nil {
		return h.notCalled(ctx, def, st, req, err, false)
	}
	let, gaveBack, err := h.beforeCall(ctx, def, st, req, key)
	if err != nil {
		return h.notCalled(ctx, def, st, req, err, false)
	}
	if gaveBack {
		return nil
	}
	let = sync.OnceFunc(let)
	accepted := false
	defer func() {
		if !accepted { // an accepted async call's slot is let go by its callback, or ends at its CompleteBy
			let()
		}
	}()
	deadline := st.CompleteBy.Add(-h.cfg.Margin)
	if action.Async {
		ctx, deadline = h.asyncCall(ctx, st, nonce, deadline)
	}
	// The service's answer is read up to the workflow's result limit and a
	// byte (to know it is over): an answer over it is refused unread.
	callCtx := withAnswerLimit(h.withTurns(ctx, deadline), def.Limit())
	if doc.Sealed {
		callCtx = withSealedData(callCtx)
	}
	result, retried, err := h.call(callCtx, st, input, deadline)
	if !action.Async {
		// The call is over: its key's slot goes now, before its outcome is
		// written, so that the next call of the key (its request handed
		// on) starts a write sooner.
		let()
	}
	if h.Crash != nil {
		h.Crash("agent.after-call") // the outcome is not recorded: the Supervisor recovers the attempt at CompleteBy
	}
	var a outcome.Attempt
	var slow *SlowDownError
	var open *BreakerOpenError
	var unread *InputError
	switch {
	case errors.As(err, &unread) && unreadable(unread.Err):
		// A payload of its input gone or altered as it was sent: the step
		// fails for good with the reason, as one found so before its call.
		a.Refusal, a.Ran = fmt.Sprintf("%s's input: %v", st.Name, unread.Err), retried
	case errors.As(err, &unread):
		// Read as it was sent, its input failed (S3, for a moment): given
		// back, tried again, as one whose input was not read before it.
		return h.notCalled(ctx, def, st, req, unread, retried)
	case err == nil && action.Async:
		h.log.Debug("async call accepted: the service answers with an event carrying the token", "order_id", st.OrderID,
			"step", st.Name, "attempt", st.Attempt, "complete_by", st.CompleteBy)
		// Noted, so a cancel does not await the callback (hours, perhaps)
		// but undoes the attempt; if the note is lost, a cancel awaits it,
		// and its key's slot, if it holds one, ends at its CompleteBy.
		accepted = true
		st.Slot = key
		err := h.persist(ctx, st, "its acceptance", func(ctx context.Context) error { return h.store.Accept(ctx, *st, h.Now()) })
		switch {
		case errors.Is(err, statestore.ErrStale):
			// Its callback came first (or the attempt ended otherwise): it
			// found no slot noted to let go, so the slot goes here.
			accepted = false
		case err != nil:
			h.log.Warn(AcceptNotNoted, "order_id", st.OrderID, "holder", h.holder(st), "err", err)
		}
		return nil // its callback records the outcome; by CompleteBy, or the Supervisor recovers the attempt
	case err == nil:
		res, refusal, err := h.resultOf(ctx, def, st, result, order)
		if err != nil {
			// Not sealed (KMS failed, its tries spent): SQS delivers the
			// request again, and its claim is refused; the Supervisor
			// recovers the attempt at its CompleteBy.
			return err
		}
		a.Refusal, a.Ran = refusal, refusal != ""
		return h.recordOutcome(ctx, def, st, a, res, order)
	case errors.As(err, &slow) && h.gate != nil:
		return h.slowDown(ctx, def, st, slow, req, retried)
	case errors.As(err, &open):
		// Nothing was called: given back, its key's slot let go, and sent
		// again for when the breaker may let a call through.
		return h.release(ctx, def, st, flow.Verdict{Wait: max(open.Wait, 0) + time.Duration(rand.Int64N(int64(time.Second))),
			Why: open.Error()}, req, false)
	case IsPermanent(err):
		a.Refusal = message.Clip(err.Error(), MaxRefusalBytes) // an Agent in Go quotes what it likes
		h.log.Warn("non-transient remote fault; recorded as a refusal", "order_id", st.OrderID, "err", a.Refusal)
	case errors.Is(err, errDeadline) && action.Async && st.CompleteBy.After(h.Now().Add(h.cfg.Margin)):
		// Its service never took the call, and this run's time is out: no
		// callback will come. Left as it is, the attempt would hold the step
		// for the whole async wait; ended now, the Supervisor recovers it
		// at its next sweep.
		h.expired(st, err.Error())
		if err := h.store.Abandon(ctx, *st, "its service did not accept the call: "+err.Error(), h.Now()); err != nil &&
			!errors.Is(err, statestore.ErrStale) {
			h.log.Warn("async attempt not abandoned: recovered at its CompleteBy", "order_id", st.OrderID, "err", err)
		}
		return nil
	case errors.Is(err, errDeadline):
		h.expired(st, err.Error())
		if strings.Contains(err.Error(), lastAnswered) {
			// Its service answered, transiently, and the attempt is out of
			// time: the attempt ends now with what the service said (one
			// write, only for an attempt that fails so), for the give-up's
			// alert and status to name it.
			if err := h.store.Abandon(ctx, *st, err.Error(), h.Now()); err != nil && !errors.Is(err, statestore.ErrStale) {
				h.log.Warn("attempt not ended early: recovered at its CompleteBy", "order_id", st.OrderID, "err", err)
			}
		}
		return nil // no outcome and no reply: the Supervisor recovers the step
	default:
		return err // the function itself is out of time: SQS retries the request
	}
	return h.recordOutcome(ctx, def, st, a, keptResult{}, order)
}

// SlowDownNotNoted is what an Agent logs when its service asked for no
// calls for a while (a 429 or 503 with Retry-After) and the state store
// failed to note it: the agent's other instances go on calling until a 429
// of their own.
const SlowDownNotNoted = "the slow-down not noted for the other instances"

// AcceptNotNoted is what an Agent logs when its service accepted an async
// call and the state store failed to note it: a cancel awaits the call's
// callback, and its key's slot, if it holds one, is free at its CompleteBy.
const AcceptNotNoted = "async call accepted, not noted: a cancel awaits its callback"

// notCalled gives back an attempt whose call was not made because what
// comes before it failed (its input not read: the store or the payload
// bucket; its flow control not reached): no failure counted, nothing taken
// as run, and its request sent again after a back-off. Left to SQS, the
// request's next delivery would find the attempt claimed, and the attempt
// would run out at its CompleteBy as one that may have run: a step with no
// undo that failed so would end its order CompensationFailed, its service
// never called (found by the explorer, with payload reads failing).
//
// retried: a try of its call before met a transient fault, and may have
// taken effect (its input failed as it was sent on a later try).
func (h *Handler) notCalled(ctx context.Context, def workflow.Definition, st *statestore.Step, req message.AgentRequest, cause error,
	retried bool) error {
	wait := max(h.cfg.Backoff.Delay(min(st.Attempt, 8)), time.Second) + time.Duration(rand.Int64N(int64(time.Second)))
	if kept.NoKey(cause) {
		// Until the function has its key (a deploy's minute), or, a key
		// taken away from sealed orders in flight, until the order's
		// deadline, whose alert says what it waited for: once a minute.
		wait = max(wait, NoKeyWait)
	}
	level, what := slog.LevelWarn, "attempt given back before its call: what it needs could not be read"
	if errors.Is(cause, kept.ErrBudgetBusy) { // a wait, as for its flow control: no fault
		level, what = slog.LevelInfo, "attempt given back before its call: its instance's payload budget is held by others"
	}
	h.log.Log(ctx, level, what, "order_id", st.OrderID, "step", st.Name, "attempt", st.Attempt,
		"again_in", wait.Round(time.Millisecond), "err", cause)
	// Given back even if the function's own time ran out meanwhile.
	if err := h.release(context.WithoutCancel(ctx), def, st, flow.Verdict{Wait: wait, Why: "not called: " + cause.Error()}, req, retried); err != nil {
		// Not given back either: SQS delivers the request again, and the
		// Supervisor recovers the attempt at its CompleteBy.
		return fmt.Errorf("%w (not given back: %v)", cause, err)
	}
	return nil
}

// refusalOf is what an attempt refused before its call is recorded and
// logged with: err's text; of a sealed order, quoting no jq expression's
// message (workflow.QuotingNoData).
func refusalOf(sealed bool, err error) string {
	if sealed {
		return workflow.QuotingNoData(err)
	}
	return err.Error()
}

// NoKeyWait is how long an attempt on a sealed order that its function has
// no data key to open waits before it is tried again.
const NoKeyWait = time.Minute

// unreadable reports whether err says a step's input cannot be read, now or
// after any try again: a payload gone or altered, or not this order's; a
// document over its agent's budget; sealed data that does not open; or a
// permission or a key the function does not have (the bucket's, KMS's).
// The step fails for good with the reason, which alerts its operator; any
// other error of reading it gives the attempt back to be tried again
// (notCalled).
func unreadable(err error) bool {
	if kept.NoKey(err) {
		// A function with no key at all is one whose configuration lags
		// its deployment's (kms added a moment ago): given back, the
		// attempt is tried again on one that has it.
		return false
	}
	if kept.Broken(err) {
		return true
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "AccessDenied", "AllAccessDisabled", // S3: the role may not read the bucket
		"AccessDeniedException", "DisabledException", "KMSInvalidStateException", "NotFoundException",
		"InvalidKeyUsageException", "IncorrectKeyException": // KMS: the key or its use is not the function's
		return true
	}
	return false
}

// answered says how large an answer of n bytes was: an HTTP agent reads
// one byte past its workflow's limit, and no further (an Agent in Go
// answers whole).
func answered(n, limit int) string {
	if n == limit+1 {
		return fmt.Sprintf("more than %d bytes", limit)
	}
	return fmt.Sprintf("%d bytes", n)
}

// claim starts an attempt of the record the request names. It returns nil,
// and no error, when there is nothing to run: a duplicate or late request,
// the record claimed already, done, or gone.
func (h *Handler) claim(ctx context.Context, req message.AgentRequest, nonce string) (*statestore.Step, error) {
	now := h.Now()
	st, err := h.store.Claim(ctx, statestore.Claim{OrderID: req.OrderID, Ref: req.Ref(), Agent: h.cfg.Name,
		Owner: h.cfg.InstanceID, Token: nonce, Now: now})
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

// later sends the request to its own queue again, delayed by wait (why: the
// flow control's reason), and takes this one as done: a call that waits for
// its turn counts no failure, and its receive count stays low however long
// it waits.
func (h *Handler) later(ctx context.Context, req message.AgentRequest, wait time.Duration, why string) error {
	wait = min(wait, MaxDelay)
	if err := h.send.SendJSON(ctx, h.cfg.RequestQueueURL, req, wait); err != nil {
		return fmt.Errorf("send %s's request again in %s: %w", req.OrderID, wait, err)
	}
	h.metrics.Count(metrics.FlowWaits, 1, map[string]any{"OrderID": req.OrderID, "Step": req.StepName})
	h.log.Debug("call waits", "order_id", req.OrderID, "step", req.StepName, "undo", req.Undo, "for", wait.Round(time.Millisecond), "why", why)
	return nil
}

// MaxDelay is the longest SQS delays a message.
const MaxDelay = 15 * time.Minute

// slowDown: the service answered 429 or 503 with a Retry-After. Every
// instance of the agent holds its calls until then; this attempt is given
// back with no failure counted, and its request sent again for then.
func (h *Handler) slowDown(ctx context.Context, def workflow.Definition, st *statestore.Step, slow *SlowDownError,
	req message.AgentRequest, retried bool) error {
	now := h.Now()
	until := now.Add(slow.After)
	h.log.Warn("the service asked to slow down: every instance holds its calls", "order_id", st.OrderID, "until", until, "err", slow)
	if err := h.gate.Store.SlowDown(ctx, h.cfg.Name, until); err != nil {
		// The other instances go on calling until a 429 of theirs; this
		// attempt still waits the Retry-After, given back (left to SQS,
		// it would run out as one that may have run).
		h.log.Warn(SlowDownNotNoted, "agent", h.cfg.Name, "order_id", st.OrderID, "until", until, "err", err)
	} else {
		h.gate.Forget()
	}
	// A 429 or 503 with Retry-After did nothing; a try before it that met
	// a transient fault may have.
	return h.release(ctx, def, st, flow.Verdict{Wait: slow.After + time.Duration(rand.Int64N(int64(time.Second))),
		Why: slow.Error()}, req, retried)
}
