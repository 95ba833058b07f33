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
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Store is the part of the state store the Supervisor uses.
type Store interface {
	Overdue(ctx context.Context, now time.Time, limit int) ([]statestore.Step, error)
	Waited(ctx context.Context, w statestore.Wait) error
	Requeue(ctx context.Context, r statestore.Retry) error
	GiveUpFor(ctx context.Context, g statestore.GiveUp) (statestore.Done, error)
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

// DefaultBacklogDepth is how many messages waiting on a queue make it
// backlogged, unless configured: a batch's worth.
const DefaultBacklogDepth = 10

// Config is what the Supervisor needs to know of its deployment.
type Config struct {
	SchedulerQueueURL string
	// AgentQueues, by agent: a ready step's start may wait in its agent's
	// request queue, or the response queue of the agent whose outcome made
	// it ready (a wait's or a timer's, in the scheduler queue).
	AgentQueues   map[string]AgentQueues
	PickupTimeout time.Duration // the unit of the intervals between looks at a waiting step
	// BacklogDepth is how many visible messages make a queue backlogged for
	// a ready step's start (default DefaultBacklogDepth).
	BacklogDepth int
	BatchLimit   int // most records handled per run (default 500)
	Parallel     int // records handled at once (default 8)
}

// Deps are what the Supervisor calls.
type Deps struct {
	Store   Store
	Queues  Queues
	Alerts  Alerter
	Notify  *notify.Notifier
	Metrics *metrics.Emitter
	Log     *slog.Logger
}

// Report counts what one sweep did.
type Report struct {
	Overdue   int `json:"overdue"`
	Resent    int `json:"resent"`    // ready steps' messages re-sent
	Held      int `json:"held"`      // waits a backlog explains
	Recovered int `json:"recovered"` // attempts retried
	GaveUp    int `json:"gaveUp"`
	Expired   int `json:"expired"` // of GaveUp, by the order's deadline
	Alerted   int `json:"alerted"`
	Woken     int `json:"woken"`     // waits and timers whose time came
	Lost      int `json:"lostRaces"` // another supervisor (or the scheduler) changed the record first
}

// Supervisor is the Supervisor Lambda handler.
type Supervisor struct {
	cfg   Config
	d     Deps
	start dispatch.Restarter // a record's request straight to its Agent (a wait or a timer: through the Scheduler)
	Now   func() time.Time
	// Crash, if set, is called after each recovery write and before the
	// message that follows it; a chaos test makes it panic there (the sweep
	// stops for that record, as a killed run would). Nil in production.
	Crash func(point string)
}

// New builds the handler.
func New(cfg Config, d Deps) *Supervisor {
	if cfg.BatchLimit <= 0 {
		cfg.BatchLimit = 500
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	if cfg.BacklogDepth <= 0 {
		cfg.BacklogDepth = DefaultBacklogDepth
	}
	requests := map[string]string{}
	for a, q := range cfg.AgentQueues {
		requests[a] = q.Requests
	}
	return &Supervisor{cfg: cfg, d: d, Now: time.Now, start: dispatch.Restarter{Records: d.Store, AgentQueues: requests,
		SchedulerQueueURL: cfg.SchedulerQueueURL, Send: d.Queues}}
}

// Handle is the entry point for the EventBridge scheduled rule.
func (s *Supervisor) Handle(ctx context.Context, _ events.EventBridgeEvent) (Report, error) {
	return s.Sweep(ctx)
}

// Sweep handles the records overdue now. It returns an error when a record
// could not be handled (it stays due for the next run), so the function's
// errors show in its metrics; a race lost to another supervisor is no error.
func (s *Supervisor) Sweep(ctx context.Context) (Report, error) {
	now := s.Now()
	due, err := s.d.Store.Overdue(ctx, now, s.cfg.BatchLimit)
	rep := Report{Overdue: len(due)}
	if err != nil && len(due) == 0 {
		return rep, fmt.Errorf("supervisor sweep: %w", err)
	} // with a partial read, handle what was read and report the error after

	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		errs   []error
		sem    = make(chan struct{}, s.cfg.Parallel)
		depths = &depths{queues: s.d.Queues}
	)
	for _, st := range due {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			outcome, herr := s.handleSafely(ctx, st, now, depths)
			mu.Lock()
			defer mu.Unlock()
			rep.add(outcome)
			if herr != nil {
				errs = append(errs, herr)
			}
		}()
	}
	wg.Wait()
	if err != nil {
		errs = append(errs, err)
	}
	if rep.Overdue > 0 {
		s.d.Log.Info("supervisor sweep", "overdue", rep.Overdue, "resent", rep.Resent, "held", rep.Held,
			"recovered", rep.Recovered, "gave_up", rep.GaveUp, "expired", rep.Expired, "alerted", rep.Alerted, "woken", rep.Woken,
			"lost_races", rep.Lost)
	}
	if len(errs) > 0 {
		return rep, fmt.Errorf("supervisor sweep: %d failures; they stay due for the next run: %w", len(errs), errors.Join(errs...))
	}
	return rep, nil
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
	}
}

// handleSafely turns a panic in one record's handling into that record's
// error: the record stays due, and the sweep goes on with the others.
func (s *Supervisor) handleSafely(ctx context.Context, st statestore.Step, now time.Time, d *depths) (o outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			o, err = none, fmt.Errorf("%s: handling panicked: %v", st.Key(), p)
		}
	}()
	return s.handle(ctx, st, now, d)
}

func (s *Supervisor) crash(point string) {
	if s.Crash != nil {
		s.Crash(point)
	}
}
