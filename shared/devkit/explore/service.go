package explore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sas-go/sas/shared/agent"
)

// call is a remote call an Agent made, parked until the explorer answers
// it: the Agent's invocation waits in its Remote while everything else goes
// on around it.
type call struct {
	agent, action, key string
	token              string // an async attempt's, for its callback
	refused            *bool  // an async call's callback, once decided: a repeat says the same
	// deadline is when the caller stops waiting (its request's deadline);
	// for an accepted async call, its attempt's CompleteBy. No effect is
	// applied after it: a service does not apply a call its caller gave up
	// on (the design's contract), so an undo that follows never comes first.
	deadline time.Time
	actor    *actor // the invocation that waits
	answer   chan answer
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
	c := &call{agent: s.agent, action: action, key: key, token: agent.CallbackToken(ctx), answer: make(chan answer, 1)}
	c.deadline, _ = ctx.Deadline() // the Agent's clock is the world's: so is this
	s.w.yields <- c
	a := <-c.answer
	return a.body, a.err
}

// ledger is what the services applied, once per idempotency key (as a
// service that honours the key does), in the order applied.
type ledger struct {
	mu      sync.Mutex
	applied []string       // keys, in the order first applied
	calls   map[string]int // calls that applied or found it applied, by key
}

// apply applies key's effect unless it was; it reports whether it was new.
func (l *ledger) apply(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[string]int{}
	}
	l.calls[key]++
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
)

func (k outcomeKind) String() string {
	return [...]string{"done", "refused", "transient", "lost", "hang"}[k]
}

// answerOf is what the service answers for kind (the effect, if any, was
// applied by the caller).
func answerOf(kind outcomeKind, c *call) answer {
	switch kind {
	case answerDone:
		return answer{body: []byte(fmt.Sprintf(`{"key":%q}`, c.key))}
	case answerRefused:
		return answer{err: &agent.PermanentError{Status: 409, Body: "refused by the explorer"}}
	default:
		return answer{err: fmt.Errorf("%s (the explorer)", kind)}
	}
}
