package agent

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// An attempt runs as a pipeline of small steps, as river's job executor
// runs a job apart from judging its result: begin (its request decoded,
// admitted by the flow control, its step claimed), prepare (its input read,
// its key's slot and its rate turn taken), run (the call, with its
// retries), judge (a pure function of what came of it: a verdict, judge.go)
// and record (the one function that carries a verdict out, record.go).

// attempt is one claimed attempt, as the pipeline carries it from its claim
// to its record.
type attempt struct {
	def    workflow.Definition
	action workflow.Action
	// req is its request, as it is sent again if the attempt is given
	// back (with its place in its key's line, if it waits in it).
	req message.AgentRequest
	st  *statestore.Step // the step as claimed
	// nonce is an async attempt's token nonce ("": not async).
	nonce string
	// deadline is CompleteBy less the margin kept free for a reply: where
	// its call's retries end (an async call's sooner, with the function's
	// own time), and before which an async call its service never took is
	// ended at once rather than left to hold its step.
	deadline time.Time
	// gated: its Agent has flow control (a Gate), which holds every
	// instance's calls when its service asks to slow down.
	gated bool
	// order is its order, as its request carried it or the orders table
	// keeps it: replied with its outcome.
	order json.RawMessage
	// sealed: its order's data is sealed, and nothing said of the attempt
	// (a refusal before its call) quotes any of it.
	sealed bool
	input  callInput // what its service receives (none once its call is over)
	key    string    // its key of calls in flight, as it is kept ("": none)
	let    func()    // lets its key's slot go, once (none held: nothing)
	// noted: an accepted async call's slot is noted with its attempt: its
	// callback lets it go, or it ends at its CompleteBy.
	noted bool
}

// handle runs the attempt the request msg names: begin, prepare, run,
// judge, record. An error leaves the request to SQS, to deliver again (or
// to reject, if it is malformed).
func (h *Handler) handle(ctx context.Context, msg events.SQSMessage) error {
	a, ok, err := h.begin(ctx, msg)
	if err != nil || !ok {
		return err
	}
	// What its document weighs, and what its answer may (its workflow's
	// result limit), is held of the instance's payload budget from its read
	// to the end of its call and its result's keeping; it waits for it no
	// later than its call could still be made (then it is given back,
	// nothing called: notCalled), not through its CompleteBy.
	ctx, letBudget := kept.Reserving(ctx, h.budget, a.st.CompleteBy.Add(-h.cfg.Margin-min(h.cfg.CallTimeout, MinCallTime)),
		int64(a.def.Limit()))
	defer letBudget()
	if err := h.prepare(ctx, &a); err != nil {
		return h.record(ctx, &a, judge(&a, called{}, err))
	}
	defer func() {
		if !a.noted { // an accepted async call's slot is let go by its callback, or ends at its CompleteBy
			a.let()
		}
	}()
	c, err := h.run(ctx, &a)
	return h.record(ctx, &a, judge(&a, c, err))
}

// begin decodes the request msg, checks that it names an action of this
// Agent, admits it (the flow control before a claim) and claims its step.
// ok is false, with no error, when there is nothing to run: the request
// waits (sent again, delayed), or its step is not claimable. (An attempt
// is a value, on its handle's stack: not allocated per message.)
func (h *Handler) begin(ctx context.Context, msg events.SQSMessage) (a attempt, ok bool, err error) {
	req, err := message.DecodeAgentRequest(msg.Body)
	if err != nil {
		return a, false, err
	}
	def, err := h.catalog.For(ctx, req.OrderID, req.Workflow, req.Version)
	if err != nil {
		return a, false, err // SQS delivers it again, or it is rejected
	}
	action, ok := def.Action(req.Ref())
	if !ok || action.Agent != h.cfg.Name {
		return a, false, message.Invalid("request for %s: %s is not an action of agent %q in workflow %q", req.OrderID, req.StepName,
			h.cfg.Name, def.Name)
	}
	waits, err := h.admit(ctx, &req)
	if err != nil || waits {
		return a, false, err
	}
	a = attempt{def: def, action: action, req: req, gated: h.gate != nil, let: func() {}}
	if action.Async {
		a.nonce = newNonce()
	}
	if a.st, err = h.claim(ctx, req, a.nonce); err != nil || a.st == nil {
		return a, false, err
	}
	if h.Crash != nil {
		h.Crash("agent.after-claim") // the attempt runs out at CompleteBy; the Supervisor recovers it
	}
	a.deadline = a.st.CompleteBy.Add(-h.cfg.Margin)
	return a, true, nil
}

// prepare readies a claimed attempt's call: its input (its order, and its
// step's document read through the boundary), its key of calls in flight,
// then the flow control right before its call (beforeCall: its key's slot,
// its rate turn). An error is what came instead of a call, for judge: a
// *PermanentError (the step cannot be given what it needs),
// workflow.ErrExpressionTimeout, a *waitError (it may not call now), or a
// failure of what it reads.
func (h *Handler) prepare(ctx context.Context, a *attempt) error {
	order, doc, input, err := h.input(ctx, a.def, a.st, a.action, a.req.Payload)
	a.order, a.sealed, a.input = order, doc.Sealed, input
	if err == nil && h.cfg.PerKey != nil {
		a.key, err = h.keyOf(ctx, doc.Document)
	}
	if err != nil {
		return err
	}
	let, err := h.beforeCall(ctx, a)
	if err != nil {
		return err
	}
	a.let = sync.OnceFunc(let)
	return nil
}

// run makes the attempt's call, with its retries (call), and lets its
// key's slot go once it is over (an async call's goes at its callback, or
// at its CompleteBy). Its answer says when it came, for judge.
func (h *Handler) run(ctx context.Context, a *attempt) (called, error) {
	deadline := a.deadline
	if a.action.Async {
		ctx, deadline = h.asyncCall(ctx, a.st, a.nonce, deadline)
	}
	// The service's answer is read up to the workflow's result limit and a
	// byte (to know it is over): an answer over it is refused unread.
	callCtx := withAnswerLimit(h.withTurns(ctx, deadline), a.def.Limit())
	if a.sealed {
		callCtx = withSealedData(callCtx)
	}
	result, retried, err := h.call(callCtx, a.st, a.input, deadline)
	// Its input is sent: what it holds of its document is free for its
	// answer's keeping.
	a.input = callInput{}
	if !a.action.Async {
		// The call is over: its key's slot goes now, before its outcome is
		// written, so that the next call of the key (its request handed
		// on) starts a write sooner.
		a.let()
	}
	if h.Crash != nil {
		h.Crash("agent.after-call") // the outcome is not recorded: the Supervisor recovers the attempt at CompleteBy
	}
	return called{made: true, result: result, retried: retried, at: h.Now()}, err
}
