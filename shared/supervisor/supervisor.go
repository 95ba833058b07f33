// Package supervisor is the Supervisor handler: on each scheduled run it reads
// the orders due from the sparse deadline index, and their overdue records,
// and, with a conditional write on what it read, sends each overdue record
// back to Pending with a growing backoff, or at the failure threshold marks it
// Error and alerts. It knows nothing of the business steps; several
// supervisors may run at once.
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
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Store is the part of the state store the Supervisor uses.
type Store interface {
	Overdue(ctx context.Context, now time.Time, limit int) ([]statestore.Step, error)
	Requeue(ctx context.Context, read statestore.Step, failureCount int, reason string, dueAt, now time.Time) error
	GiveUp(ctx context.Context, read statestore.Step, failureCount int, reason string, alertDue, undoDue, now time.Time) error
	MarkAlerted(ctx context.Context, orderID string, r workflow.Ref, now time.Time) error
}

// Sender sends queue messages.
type Sender interface {
	SendJSON(ctx context.Context, queueURL string, v any, delay time.Duration) error
}

// Alerter tells the operator a step failed for good.
type Alerter interface {
	StepFailed(ctx context.Context, f alert.Failure) error
}

// Config is what the Supervisor needs to know of its deployment.
type Config struct {
	SchedulerQueueURL string
	PickupTimeout     time.Duration // a requeued step's pickup deadline, after its delay
	BatchLimit        int           // most records handled per run (default 500)
	Parallel          int           // records handled at once (default 8)
}

// Report counts what one sweep did.
type Report struct {
	Overdue   int `json:"overdue"`
	Recovered int `json:"recovered"`
	GaveUp    int `json:"gaveUp"`
	Alerted   int `json:"alerted"`
	Lost      int `json:"lostRaces"` // another supervisor (or the scheduler) changed the record first
}

// Supervisor is the Supervisor Lambda handler.
type Supervisor struct {
	cfg     Config
	store   Store
	send    Sender
	alerts  Alerter
	notify  *notify.Notifier
	metrics *metrics.Emitter
	log     *slog.Logger
	Now     func() time.Time
	// Crash, if set, is called after each recovery write and before the
	// message that follows it; a chaos test makes it panic there (the sweep
	// stops for that record, as a killed run would). Nil in production.
	Crash func(point string)
}

// New builds the handler.
func New(cfg Config, store Store, send Sender, alerts Alerter, n *notify.Notifier, m *metrics.Emitter, log *slog.Logger) *Supervisor {
	if cfg.BatchLimit <= 0 {
		cfg.BatchLimit = 500
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	return &Supervisor{cfg: cfg, store: store, send: send, alerts: alerts, notify: n, metrics: m, log: log, Now: time.Now}
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
	due, err := s.store.Overdue(ctx, now, s.cfg.BatchLimit)
	rep := Report{Overdue: len(due)}
	if err != nil && len(due) == 0 {
		return rep, fmt.Errorf("supervisor sweep: %w", err)
	} // with a partial read, handle what was read and report the error after

	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
		sem  = make(chan struct{}, s.cfg.Parallel)
	)
	for _, st := range due {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			outcome, herr := s.handleSafely(ctx, st, now)
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
		s.log.Info("supervisor sweep", "overdue", rep.Overdue, "recovered", rep.Recovered, "gave_up", rep.GaveUp,
			"alerted", rep.Alerted, "lost_races", rep.Lost)
	}
	if len(errs) > 0 {
		return rep, fmt.Errorf("supervisor sweep: %d failures; they stay due for the next run: %w", len(errs), errors.Join(errs...))
	}
	return rep, nil
}

type outcome int

const (
	none outcome = iota
	recovered
	gaveUp
	alerted
	lost
)

func (r *Report) add(o outcome) {
	switch o {
	case recovered:
		r.Recovered++
	case gaveUp:
		r.GaveUp++
		r.Alerted++
	case alerted:
		r.Alerted++
	case lost:
		r.Lost++
	}
}

// handleSafely turns a panic in one record's handling into that record's
// error: the record stays due, and the sweep goes on with the others.
func (s *Supervisor) handleSafely(ctx context.Context, st statestore.Step, now time.Time) (o outcome, err error) {
	defer func() {
		if p := recover(); p != nil {
			o, err = none, fmt.Errorf("%s: handling panicked: %v", st.Key(), p)
		}
	}()
	return s.handle(ctx, st, now)
}

func (s *Supervisor) crash(point string) {
	if s.Crash != nil {
		s.Crash(point)
	}
}

func (s *Supervisor) handle(ctx context.Context, st statestore.Step, now time.Time) (outcome, error) {
	switch st.State {
	case workflow.Error:
		if st.Alerted {
			return none, nil
		}
		return alerted, s.alert(ctx, st, st.LastError, now) // the Scheduler's alert was lost
	case workflow.Pending, workflow.Processing:
	default:
		return none, nil
	}
	reason := fmt.Sprintf("not claimed by %s", st.DueAt.UTC().Format(time.RFC3339Nano))
	if st.State == workflow.Processing {
		reason = fmt.Sprintf("attempt %d (%s) not completed by %s", st.Attempt, st.LockedBy,
			st.CompleteBy.UTC().Format(time.RFC3339Nano))
	}
	rec := workflow.DecideRecovery(st.Definition(), st.FailureCount)
	if rec.GiveUp {
		return s.giveUp(ctx, st, rec.FailureCount, fmt.Sprintf("failure threshold %d reached: %s", st.MaxFailures, reason), now)
	}
	err := s.store.Requeue(ctx, st, rec.FailureCount, reason, now.Add(rec.Delay+s.cfg.PickupTimeout), now)
	if errors.Is(err, statestore.ErrStale) {
		return lost, nil
	}
	if err != nil {
		return none, err
	}
	s.crash("supervisor.after-requeue")
	s.metrics.Count(metrics.SupervisorRecoveries, 1, map[string]any{"OrderID": st.OrderID, "Step": st.Name,
		"FailureCount": rec.FailureCount})
	s.log.Info("overdue step sent back to Pending", "order_id", st.OrderID, "step", st.Name,
		"failure_count", rec.FailureCount, "delay", rec.Delay, "reason", reason)
	// If this send is lost, the new pickup deadline brings us back.
	return recovered, s.send.SendJSON(ctx, s.cfg.SchedulerQueueURL, message.NewSchedule(st.OrderID, st.Ref()), rec.Delay)
}

// giveUp marks the record Error (for a step, starting compensation, as the
// record itself says), alerts, tells the order's caller and the Scheduler.
func (s *Supervisor) giveUp(ctx context.Context, st statestore.Step, failureCount int, reason string, now time.Time) (outcome, error) {
	after := st.AfterGiveUp()
	err := s.store.GiveUp(ctx, st, failureCount, reason, now.Add(s.cfg.PickupTimeout), now.Add(s.cfg.PickupTimeout), now)
	if errors.Is(err, statestore.ErrStale) {
		return lost, nil
	}
	if err != nil {
		return none, err
	}
	s.crash("supervisor.after-give-up")
	st.FailureCount, st.State = failureCount, workflow.Error // as written
	s.notify.Failed(ctx, notify.Event{OrderID: st.OrderID, ReplyQueue: st.ReplyQueue, Round: st.Round, Index: st.Index,
		Step: st.Name, Error: reason, At: now}, st.Undo, after.Next)
	aerr := s.alert(ctx, st, reason, now)
	if after.Next == workflow.Compensating {
		// If this send is lost, the undo's pickup deadline brings us back.
		if err := s.send.SendJSON(ctx, s.cfg.SchedulerQueueURL, message.NewSchedule(st.OrderID,
			workflow.Ref{Index: after.UndoFrom, Undo: true}), 0); err != nil {
			return gaveUp, errors.Join(aerr, err)
		}
	}
	return gaveUp, aerr
}

func (s *Supervisor) alert(ctx context.Context, st statestore.Step, reason string, now time.Time) error {
	s.log.Error("step failed for good", "order_id", st.OrderID, "step", st.Name, "reason", reason)
	err := s.alerts.StepFailed(ctx, alert.Failure{OrderID: st.OrderID, Step: st.Index, StepName: st.Name, Undo: st.Undo,
		Attempt: st.Attempt, FailureCount: st.FailureCount, LastError: reason,
		Compensation: alert.CompensationOf(st.Undo, st.AfterError()), DetectedBy: "supervisor", At: now})
	if err != nil {
		return err // still due: the next run alerts
	}
	return s.store.MarkAlerted(ctx, st.OrderID, st.Ref(), now)
}
