// Package supervisor is the Supervisor handler. On each scheduled run it
// reads the orders due from the sparse deadline index and, with a conditional
// write on what it read, keeps three clocks apart (workflow.Decide):
//
//   - a ready step not yet claimed is waiting, never failing: its message is
//     re-sent at growing intervals (a lost one is repaired), or held back
//     while a queue it may wait in is backlogged;
//   - an attempt not completed by its CompleteBy failed: FailureCount + 1 and
//     back to Pending after a growing backoff, or at the threshold Error, an
//     alert and compensation (its Agent records the outcome before replying,
//     so no outcome of it can be waiting in a queue);
//   - an order past its deadline fails for good.
//
// It knows nothing of the business steps (each record says what it runs and
// what to undo); several supervisors may run at once: one write wins.
package supervisor

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Store is the part of the state store the Supervisor uses.
type Store interface {
	Shards() int
	DuePage(ctx context.Context, q statestore.DueQuery) (statestore.DuePage, error)
	MoveOn(ctx context.Context, e statestore.Early, now time.Time) error
	Apply(ctx context.Context, snap statestore.Snapshot, w statestore.Write) (statestore.Snapshot, error)
	MarkAlerted(ctx context.Context, orderID string, r workflow.Ref, now time.Time) error
	dispatch.RecordReader
}

// Queues sends messages and tells how many wait on a queue.
type Queues interface {
	SendJSON(ctx context.Context, queueURL string, v any, delay time.Duration) error
	Depth(ctx context.Context, queueURL string) (queue.Depth, error)
}

// Alerter tells the operator a step failed for good.
type Alerter interface {
	StepFailed(ctx context.Context, f alert.Failure) error
}

// AgentQueues are one agent's request and response queue URLs.
type AgentQueues struct{ Requests, Responses string }

// FlowControl reads an agent's flow control (flow.Store): whether it holds
// its calls now.
type FlowControl interface {
	Control(ctx context.Context, agent string) (flow.Control, error)
}

// Deps are what the Supervisor calls.
type Deps struct {
	Store   Store
	Queues  Queues
	Flow    FlowControl // nil: no agent holds its calls (delayed messages explain no wait)
	Alerts  Alerter
	Notify  *notify.Notifier
	Metrics *metrics.Emitter
	Log     *slog.Logger
	// Census counts the orders in flight by version once a period and
	// alerts on those of a version not deployed; nil: no census.
	Census *Census
}

// Report counts what one sweep did.
type Report struct {
	Orders     int `json:"orders"`    // orders looked at: the due index entries read, each read consistently
	Overdue    int `json:"overdue"`   // records found due (of the orders looked at: one write each, races lost aside)
	MovedOn    int `json:"movedOn"`   // orders found due with no record due, moved on in the index
	Resent     int `json:"resent"`    // ready steps' messages re-sent
	Held       int `json:"held"`      // waits a backlog explains
	Recovered  int `json:"recovered"` // attempts retried
	GaveUp     int `json:"gaveUp"`
	Expired    int `json:"expired"` // of GaveUp, by the order's deadline
	Alerted    int `json:"alerted"`
	Woken      int `json:"woken"`      // waits and timers whose time came
	HoldsEnded int `json:"holdsEnded"` // held orders undone at the end of their hold
	Lost       int `json:"lostRaces"`  // another supervisor (or the scheduler) changed the record first
	// Shards are what each shard of the deadline index gave, by shard.
	Shards []ShardReport `json:"shards"`
	// OutOfTime says the time budget ended the sweep with a shard's due
	// orders not all read: they come first in the next sweep.
	OutOfTime bool          `json:"outOfTime"`
	Elapsed   time.Duration `json:"elapsedNs"`
	// Census is what the sweep's share of the census of versions in
	// flight did (nil: none this time).
	Census *CensusReport `json:"census,omitempty"`
}

// ShardReport is what one shard gave in a sweep.
type ShardReport struct {
	Pages  int  `json:"pages"`
	Orders int  `json:"orders"` // due index entries read
	Done   bool `json:"done"`   // every entry due when the sweep began was read
}

// Supervisor is the Supervisor Lambda handler.
type Supervisor struct {
	cfg   Config
	d     Deps
	start dispatch.Restarter // a record's request straight to its Agent (a wait or a timer: through the Scheduler)
	owner string             // who holds the census when this one does
	Now   func() time.Time
	// Crash, if set, is called after each recovery write and before the
	// message that follows it; a chaos test makes it panic there (the sweep
	// stops for that record, as a killed run would). Nil in production.
	Crash func(point string)
}

// New builds the handler; it panics if cfg.Validate fails.
func New(cfg Config, d Deps) *Supervisor {
	cfg = cfg.mustValidate()
	requests := map[string]string{}
	for a, q := range cfg.AgentQueues {
		requests[a] = q.Requests
	}
	return &Supervisor{cfg: cfg, d: d, Now: time.Now, owner: rand.Text(), start: dispatch.Restarter{Records: d.Store, AgentQueues: requests,
		SchedulerQueueURL: cfg.SchedulerQueueURL, Send: d.Queues}}
}

// Handle is the entry point for the EventBridge scheduled rule.
func (s *Supervisor) Handle(ctx context.Context, _ events.EventBridgeEvent) (Report, error) {
	return s.Sweep(ctx)
}

type outcome int

const (
	none outcome = iota
	resent
	held
	recovered
	gaveUp
	expired
	alerted
	lost
	woken
	holdEnded
)

func (r *Report) add(o outcome) {
	switch o {
	case resent:
		r.Resent++
	case held:
		r.Held++
	case recovered:
		r.Recovered++
	case gaveUp, expired:
		r.GaveUp++
		r.Alerted++
		if o == expired {
			r.Expired++
		}
	case alerted:
		r.Alerted++
	case lost:
		r.Lost++
	case woken:
		r.Woken++
	case holdEnded:
		r.HoldsEnded++
	}
}

// handleSafely turns a panic in one order's handling into that order's
// error: its records stay due, and the sweep goes on with the others.
func (s *Supervisor) handleSafely(ctx context.Context, o statestore.DueOrder, now time.Time, d *depths) (outs []outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("order %s: handling panicked: %v", o.Read.OrderID(), p)
		}
	}()
	return s.handleOrder(ctx, o, now, d)
}

func (s *Supervisor) crash(point string) {
	if s.Crash != nil {
		s.Crash(point)
	}
}
