// Package sastest tests a workflow in go test: it runs orders of a workflow
// file through the product's own rules (package workflow: what each outcome
// makes ready, the undoing, cancels, holds, timers, waits, forEach items,
// the input expressions), with each agent's service a Go function of the
// test's and time a virtual clock (a 72 h wait or a 2 h sleep passes at
// once). No emulator, no queue, no network: a test of a workflow runs in
// milliseconds.
//
// An agent's flow control runs on the virtual clock too: its rateLimit
// spaces its calls (Call.At shows when each was made), and its perKey
// calls in flight queue the calls over it, first come first served.
//
// What it leaves out is what the deployment adds around the rules: queues
// (nothing is lost or delivered twice here), the Supervisor's looks (an
// attempt that does not complete ends at its CompleteBy exactly), the
// circuit breaker, pauses and a service's 429 Retry-After. Those are
// tested by the product's own suites; this kit tests your workflow.
//
//	k := sastest.New(t, "workflows/approval.yaml")
//	k.Handle("payment", func(c sastest.Call) sastest.Answer { return sastest.OK(map[string]any{"charged": true}) })
//	o := k.Submit(`{"orderId":"o-1","customerId":"c-1","items":[{"sku":"A-1","quantity":1,"unitPriceCents":499}]}`)
//	k.Run()                       // until it ends, or waits for an event or a callback
//	k.Signal("o-1", "approved", nil)
//	k.Run()
//	if o.State() != workflow.Processed { t.Fatal(o.State()) }
package sastest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Call is one call of an action to its agent's service, as the service
// receives it.
type Call struct {
	OrderID string
	Agent   string
	Action  string // the service's action (the step's, or its undo's)
	Step    string // the record's name: the step's or undo's, step#N for an item
	Undo    bool
	Item    int    // a forEach item's (from 1); 0 otherwise
	Attempt int    // of the record, from 1
	Key     string // the idempotency key
	Input   json.RawMessage
	At      time.Time
	// Token, for an async step, is the attempt's callback token
	// (Kit.Callback).
	Token string
}

// Handler is an agent's service: it answers each call.
type Handler func(Call) Answer

// Answer is how a service answers a call.
type Answer struct {
	kind   answerKind
	result json.RawMessage
	reason string
	after  time.Duration // Later's
	later  *Answer
}

type answerKind int

const (
	answerOK answerKind = iota
	answerRefuse
	answerTransient
	answerHang
	answerAccept
)

// OK is a success with result (encoded as JSON; nil: no result).
func OK(result any) Answer {
	if result == nil {
		return Answer{}
	}
	b, err := json.Marshal(result)
	if err != nil {
		panic(fmt.Sprintf("sastest.OK: %v", err))
	}
	return Answer{result: b}
}

// Refuse refuses the call for good (a 4xx): the step fails at once and the
// order is undone (or held, with onFailure: hold).
func Refuse(reason string) Answer { return Answer{kind: answerRefuse, reason: reason} }

// Transient fails the call for now (a 5xx): its Agent calls again after a
// backoff (50 ms, doubling, at most 2 s) until the attempt's CompleteBy;
// then the attempt failed, and the step is retried after its retryBackoff,
// up to maxFailures.
func Transient(reason string) Answer { return Answer{kind: answerTransient, reason: reason} }

// Hang never answers: the attempt ends at its CompleteBy, a failure, and
// may have taken effect (if the step is undone, its undo runs).
func Hang() Answer { return Answer{kind: answerHang} }

// Accept, for an async step, accepts the call: its answer comes with
// Kit.Callback and the call's Token, by the step's timeout.
func Accept() Answer { return Answer{kind: answerAccept} }

// Later, for an async step, accepts the call and answers it with a after d.
func Later(d time.Duration, a Answer) Answer { return Answer{kind: answerAccept, after: d, later: &a} }

// Epoch is when a Kit's clock starts.
var Epoch = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

// Kit runs orders of one workflow on a virtual clock.
type Kit struct {
	t        testing.TB
	def      workflow.Definition
	handlers map[string]Handler
	now      time.Time
	seq      int // of scheduled work, for a stable order at one time
	queue    []*job
	orders   map[string]*Order
	calls    []Call
	tokens   map[string]token
	keys     map[string]*keyLine // each agent's key's slots and line (agent NUL key)
	runs     map[string]run      // each agent's rate limit's schedule
}

type token struct {
	orderID string
	ref     workflow.Ref
	attempt int
}

// job is work due at a time: a record to start, an attempt's end, a wait's
// timeout, a timer, a callback, the order's deadline.
type job struct {
	at       time.Time
	seq      int
	internal bool        // Run does it; else only Advance (a wait's timeout, a deadline, a callback's CompleteBy)
	live     func() bool // nil, or whether it still has work to do: a dead job is dropped, the clock not moved
	do       func()
}

// New loads the workflow file at path (as `sasctl workflow validate` does)
// and returns a kit that runs it. A file that does not load fails the test.
func New(t testing.TB, path string) *Kit {
	t.Helper()
	d, err := workflow.LoadFile(path, workflow.Options{})
	if err != nil {
		t.Fatalf("sastest: %v", err)
	}
	return NewOf(t, d)
}

// NewOf returns a kit that runs the workflow d.
func NewOf(t testing.TB, d workflow.Definition) *Kit {
	t.Helper()
	if err := d.Compile(); err != nil {
		t.Fatalf("sastest: %v", err)
	}
	return &Kit{t: t, def: d, handlers: map[string]Handler{}, now: Epoch, orders: map[string]*Order{}, tokens: map[string]token{},
		keys: map[string]*keyLine{}, runs: map[string]run{}}
}

// Handle makes fn the service of agent: it answers every action of it. An
// agent without a handler answers OK(nil) to everything.
func (k *Kit) Handle(agent string, fn Handler) *Kit {
	k.handlers[agent] = fn
	return k
}

// Now is the kit's clock.
func (k *Kit) Now() time.Time { return k.now }

// Calls are the calls made to agent's service ("": every agent's), in the
// order they were made.
func (k *Kit) Calls(agent string) []Call {
	var out []Call
	for _, c := range k.calls {
		if agent == "" || c.Agent == agent {
			out = append(out, c)
		}
	}
	return out
}

// Submit takes an order (JSON as a string or []byte, or a value encoded as
// JSON): it must have its id (its orderId, or the member the workflow's id:
// names), and the workflow's schema must accept it;
// a refusal fails the test (TrySubmit returns it). Its first steps start at
// the next Run or Advance.
func (k *Kit) Submit(order any) *Order {
	k.t.Helper()
	o, err := k.TrySubmit(order)
	if err != nil {
		k.t.Fatalf("sastest: %v", err)
	}
	return o
}

// TrySubmit takes an order as Submit does, or returns why it is refused,
// as Submission refuses it (no id, an order submitted twice, one the
// workflow's schema refuses: the field at fault, a forEach's items): a test
// asserts a refusal.
//
//	_, err := k.TrySubmit(`{"orderId":"o-1"}`)
//	require.ErrorContains(t, err, "missing property 'customerId'")
func (k *Kit) TrySubmit(order any) (*Order, error) {
	var body json.RawMessage
	switch v := order.(type) {
	case string:
		body = json.RawMessage(v)
	case []byte:
		body = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode the order: %w", err)
		}
		body = b
	}
	id, err := k.idOf(body)
	if err != nil {
		return nil, err
	}
	if _, dup := k.orders[id]; dup {
		return nil, fmt.Errorf("order %s submitted twice", id)
	}
	items, err := k.def.Admit(body, k.now) // as Submission takes it
	if err != nil {
		return nil, fmt.Errorf("order %s: %w", id, err)
	}
	o := &Order{k: k, ID: id, body: body, state: k.def.Start(items), rec: map[workflow.Ref]*starting{},
		results: map[workflow.Ref]json.RawMessage{}, kept: map[string]json.RawMessage{}}
	for ref := range o.state.Recs {
		o.rec[ref] = &starting{}
	}
	k.orders[o.ID] = o
	for _, ref := range k.def.Starts(items) {
		o.ready(ref)
	}
	k.at(k.now.Add(k.def.Deadline), false, func() bool { return !o.state.State.Ended() && o.state.State != workflow.Held }, o.deadline)
	return o, nil
}

// idOf is the id of the order body: its member the workflow names
// (workflow.Definition.IDMember: orderId, or the file's id:), a string.
func (k *Kit) idOf(body json.RawMessage) (string, error) {
	field := k.def.IDMember()
	var members map[string]json.RawMessage
	var id string
	if err := json.Unmarshal(body, &members); err != nil || json.Unmarshal(members[field], &id) != nil || id == "" {
		return "", fmt.Errorf("an order is a JSON object with its id, a string, as its %s (workflow %s's id field): %s", field, k.def.Name, body)
	}
	return id, nil
}

// Order is the order as the kit runs it.
func (k *Kit) Order(id string) *Order { return k.orders[id] }

// Run does the work that is due, moving the clock on to each next piece of
// work the order itself waits for (a retry's backoff, a timer, an attempt's
// CompleteBy, a callback Later sends), until every order has ended or waits
// for something from outside: an event (Signal), a callback (Callback), or
// time passing (Advance: a wait's timeout, an async call's CompleteBy, the
// order's deadline, the end of a hold). It never moves the clock past such
// a time.
func (k *Kit) Run() {
	k.t.Helper()
	for n := 0; ; n++ {
		if n > 1_000_000 {
			k.t.Fatalf("sastest: a million steps and no end: a loop?")
		}
		// In time order; it stops at work only time passing brings (a
		// wait's timeout, say), and never jumps past it.
		k.letSlots()
		k.dropDead()
		if len(k.queue) == 0 || (!k.queue[0].internal && k.queue[0].at.After(k.now)) {
			return
		}
		k.pop(0)
	}
}

// Advance lets d of virtual time pass, doing the work due on the way in
// time order (a wait's timeout, a timer, a retry), then Run.
func (k *Kit) Advance(d time.Duration) {
	k.t.Helper()
	until := k.now.Add(d)
	for k.letSlots(); k.dropDead(); {
		if len(k.queue) == 0 || k.queue[0].at.After(until) {
			break
		}
		k.pop(0)
		k.letSlots()
	}
	k.now = until
	k.Run()
}

// pop does the queue's i-th job (the queue is kept in time order).
func (k *Kit) pop(i int) {
	j := k.queue[i]
	k.queue = slices.Delete(k.queue, i, i+1)
	if j.at.After(k.now) {
		k.now = j.at
	}
	j.do()
}

// dropDead drops the jobs at the head of the queue with nothing left to do
// (an attempt's CompleteBy once it completed, say); it reports true, for
// a loop's condition.
func (k *Kit) dropDead() bool {
	for len(k.queue) > 0 && k.queue[0].live != nil && !k.queue[0].live() {
		k.queue = k.queue[1:]
	}
	return true
}

// at schedules fn at t, while live says it has work to do (nil: always).
func (k *Kit) at(t time.Time, internal bool, live func() bool, fn func()) {
	k.seq++
	j := &job{at: t, seq: k.seq, internal: internal, live: live, do: fn}
	i := sort.Search(len(k.queue), func(i int) bool {
		q := k.queue[i]
		return q.at.After(t) || (q.at.Equal(t) && q.seq > j.seq)
	})
	k.queue = slices.Insert(k.queue, i, j)
}

// SignalOption sets how Signal sends its event.
type SignalOption func(*signal)

type signal struct{ sender string }

// From sends the event as sender: its SQS SenderId (an IAM user's unique
// id, AIDA..., or role-id:session), which a wait's senders are checked
// against. Without it the event has no sender, which a wait naming its
// senders refuses.
func From(sender string) SignalOption { return func(s *signal) { s.sender = sender } }

// Signal sends an event to an order, as a client does: the wait for it
// completes (its data the step's result), or it is kept for the wait if the
// order has not reached it. An event the order cannot take is an error that
// says why (from a sender its wait does not name, say).
//
//	err := k.Signal("o-1", "approved", data, sastest.From("AROAEXAMPLE:ana"))
func (k *Kit) Signal(orderID, event string, data any, opts ...SignalOption) error {
	var sig signal
	for _, opt := range opts {
		opt(&sig)
	}
	o, ok := k.orders[orderID]
	if !ok {
		return fmt.Errorf("order %s not found", orderID)
	}
	b := json.RawMessage("null")
	if data != nil {
		var err error
		if b, err = json.Marshal(data); err != nil {
			return err
		}
	}
	return o.event(event, b, sig.sender)
}

// Callback answers an accepted async call (its Call's Token) with a: OK or
// Refuse. A token whose attempt ended is refused, as the pipeline refuses it.
func (k *Kit) Callback(tok string, a Answer) error {
	t, ok := k.tokens[tok]
	if !ok {
		return fmt.Errorf("no call has the token %q", tok)
	}
	o := k.orders[t.orderID]
	if !o.current(t.ref, t.attempt)() {
		return fmt.Errorf("the token of attempt %d of %s was used, or its attempt ended", t.attempt,
			o.state.Recs[t.ref].RecordName())
	}
	o.answered(t.ref, a)
	return nil
}

// Cancel cancels an order as an operator does: what is ready does not run,
// what runs is awaited, what completed is undone. A refusal says why.
func (k *Kit) Cancel(orderID string) error {
	o, ok := k.orders[orderID]
	if !ok {
		return fmt.Errorf("order %s not found", orderID)
	}
	m, verdict, reason := o.state.Cancel()
	if verdict == workflow.CancelRefused {
		return fmt.Errorf("order %s cannot be cancelled: %s", orderID, reason)
	}
	o.apply(m)
	return nil
}

// Retry runs again the step whose failure holds a Held order (onFailure:
// hold), its failures forgotten.
func (k *Kit) Retry(orderID, step string) error {
	return k.decide(orderID, step, func(o *Order, ref workflow.Ref) (workflow.Move, error) {
		m, err := k.def.RetryHeld(o.state, ref)
		if err == nil {
			o.update(ref, func(r *workflow.Rec) { r.FailureCount = 0 })
		}
		return m, err
	})
}

// Skip takes the step whose failure holds a Held order as done, with
// result.
func (k *Kit) Skip(orderID, step string, result any) error {
	return k.decide(orderID, step, func(o *Order, ref workflow.Ref) (workflow.Move, error) {
		m, err := k.def.SkipHeld(o.state, ref, k.now)
		if err == nil && result != nil {
			b, err := json.Marshal(result)
			if err != nil {
				return m, err
			}
			o.results[ref] = b
		}
		return m, err
	})
}

// Undo undoes a Held order now.
func (k *Kit) Undo(orderID string) error {
	return k.decide(orderID, "", func(o *Order, _ workflow.Ref) (workflow.Move, error) { return o.state.UndoHeld() })
}

func (k *Kit) decide(orderID, step string, fn func(*Order, workflow.Ref) (workflow.Move, error)) error {
	o, ok := k.orders[orderID]
	if !ok {
		return fmt.Errorf("order %s not found", orderID)
	}
	var ref workflow.Ref
	held := o.state.Held()
	if i := slices.IndexFunc(held, func(r workflow.Ref) bool {
		return step == "" || workflow.RecordName(o.state.Recs[r].Name, r) == step
	}); i >= 0 {
		ref = held[i]
	}
	m, err := fn(o, ref)
	if err != nil {
		return err
	}
	o.apply(m)
	return nil
}

// handler is agent's service.
func (k *Kit) handler(agent string) Handler {
	if h, ok := k.handlers[agent]; ok {
		return h
	}
	return func(Call) Answer { return OK(nil) }
}

// limitOf is how many bytes a result may have.
func (k *Kit) limitOf() int { return cmp.Or(k.def.Limit(), workflow.MaxResultLimit) }
