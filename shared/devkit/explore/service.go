package explore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/flow"
)

// call is a remote call an Agent made, parked until the explorer answers
// it: the Agent's invocation waits in its Remote while everything else goes
// on around it.
type call struct {
	agent, action, key string
	order              *order
	token              string // an async attempt's, for its callback
	refused            *bool  // an async call's callback, once decided: a repeat says the same
	// deadline is when the caller stops waiting (its request's deadline);
	// for an accepted async call, its attempt's CompleteBy. No effect is
	// applied after it: a service does not apply a call its caller gave up
	// on (the design's contract), so an undo that follows never comes first.
	deadline time.Time
	// early: the service accepted it and sent its callback before answering
	// (the callback may be recorded before the Agent notes the acceptance).
	early  bool
	busy   bool   // the service counts it in flight (books)
	actor  *actor // the invocation that waits
	answer chan answer
}

type answer struct {
	body []byte
	err  error
}

// service is one agent's remote service: each call parks until answered.
type service struct {
	agent string
	w     *World
}

// Apply implements agent.Remote.
func (s service) Apply(ctx context.Context, action, key string, _ []byte) ([]byte, error) {
	c := &call{agent: s.agent, action: action, key: key, order: s.w.orderOf(key), token: agent.CallbackToken(ctx),
		actor: actorOf(ctx), answer: make(chan answer, 1)}
	c.deadline, _ = ctx.Deadline() // the Agent's clock is the world's: so is this
	s.w.began(c)
	select {
	case s.w.yields <- parking{call: c}:
	case <-s.w.ctx.Done():
		return nil, s.w.ctx.Err()
	}
	a := <-c.answer
	return a.body, a.err
}

// ApplyInput implements agent.Streamer: the input read as it is sent, as an
// HTTP service reads its body. One that breaks off (a payload read back
// that failed, or is not as kept) is a request its service never had: it
// acts on no part of it. One it has whole is the step's document.
func (s service) ApplyInput(ctx context.Context, action, key string, in *agent.Input) ([]byte, error) {
	r, err := in.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("the request broke off: %w", err)
	}
	s.w.count("inputs streamed")
	if int64(len(b)) != in.Size || !json.Valid(b) {
		s.w.wrongInput(fmt.Sprintf("agent %s's service received a %d-byte input for %s, told %d bytes, valid JSON %t",
			s.agent, len(b), key, in.Size, json.Valid(b)))
	}
	return s.Apply(ctx, action, key, b)
}

// books are what the services saw: calls in flight per agent and key (the
// calls parked, and the async calls accepted and not called back), the
// time of every call per agent, and which calls may have taken effect.
type books struct {
	inFlight map[string]int         // by agent and customer
	calls    map[string][]time.Time // by agent, in the explorer's time
	mayRun   map[string]bool        // idempotency keys a call of which may have taken effect
	reached  map[string]bool        // idempotency keys a call of which reached its service
	over     []string               // calls over their key's limit, as the service saw them
	// accepted are the slot holders (keyline.Holder) of the async attempts
	// their service accepted; calledBack, of those whose callback
	// Submission took, and when.
	accepted   map[string]bool
	calledBack map[string]time.Time
	tokens     map[string]bool // the tokens of the async calls accepted
	tries      map[*actor]int  // calls by invocation: its first is its attempt's first try
	inputs     []string        // streamed inputs a service received other than the step's document
	slowed     map[string][]window
}

// window is a span of the explorer's time: a service's Retry-After, from
// its 429 to its end.
type window struct{ from, until time.Time }

func newBooks() books {
	return books{inFlight: map[string]int{}, calls: map[string][]time.Time{}, mayRun: map[string]bool{}, reached: map[string]bool{},
		accepted: map[string]bool{}, calledBack: map[string]time.Time{}, tokens: map[string]bool{},
		tries: map[*actor]int{}, slowed: map[string][]window{}}
}

// began books c's start at its service: one more call in flight for its
// key, and an async call accepted for the same record dropped if c is its
// undo (the service drops accepted work its undo reaches).
func (w *World) began(c *call) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.svc.calls[c.agent] = append(w.svc.calls[c.agent], w.now)
	w.svc.reached[c.key] = true
	if c.actor != nil && w.svc.tries[c.actor] == 0 {
		w.held(c)
	}
	if c.actor != nil {
		w.svc.tries[c.actor]++
	}
	for _, a := range w.async {
		if a.busy && w.undoKey(a.key) == c.key {
			w.idleLocked(a)
		}
	}
	if c.order == nil {
		return
	}
	c.busy = true
	k := c.agent + "/" + c.order.customer
	w.svc.inFlight[k]++
	if f := w.flows[c.agent]; f.perKey != nil && w.svc.inFlight[k] > f.perKey.InFlight && len(w.svc.over) < 3 {
		w.svc.over = append(w.svc.over, fmt.Sprintf("calls in flight per key: at %s agent %s's service had %d calls of key %s in flight (%s), its perKey limit %d",
			w.now.Format("15:04:05.000"), c.agent, w.svc.inFlight[k], c.order.customer, c.key, f.perKey.InFlight))
	}
}

// held checks that c, an attempt's first try, was not made while its
// agent was paused, or its service had asked for no calls, for longer than
// an Agent trusts the control it read (flow.MaxStale).
func (w *World) held(c *call) {
	note := func(format string, args ...any) {
		if len(w.svc.over) < 3 {
			w.svc.over = append(w.svc.over, "the flow control holds calls: "+fmt.Sprintf(format, args...))
		}
	}
	if since, ok := w.paused[c.agent]; ok && w.now.Sub(since) > flow.MaxStale+rateSlack {
		note("%s called at %s, its agent %s paused since %s", c.key, w.now.Format("15:04:05.000"), c.agent, since.Format("15:04:05.000"))
	}
	for _, s := range w.svc.slowed[c.agent] {
		if w.now.Sub(s.from) > flow.MaxStale+rateSlack && w.now.Before(s.until) && !w.reported(agent.SlowDownNotNoted, "agent", c.agent) {
			note("%s called at %s, its service having asked at %s for no calls before %s", c.key, w.now.Format("15:04:05.000"),
				s.from.Format("15:04:05.000"), s.until.Format("15:04:05.000"))
		}
	}
}

// slowed books a 429 of agent's service asking for no calls for after.
func (w *World) slowed(agent string, after time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.svc.slowed[agent] = append(w.svc.slowed[agent], window{from: w.now, until: w.now.Add(after)})
}

// idle books c's end at its service (answered, called back, given up on).
func (w *World) idle(c *call) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.idleLocked(c)
}

func (w *World) idleLocked(c *call) {
	if c.busy {
		c.busy = false
		w.svc.inFlight[c.agent+"/"+c.order.customer]--
	}
}

// ran books that a call of key may have taken effect.
func (w *World) ran(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.svc.mayRun[key] = true
}

func (w *World) mayHaveRun(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.svc.mayRun[key]
}

// undoKey is the idempotency key of the undo of the record whose key is
// key ("" if its step has none).
func (w *World) undoKey(key string) string {
	id, rec, _ := strings.Cut(key, "/")
	name, item, _ := strings.Cut(rec, "#")
	for _, st := range w.def.Steps {
		if st.Name != name || st.Undo == nil {
			continue
		}
		undo := st.Undo.Name
		if item != "" {
			undo += "#" + item
		}
		return id + "/" + undo
	}
	return ""
}

// reachedService reports whether a call of key reached its service.
func (w *World) reachedService(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.svc.reached[key]
}

// ledger is what the services applied, once per idempotency key (as a
// service that honours the key does), in the order applied.
type ledger struct {
	mu      sync.Mutex
	applied []string // keys, in the order first applied
}

// apply applies key's effect unless it was; it reports whether it was new.
func (l *ledger) apply(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.applied {
		if k == key {
			return false
		}
	}
	l.applied = append(l.applied, key)
	return true
}

// at is where key was applied in the ledger's order (-1: never).
func (l *ledger) at(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, k := range l.applied {
		if k == key {
			return i
		}
	}
	return -1
}

// answers are how a parked call may end.
type outcomeKind int

const (
	answerDone      outcomeKind = iota // applied, answered
	answerRefused                      // refused for good: nothing applied
	answerTransient                    // failed for now: nothing applied
	answerLost                         // applied, its answer lost on the way back
	answerHang                         // no answer before the attempt's CompleteBy (applied or not)
	answerSlow                         // 429 with a Retry-After: nothing applied, every instance holds its calls
)

func (k outcomeKind) String() string {
	return [...]string{"done", "refused", "transient", "lost", "hang", "429"}[k]
}

// answerOf is what the service answers for kind (the effect, if any, was
// applied by the caller): done, if it is done.
func answerOf(kind outcomeKind, c *call, retryAfter time.Duration, done []byte) answer {
	switch kind {
	case answerDone:
		return answer{body: done}
	case answerRefused:
		return answer{err: &agent.PermanentError{Status: 409, Body: "refused by the explorer"}}
	case answerSlow:
		return answer{err: &agent.SlowDownError{Status: 429, After: retryAfter,
			Text: fmt.Sprintf("%s answered HTTP 429, Retry-After %s (the explorer)", c.agent, retryAfter)}}
	default:
		return answer{err: fmt.Errorf("%s (the explorer)", kind)}
	}
}

// doneBody is what a service answers (or calls back with) for a call it
// applied: its key, and pad bytes more in a payload run.
func doneBody(key string, pad int) []byte {
	if pad == 0 {
		return fmt.Appendf(nil, `{"key":%q}`, key)
	}
	return fmt.Appendf(nil, `{"key":%q,"pad":%q}`, key, strings.Repeat("p", pad))
}

// wrongInput books an input a service received that was not its step's
// document.
func (w *World) wrongInput(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.svc.inputs) < 3 {
		w.svc.inputs = append(w.svc.inputs, what)
	}
}
