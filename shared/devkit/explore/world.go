package explore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/scheduler"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/searchkey"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/submission"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// visibility is the explorer's SQS visibility timeout: a message a handler
// failed (or is still handling) comes back this long after its delivery.
const visibility = 30 * time.Second

// World is one run: a few orders of one workflow through the product's own
// handlers (Submission, the Scheduler, Agent instances per service, each
// with its flow control's gate, the Supervisor) over a real state store,
// with queues, services and a clock the explorer holds. A handler runs
// until it ends or parks: in a service call, or asleep (a backoff, a wait
// for its rate turn), until the explorer answers or wakes it; meanwhile
// anything else may happen. The explorer starts one invocation at a time,
// or several at once (then they race on the store).
type World struct {
	plan
	// versions are the run's workflow's versions its orders run, by
	// version (the first, its next, and those a move made: defOf);
	// movedAtWork, the moves made while an attempt could still record an
	// outcome (a broken invariant).
	versions    map[string]workflow.Definition
	movedAtWork []string
	// op is the operator's: its searches and bulk actions (bulk.go), over
	// store; bulkBad what they found wrong.
	op      *operator.Operator
	bulkBad []string
	topo    topology.Topology
	// store, flow and lines are the operator's and the checks' (the engine
	// itself, db); the handlers' are on handlersDB, with faults in a run
	// with store faults (storeFaults).
	store, handlersStore *statestore.Store
	flow, handlersFlow   flow.Store
	lines, handlersLines keyline.Store
	db, handlersDB       statestore.API
	// payloads is a payload run's bucket (nil: every payload inline), and
	// bucket the objects it keeps them in.
	payloads *payload.Store
	bucket   *objects
	// pointing picks, in a payload run, what a sender sends by pointer
	// (sendFromOutside; nil: nothing); offloaded maps each pointer sent to
	// the body it names, as its sender meant it; takenPointers are those
	// a delivery of which Submission took (ended well, not rejected).
	pointing      *rand.Rand
	offloaded     map[string]string
	takenPointers map[string]bool
	// sealer seals a sealed run's orders' data (nil: none sealed), under
	// keys.
	sealer *seal.Sealer
	// secretKeys, in a sealed run, is the KMS key the agents' secrets are
	// made under (keyname.Namer).
	secretKeys *keys
	keys       *keys
	byID       map[string]*order
	faults     bool // faults were injected in this run (faulty before the drain)

	mu  sync.Mutex // the clock, the alerts, the claims, the trace, the service's books
	now time.Time

	q        *queues
	ledger   ledger
	svc      books
	yields   chan parking
	finished chan *actor
	parked   []*call
	async    []*call // async calls accepted, their callbacks not sent
	sleeping []*sleeper

	sub       *submission.Handler
	sched     *scheduler.Handler
	instances map[string][]*instance // each agent's, each with its gate
	sup       *supervisor.Supervisor
	set       workflow.Set
	sender    *queue.Sender

	alerts   []alert.Failure
	claims   []claimed
	trace    []string
	logs     logs
	crashing bool                 // the handler now running is killed at its next crash point
	ctx      context.Context      // the run's: its real time
	paused   map[string]time.Time // agents paused by the explorer, since when
	skipped  map[string]bool      // records an operator skipped (their effect never applied), by idempotency key
	decided  map[string]int       // the operator's decisions on held orders taken, by action
	drove    map[string]int       // what the run drove (Report.Drove)
	dropped  int                  // messages the explorer lost
	limits   []string             // writes over DynamoDB's limits
	largest  largest              // the largest expression and item written
	written  map[string]bool      // the items updated, by key ("pk sk")
}

// instance is one Agent instance: it runs one invocation at a time.
type instance struct {
	h    *agent.Handler
	busy bool
}

// claimed is an attempt an Agent's claim started, and whether everything
// its record's step needs was done in the order the claim returned.
type claimed struct {
	order, key string // the record's order and idempotency key
	ref        workflow.Ref
	attempt    int
	completeBy time.Time
	needsMet   bool
}

// newWorld builds the handlers of plan p's run over db, on the tables of
// topo (one deadline shard), its clock starting after after.
func newWorld(p plan, topo topology.Topology, db statestore.API, after time.Time) (*World, error) {
	now := time.Now().Truncate(time.Second)
	if !after.IsZero() && !now.After(after) {
		now = after.Add(time.Hour).Truncate(time.Second)
	}
	w := &World{plan: p, topo: topo, faults: p.faulty, now: now, byID: map[string]*order{}, written: map[string]bool{},
		yields: make(chan parking), finished: make(chan *actor), instances: map[string][]*instance{},
		svc: newBooks(), paused: map[string]time.Time{}, skipped: map[string]bool{}, decided: map[string]int{}, drove: map[string]int{},
		versions: map[string]workflow.Definition{p.def.Version: p.def}}
	if p.next != nil {
		w.versions[p.next.Version] = *p.next
	}
	for _, o := range p.orders {
		w.byID[o.id] = o
	}
	p.driven(w.count)
	limited := limitedDB{API: db, w: w}
	w.handlersDB = limited
	if p.storeFaults {
		w.handlersDB = newStoreFaults(limited, p.seed, func() bool { return w.faulty }, w.count)
	}
	w.store = statestore.New(limited, topo.OrdersTable(), topo.StateTable(), 1)
	w.op = &operator.Operator{Store: w.store, Topology: topo, PickupTimeout: p.def.PickupTimeout, Now: w.clock}
	w.handlersStore = statestore.New(w.handlersDB, topo.OrdersTable(), topo.StateTable(), 1)
	if p.payloads {
		w.bucket = newObjects(p.seed, p.faulty, w.count)
		w.payloads = payload.New(w.bucket, bucketName, payload.MinInline)
		w.offloaded, w.takenPointers = map[string]string{}, map[string]bool{}
		if p.pointers {
			w.pointing = rand.New(rand.NewPCG(p.seed, 0x9017))
		}
	}
	if p.sealed {
		w.keys = newKeys(p.seed, p.faulty, w.count)
		// The agents' secrets (their keys' names) from a stream of their
		// own: the orders' data keys, and their faults, are as they were.
		w.secretKeys = newKeys(p.seed+secretStream, p.faulty, w.count)
		w.sealer = seal.New(w.keys, explorerKey)
	}
	w.db, w.flow, w.lines = limited, flow.NewStore(limited, topo.StateTable()), keyline.NewStore(limited, topo.StateTable())
	w.handlersFlow = flow.NewStore(w.handlersDB, topo.StateTable())
	w.handlersLines = keyline.NewStore(w.handlersDB, topo.StateTable())
	w.q = &queues{now: w.clock}
	var err error
	if w.set, err = workflow.NewSet(p.def); err != nil {
		return nil, err
	}
	w.sender = queue.NewSender(w.q)
	log := slog.New(slog.NewTextHandler(&w.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m := metrics.New(io.Discard, "explore")
	ntf := notify.New(w.sender, notify.Allowed(nil), m, log)
	requests, agentQueues := map[string]string{}, map[string]supervisor.AgentQueues{}
	for _, a := range p.def.Agents() {
		requests[a] = w.url(topo.AgentRequests(a).Name)
		agentQueues[a] = supervisor.AgentQueues{Requests: requests[a], Responses: w.url(topo.AgentResponses(a).Name)}
	}
	if w.sub, err = submission.New(submission.Config{Workflows: w.set, AgentQueues: requests,
		SchedulerQueueURL: w.url(topo.SchedulerQueue().Name), DLQURL: w.url(topo.OrdersQueue().DLQName)},
		submission.Deps{Store: w.handlersStore, Send: w.sender, Notify: ntf, Metrics: m, Log: log, Slots: passCounted{w.handlersLines, w.count},
			Kept: kept.New(w.payloads, w.sealer), Offload: w.offload(), SearchNames: w.searchNames()}); err != nil {
		return nil, err
	}
	alerts := alert.New(publisher{w}, "arn:aws:sns:us-east-1:000000000000:alerts", m)
	if w.sched, err = scheduler.New(scheduler.Config{Workflows: w.set, AgentQueues: requests, DLQURL: w.url(topo.SchedulerQueue().DLQName)},
		scheduler.Deps{Store: w.handlersStore, Send: w.sender, Alerts: alerts, Notify: ntf, Metrics: m, Log: log,
			Kept: kept.New(w.payloads, w.sealer)}); err != nil {
		return nil, err
	}
	w.sup = supervisor.New(supervisor.Config{SchedulerQueueURL: w.url(topo.SchedulerQueue().Name), AgentQueues: agentQueues,
		PickupTimeout: p.def.PickupTimeout, ShardParallelism: 1, Parallel: 1},
		supervisor.Deps{Store: w.handlersStore, Queues: w.sender, Flow: w.handlersFlow, Alerts: alerts, Notify: ntf, Metrics: m, Log: log})
	w.sub.Now, w.sched.Now, w.sup.Now = w.clock, w.clock, w.clock
	w.sub.Crash, w.sched.Crash, w.sup.Crash = w.crash, w.crash, w.crash
	return w, nil
}

// searchNames names a sealed searching run's searchable values, under a
// search secret kept in the state table (made under the agents' secrets'
// key, through the handlers' store and its faults); nil otherwise.
func (w *World) searchNames() searchkey.Namer {
	if w.secretKeys == nil || len(w.def.Search) == 0 {
		return nil
	}
	return searchkey.NewNamer(w.handlersDB, w.topo.StateTable(), seal.New(w.secretKeys, explorerKey))
}

// newInstance starts another instance of agent a: its own gate (its
// control cached, its line for rate turns), asleep only in the explorer's
// time.
func (w *World) newInstance(a string) *instance {
	f := w.flows[a]
	// Its own store and sealer in a sealed run, as an instance of its own
	// function: the data keys it opens are its own to ask KMS for.
	store, sealer := w.handlersStore, w.sealer
	if w.keys != nil {
		sealer = seal.New(w.keys, explorerKey)
		store = statestore.New(w.handlersDB, w.topo.OrdersTable(), w.topo.StateTable(), 1)
	}
	var names *keyname.Namer // in a sealed run, its keys by their names
	if w.secretKeys != nil && f.perKey != nil {
		names = keyname.NewNamer(w.handlersDB, w.topo.StateTable(), a, seal.New(w.secretKeys, explorerKey))
	}
	log := slog.New(slog.NewTextHandler(&w.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h := agent.New(agent.Config{Workflows: w.set, Name: a, InstanceID: fmt.Sprintf("explore-%s-%d", a, len(w.instances[a])+1),
		ResponseQueueURL: w.url(w.topo.AgentResponses(a).Name), RequestQueueURL: w.url(w.topo.AgentRequests(a).Name),
		DLQURL: w.url(w.topo.AgentRequests(a).DLQName), RateLimit: f.rate, PerKey: f.perKey,
		Backoff: resilience.Backoff{Base: time.Second, Max: 4 * time.Second}, CallTimeout: time.Minute, Margin: 100 * time.Millisecond},
		agent.Deps{Remote: service{agent: a, w: w}, Breaker: &resilience.Breaker{Threshold: 1 << 30, Cooldown: time.Hour},
			Store: watchedStore{Store: store, w: w}, Send: w.sender, Metrics: metrics.New(io.Discard, "explore"), Log: log,
			Gate: &flow.Gate{Store: w.handlersFlow, Sleep: w.sleeper("its rate turn"), Background: w.background("flow controls refreshed beside a call")}, Lines: w.handlersLines, Kept: kept.New(w.payloads, sealer), Names: names})
	h.Now, h.Sleep, h.Crash = w.clock, w.sleeper("a backoff"), w.crash
	in := &instance{h: h}
	w.instances[a] = append(w.instances[a], in)
	return in
}

// instanceFor is an idle instance of agent a, started if every one is busy
// (as Lambda scales out).
func (w *World) instanceFor(a string) *instance {
	for _, in := range w.instances[a] {
		if !in.busy {
			return in
		}
	}
	return w.newInstance(a)
}

func (w *World) url(name string) string { return "https://sqs.explore.local/000000000000/" + name }

// clock is the world's time, which only the explorer moves.
func (w *World) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *World) advance(to time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if to.After(w.now) {
		w.now = to
	}
}

// crash kills the handler running at its crash point, if the explorer
// chose to (once). An Agent killed right after its claim leaves an attempt
// that may have run as far as the product knows: its CompleteBy passes
// with no outcome.
func (w *World) crash(point string) {
	w.mu.Lock()
	crash := w.crashing
	w.crashing = false
	if crash && point == "agent.after-claim" && len(w.claims) > 0 {
		w.svc.mayRun[w.claims[len(w.claims)-1].key] = true // the invocation's own: it runs alone
	}
	w.mu.Unlock()
	if crash {
		w.note("  killed at %s", point)
		panic("killed by the explorer at " + point)
	}
}

// setCrashing makes the next crash point reached kill its handler (or not).
func (w *World) setCrashing(on bool) {
	w.mu.Lock()
	w.crashing = on
	w.mu.Unlock()
}

func (w *World) note(format string, args ...any) {
	line := fmt.Sprintf("%s %s", w.clock().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	w.mu.Lock()
	w.trace = append(w.trace, line)
	w.mu.Unlock()
}

func (w *World) traced() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.trace)
}

// count adds one to what the run drove.
func (w *World) count(what string) {
	w.mu.Lock()
	w.drove[what]++
	w.mu.Unlock()
}

// handler is what consumes a queue: an invocation of it takes one event.
type handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// consumer is the handler that reads the named queue (an Agent's: an idle
// instance of it, marked busy), and its name.
func (w *World) consumer(name string) (handler, string, *instance) {
	switch {
	case name == w.topo.OrdersQueue().Name:
		return w.sub.Handle, "submission", nil
	case name == w.topo.SchedulerQueue().Name || strings.HasSuffix(name, "-responses"):
		return w.sched.Handle, "scheduler", nil
	}
	for _, a := range w.def.Agents() {
		if name == w.topo.AgentRequests(a).Name {
			in := w.instanceFor(a)
			in.busy = true
			return in.h.Handle, "agent-" + a, in
		}
	}
	return func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, fmt.Errorf("no consumer of %s", name)
	}, "nobody", nil
}

// consumed are the queues a handler reads (not the DLQs).
func (w *World) consumed() []string {
	out := []string{w.topo.OrdersQueue().Name, w.topo.SchedulerQueue().Name}
	for _, a := range w.def.Agents() {
		out = append(out, w.topo.AgentRequests(a).Name, w.topo.AgentResponses(a).Name)
	}
	return out
}

func remove[T comparable](s []T, x T) []T {
	for i, y := range s {
		if y == x {
			return append(s[:i:i], s[i+1:]...)
		}
	}
	return s
}

// orderOf is the order an idempotency key (or a holder, a waiter) names.
func (w *World) orderOf(key string) *order {
	id, _, _ := strings.Cut(key, "/")
	return w.byID[id]
}

// randomOrder is one of the run's orders sent so far (nil: none).
func (w *World) randomOrder(rng *rand.Rand) *order {
	var sent []*order
	for _, o := range w.orders {
		if o.sent {
			sent = append(sent, o)
		}
	}
	if len(sent) == 0 {
		return nil
	}
	return sent[rng.IntN(len(sent))]
}

// passCounted is Submission's key lines' store, counting the slots its
// cancels pass to their undos.
type passCounted struct {
	keyline.Store
	count func(string)
}

// Pass passes the slot, and counts it.
func (p passCounted) Pass(ctx context.Context, agent, key, holder, waiterID string, until, now time.Time) ([]keyline.Waiter, error) {
	p.count("slots passed to an undo by a cancel")
	return p.Store.Pass(ctx, agent, key, holder, waiterID, until, now)
}

// offload is the run's store of the bodies its senders offload (nil: a
// run without payloads has no bucket).
func (w *World) offload() *offload.Store {
	if w.payloads == nil {
		return nil
	}
	return offload.New(w.bucket, bucketName)
}
