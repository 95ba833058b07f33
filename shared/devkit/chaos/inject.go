// Package chaos runs orders through the local stack while injecting every
// fault the design names, then checks the design's invariants from the state
// store and the remote simulator's ledger. sasctl chaos and the chaos test run
// it; a seed chooses the faults so a failing run can be replayed.
package chaos

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/devkit/runner"
	"github.com/sas-go/sas/shared/message"
)

// Crashed is what an injected crash panics with.
type Crashed struct{ Point string }

func (c Crashed) String() string { return "injected crash at " + c.Point }

// Injector decides the faults: for each delivery (drop, delay, duplicate)
// from the seed, the message body and how many times that body was delivered
// before (a re-sent message often has the same body as the lost one, and must
// not share its fate), so the same run of messages gets the same faults; for
// each crash point from a seeded sequence.
type Injector struct {
	plan       Plan
	mu         sync.Mutex
	rng        *rand.Rand
	seen       map[string]int
	deliveries map[string]int // by function and body
	// lostLines are the keys (agent and key) a request of a call waiting
	// in the key's line was dropped for: its hand-off or its own look
	// again, lost.
	lostLines map[string]bool
	largest   int // the largest message delivered, body and attributes
	work      int // the largest delivered from a queue only the product writes to
}

// NewInjector returns the injector of a plan.
func NewInjector(p Plan) *Injector {
	return &Injector{plan: p, rng: rand.New(rand.NewPCG(p.Seed, 0xc4a05)), seen: map[string]int{},
		deliveries: map[string]int{}, lostLines: map[string]bool{}}
}

func (in *Injector) count(kind string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.seen[kind]++
}

// Counts returns the faults injected so far, by kind.
func (in *Injector) Counts() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.seen)
}

// share maps (seed, parts) to [0,1).
func (in *Injector) share(parts ...string) float64 { return remotesim.Mix(in.plan.Seed, parts...) }

// Message is the runner's Faults hook. Orders are never dropped before
// Submission first sees them: durability starts when SQS accepts the order.
func (in *Injector) Message(function string, m types.Message) runner.Action {
	in.mu.Lock()
	key := function + "\x00" + aws.ToString(m.Body)
	in.deliveries[key]++
	in.largest = max(in.largest, messageBytes(m))
	if function != "submission" { // the orders' and events' queues are Submission's
		in.work = max(in.work, messageBytes(m))
	}
	n := in.deliveries[key]
	in.mu.Unlock()
	x := in.share(function, aws.ToString(m.Body), fmt.Sprint(n))
	p := in.plan
	switch {
	case x < p.Drop && function != "submission":
		in.count("message dropped (" + function + ")")
		in.noteLostLine(function, aws.ToString(m.Body))
		return runner.Drop
	case x < p.Drop+p.Delay:
		in.count("message delayed (" + function + ")")
		return runner.Delay
	case x < p.Drop+p.Delay+p.Duplicate:
		in.count("message delivered twice (" + function + ")")
		return runner.Duplicate
	}
	return runner.Deliver
}

// LargestMessage is the largest message delivered so far, in SQS's bytes:
// its body, and its attributes' names, types and values.
func (in *Injector) LargestMessage() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.largest
}

// LargestWorkMessage is the largest message delivered so far from a queue
// only the product writes to (the Scheduler's, the Agents').
func (in *Injector) LargestWorkMessage() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.work
}

// messageBytes is m's size as SQS counts it against its limit.
func messageBytes(m types.Message) int {
	n := len(aws.ToString(m.Body))
	for name, a := range m.MessageAttributes {
		n += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
	}
	return n
}

// pausePoint is where an Agent may be paused: its service answered, its
// outcome not yet recorded.
const pausePoint = "agent.after-call"

// Crash is the handlers' crash hook: it panics at a crash point with the
// plan's probability, stopping that piece of work as a killed invocation
// would; at pausePoint it may instead hold the Agent for the plan's PauseFor,
// so that its outcome comes after its attempt's CompleteBy.
func (in *Injector) Crash(point string) {
	in.mu.Lock()
	x := in.rng.Float64()
	hit, pause := x < in.plan.Crash, point == pausePoint && x >= in.plan.Crash && x < in.plan.Crash+in.plan.Pause
	switch {
	case hit:
		in.seen["handler killed at "+point]++
	case pause:
		in.seen["agent paused before recording its outcome"]++
	}
	in.mu.Unlock()
	if hit {
		panic(Crashed{Point: point})
	}
	if pause {
		time.Sleep(in.plan.PauseFor)
	}
}

// noteLostLine notes the key of a dropped agent request that waits in its
// key's line (message.AgentRequest.Slot).
func (in *Injector) noteLostLine(function, body string) {
	agent, ok := strings.CutPrefix(function, "agent-")
	if !ok || !strings.Contains(body, `"slot"`) {
		return
	}
	var req message.AgentRequest
	if json.Unmarshal([]byte(body), &req) != nil || req.Slot == "" {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.lostLines[lineKey(agent, req.Slot)] = true
}

// LostLine reports whether a request waiting in agent's key's line was
// dropped.
func (in *Injector) LostLine(agent, key string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.lostLines[lineKey(agent, key)]
}

func lineKey(agent, key string) string { return agent + "\x00" + key }
