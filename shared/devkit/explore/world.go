package explore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/scheduler"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/submission"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// visibility is the explorer's SQS visibility timeout: a message a handler
// failed (or is still handling) comes back this long after its delivery.
const visibility = 30 * time.Second

// World is one order's run: the product's own handlers (Submission, the
// Scheduler, an Agent per service, the Supervisor) over a real state store,
// with queues, services and a clock the explorer holds. Only one handler
// runs at a time: an Agent's call parks it until the explorer answers, and
// meanwhile anything else may happen.
type World struct {
	def       workflow.Definition
	id        string
	items     int
	topo      topology.Topology
	store     *statestore.Store
	rng       *rand.Rand
	faulty    bool // faults are injected (else: only races, duplicates and delays)
	faults    bool // faults were injected in this run (faulty before the drain)
	cancelled bool

	mu  sync.Mutex
	now time.Time

	q      *queues
	ledger ledger
	yields chan *call
	parked []*call
	async  []*call // async calls accepted, their callbacks not sent

	sub    *submission.Handler
	sched  *scheduler.Handler
	agents map[string]*agent.Handler
	sup    *supervisor.Supervisor

	alerts   []alert.Failure
	claims   []claimed
	trace    []string
	logs     bytes.Buffer
	logMu    sync.Mutex
	crashing bool            // the handler now running is killed at its next crash point
	ctx      context.Context // the run's: its real time
	sent     map[string]int  // events sent, by name
	skipped  map[string]bool // records an operator skipped (their effect never applied), by idempotency key
	decided  map[string]int  // the operator's decisions on the held order taken, by action
}

// claimed is an attempt an Agent's claim started, and whether everything
// its record's step needs was done in the order the claim returned.
type claimed struct {
	ref        workflow.Ref
	attempt    int
	completeBy time.Time
	needsMet   bool
}

// newWorld builds the handlers of one order's run of d over store, on the
// tables of topo (one deadline shard), with rng deciding everything.
func newWorld(d workflow.Definition, id string, items int, topo topology.Topology, store *statestore.Store, rng *rand.Rand, faulty bool) (*World, error) {
	w := &World{def: d, id: id, items: items, topo: topo, store: store, rng: rng, faulty: faulty, faults: faulty, now: time.Now().Truncate(time.Second),
		yields: make(chan *call), agents: map[string]*agent.Handler{}, sent: map[string]int{},
		skipped: map[string]bool{}, decided: map[string]int{}}
	w.q = &queues{now: w.clock}
	set, err := workflow.NewSet(d)
	if err != nil {
		return nil, err
	}
	send := queue.NewSender(w.q)
	log := slog.New(slog.NewTextHandler(&logWriter{w: w}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m := metrics.New(io.Discard, "explore")
	ntf := notify.New(send, notify.Allowed(nil), m, log)
	requests, agentQueues := map[string]string{}, map[string]supervisor.AgentQueues{}
	for _, a := range d.Agents() {
		requests[a] = w.url(topo.AgentRequests(a).Name)
		agentQueues[a] = supervisor.AgentQueues{Requests: requests[a], Responses: w.url(topo.AgentResponses(a).Name)}
	}
	watched := watchedStore{Store: store, w: w}
	if w.sub, err = submission.New(submission.Config{Workflows: set, AgentQueues: requests,
		SchedulerQueueURL: w.url(topo.SchedulerQueue().Name), DLQURL: w.url(topo.OrdersQueue().DLQName)},
		submission.Deps{Store: store, Send: send, Notify: ntf, Metrics: m, Log: log}); err != nil {
		return nil, err
	}
	alerts := alert.New(publisher{w}, "arn:aws:sns:us-east-1:000000000000:alerts", m)
	if w.sched, err = scheduler.New(scheduler.Config{Workflows: set, AgentQueues: requests, DLQURL: w.url(topo.SchedulerQueue().DLQName)},
		scheduler.Deps{Store: store, Send: send, Alerts: alerts, Notify: ntf, Metrics: m, Log: log}); err != nil {
		return nil, err
	}
	for _, a := range d.Agents() {
		h := agent.New(agent.Config{Workflows: set, Name: a, InstanceID: "explore-" + a,
			ResponseQueueURL: w.url(topo.AgentResponses(a).Name), DLQURL: w.url(topo.AgentRequests(a).DLQName),
			Backoff: resilience.Backoff{Base: time.Second, Max: 4 * time.Second}, CallTimeout: time.Minute, Margin: 100 * time.Millisecond},
			agent.Deps{Remote: service{agent: a, w: w}, Breaker: &resilience.Breaker{Threshold: 1 << 30, Cooldown: time.Hour},
				Store: watched, Send: send, Metrics: m, Log: log})
		h.Now, h.Sleep, h.Crash = w.clock, w.sleep, w.crash
		w.agents[a] = h
	}
	w.sup = supervisor.New(supervisor.Config{SchedulerQueueURL: w.url(topo.SchedulerQueue().Name), AgentQueues: agentQueues,
		PickupTimeout: d.PickupTimeout, ShardParallelism: 1, Parallel: 1},
		supervisor.Deps{Store: store, Queues: send, Alerts: alerts, Notify: ntf, Metrics: m, Log: log})
	w.sub.Now, w.sched.Now, w.sup.Now = w.clock, w.clock, w.clock
	w.sub.Crash, w.sched.Crash, w.sup.Crash = w.crash, w.crash, w.crash
	return w, nil
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

// sleep is an Agent's backoff: no time passes but the explorer's.
func (w *World) sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// crash kills the handler running at its crash point, if the explorer
// chose to (once).
func (w *World) crash(point string) {
	if w.crashing {
		w.crashing = false
		w.note("  killed at %s", point)
		panic("killed by the explorer at " + point)
	}
}

func (w *World) note(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%s %s", w.clock().Format("15:04:05.000"), fmt.Sprintf(format, args...)))
}

// logWriter keeps the handlers' logs of the world, for a failure's report.
type logWriter struct{ w *World }

func (l *logWriter) Write(b []byte) (int, error) {
	l.w.logMu.Lock()
	defer l.w.logMu.Unlock()
	if l.w.logs.Len() < 1<<20 {
		l.w.logs.Write(b)
	}
	return len(b), nil
}

// publisher takes the alerts.
type publisher struct{ w *World }

func (p publisher) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	var f alert.Failure
	if err := json.Unmarshal([]byte(*in.Message), &f); err != nil {
		return nil, err
	}
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	p.w.alerts = append(p.w.alerts, f)
	return &sns.PublishOutput{}, nil
}

// watchedStore is the store as the Agents see it, each claim noted.
type watchedStore struct {
	*statestore.Store
	w *World
}

// Claim implements agent.Store, noting whether the record's needs were all
// done in the order the claim returned.
func (s watchedStore) Claim(ctx context.Context, c statestore.Claim) (statestore.Step, error) {
	st, err := s.Store.Claim(ctx, c)
	if err == nil {
		s.w.claims = append(s.w.claims, claimed{ref: st.Ref(), attempt: st.Attempt, completeBy: st.CompleteBy, needsMet: s.w.needsMet(st)})
		s.w.note("  claimed %s attempt %d", st.RecordName(), st.Attempt)
	}
	return st, err
}

// needsMet reports whether every record of the steps st's step needs is
// Processed in the order its claim returned (an undo's: trivially).
func (w *World) needsMet(st statestore.Step) bool {
	if st.Undo || st.Read == nil {
		return true
	}
	o := st.Read.Order()
	for _, n := range w.def.Needs(st.Index) {
		for ref, r := range o.Recs {
			if ref.Index == n && !ref.Undo && r.State != workflow.Processed {
				return false
			}
		}
	}
	return true
}

// actor is one handler invocation: it runs until it ends, or parks in a
// service call.
type actor struct {
	m    *msg
	what string
	done chan struct{}
	resp events.SQSEventResponse
	err  error
}

// deliver hands m to its queue's consumer, as one SQS delivery: in flight
// (invisible) while handled, deleted once handled, back after the
// visibility timeout if it failed. It returns when the invocation ends or
// parks.
func (w *World) deliver(m *msg) {
	m.receives++
	w.q.hide(m, w.clock().Add(visibility))
	handle, what := w.consumer(m.queue)
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: m.id, Body: m.body, EventSourceARN: "arn:aws:sqs:::" + m.queue,
		Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives),
			"SentTimestamp": strconv.FormatInt(m.sentAt.UnixMilli(), 10)}}}}
	a := &actor{m: m, what: what, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		a.resp, a.err = handle(context.Background(), ev)
	}()
	w.await(a)
}

// await waits for a to end or park (or for the run's real time to end:
// an invocation that does neither is stuck).
func (w *World) await(a *actor) {
	select {
	case <-w.ctx.Done():
		w.note("  %s neither ended nor called a service: stuck", a.what)
	case <-a.done:
		w.crashing = false
		if a.err != nil || len(a.resp.BatchItemFailures) > 0 {
			w.note("  %s failed: it comes back after its visibility timeout", a.what)
			return // invisible until the visibility timeout set at delivery
		}
		w.q.remove(a.m)
	case c := <-w.yields:
		c.actor = a
		w.parked = append(w.parked, c)
		w.note("  %s calls %s %s", a.what, c.agent, c.action)
	}
}

// answer ends parked call c as kind says, and runs its invocation on. A hang
// is the call outlasting its caller: time passes to its deadline, its effect
// applied before then, or never.
func (w *World) answer(c *call, kind outcomeKind) {
	w.parked = remove(w.parked, c)
	if kind == answerRefused && w.ledger.at(c.key) >= 0 {
		kind = answerDone // a service that applied a key answers its repeats as it did: it refuses no more
	}
	switch {
	case kind == answerDone && c.token != "":
		w.async = append(w.async, c) // accepted: the callback comes later, by the attempt's CompleteBy
		c.deadline = w.completeBy(c)
		c.answer <- answer{body: []byte(`{"accepted":true}`)}
		w.await(c.actor)
		return
	case c.token != "": // an async call's effect comes with its callback
	case kind == answerDone || kind == answerLost, kind == answerHang && w.rng.IntN(2) == 0:
		w.ledger.apply(c.key)
	}
	c.answer <- answerOf(kind, c)
	w.await(c.actor)
}

// expire lets time pass to at: every call whose caller stops waiting
// before then hangs (its effect applied before its deadline, or never), and
// every async call past its attempt's CompleteBy is settled at the service
// (applied, its callback to come late, or dropped).
func (w *World) expire(at time.Time) {
	for {
		var first *call
		for _, c := range append(append([]*call(nil), w.parked...), w.async...) {
			if !c.deadline.IsZero() && c.deadline.Before(at) && (first == nil || c.deadline.Before(first.deadline)) {
				first = c
			}
		}
		if first == nil {
			break
		}
		w.advance(first.deadline)
		if slices.Contains(w.parked, first) {
			w.note("hang %s %s: its caller gave up", first.agent, first.key)
			w.answer(first, answerHang)
			continue
		}
		first.deadline = time.Time{} // settled: applied now and called back late, or never
		if w.rng.IntN(2) == 0 && !w.undoneFirst(first.key) {
			w.note("async %s applied at its attempt's CompleteBy: its callback comes late", first.key)
			w.ledger.apply(first.key)
			refused := false
			first.refused = &refused
		} else {
			w.note("async %s never done: no callback", first.key)
			w.async = remove(w.async, first)
		}
	}
	w.advance(at)
}

// completeBy is the CompleteBy of the attempt an async call's token names.
func (w *World) completeBy(c *call) time.Time {
	t, err := outcome.ParseToken(c.token)
	if err != nil {
		return time.Time{}
	}
	for _, cl := range w.claims {
		if cl.ref == t.Ref && cl.attempt == t.Attempt {
			return cl.completeBy
		}
	}
	return time.Time{}
}

// consumer is the handler that reads the named queue.
func (w *World) consumer(name string) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), string) {
	switch {
	case name == w.topo.OrdersQueue().Name:
		return w.sub.Handle, "submission"
	case name == w.topo.SchedulerQueue().Name || strings.HasSuffix(name, "-responses"):
		return w.sched.Handle, "scheduler"
	}
	for a, h := range w.agents {
		if name == w.topo.AgentRequests(a).Name {
			return h.Handle, "agent-" + a
		}
	}
	return func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, fmt.Errorf("no consumer of %s", name)
	}, "nobody"
}

// consumed are the queues a handler reads (not the DLQs).
func (w *World) consumed() []string {
	out := []string{w.topo.OrdersQueue().Name, w.topo.SchedulerQueue().Name}
	for a := range w.agents {
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

// longest is the longest timeout of the workflow's actions.
func (w *World) longest() time.Duration {
	var out time.Duration
	for _, st := range w.def.Steps {
		out = max(out, st.Timeout)
		if st.Undo != nil {
			out = max(out, st.Undo.Timeout)
		}
	}
	return out
}
