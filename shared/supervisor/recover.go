package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

func (s *Supervisor) handle(ctx context.Context, st statestore.Step, now time.Time, d *depths) (outcome, error) {
	switch {
	case st.State == workflow.Error && !st.Alerted, st.Unalerted && !st.Alerted && st.State == workflow.Processed:
		// The Scheduler's alert was lost; or a record that took effect and
		// has no undo stopped the undoing of an order whose steps run at once.
		return alerted, s.alert(ctx, st, st.LastError, now)
	}
	switch st.State {
	case workflow.Error:
		return none, nil
	case workflow.Pending, workflow.Processing:
	default:
		return none, nil
	}
	f := workflow.Found{Action: st.Definition(), State: st.State, FailureCount: st.FailureCount,
		Waited: now.Sub(st.ReadyAt), Overdue: now.Sub(st.CompleteBy), Cancelled: st.Cancelling,
		PastDeadline: !st.Deadline.IsZero() && !now.Before(st.Deadline)}
	if st.State == workflow.Pending && !st.Armed.IsZero() {
		f.Parked, f.Continue, f.EventKept = st.Kind, st.Continue, st.EventKept
		if !st.Woken.IsZero() {
			f.SinceWoken = max(now.Sub(st.Woken), time.Millisecond)
		}
	}
	var backlog string
	switch {
	case f.PastDeadline:
	case f.Parked == "":
		backlog = s.backlog(ctx, d, s.startQueues(st)...)
	case f.SinceWoken > 0:
		backlog = s.backlog(ctx, d, s.cfg.SchedulerQueueURL) // where its wake waits
	}
	f.Backlogged = backlog != ""
	dec := workflow.Decide(f, s.pickup(st))
	switch dec.Verdict {
	case workflow.Resend, workflow.Hold:
		return s.wait(ctx, st, dec, backlog, now)
	case workflow.Retry:
		return s.retry(ctx, st, dec, now)
	case workflow.Wake:
		return s.wake(ctx, st, dec, now)
	}
	switch {
	case f.PastDeadline:
		return s.giveUp(ctx, st, dec.FailureCount, workflow.Expired,
			fmt.Sprintf("order deadline %s passed: %s", stamp(st.Deadline), waitingFor(st)), now)
	case st.Cancelling:
		return s.giveUp(ctx, st, dec.FailureCount, workflow.TimedOut,
			fmt.Sprintf("the order is being cancelled: %s", waitingFor(st)), now)
	case f.Parked == workflow.KindEvent:
		return s.giveUp(ctx, st, dec.FailureCount, workflow.TimedOut, waitingFor(st), now)
	}
	return s.giveUp(ctx, st, dec.FailureCount, workflow.TimedOut,
		fmt.Sprintf("failure threshold %d reached: %s", st.MaxFailures, waitingFor(st)), now)
}

// waitingFor says what the record was doing when its clock ran out.
func waitingFor(st statestore.Step) string {
	switch {
	case st.Kind == workflow.KindEvent && !st.Armed.IsZero():
		return fmt.Sprintf("no event by its timeout %s (waiting since %s)", stamp(st.DueAt), stamp(st.Armed))
	case st.Kind == workflow.KindTimer && !st.Armed.IsZero():
		return fmt.Sprintf("sleeping until %s", stamp(st.DueAt))
	case st.Async && st.State == workflow.Processing:
		return fmt.Sprintf("attempt %d (%s): no callback by %s", st.Attempt, st.LockedBy, stamp(st.CompleteBy))
	}
	if st.State == workflow.Processing {
		return fmt.Sprintf("attempt %d (%s) not completed by %s", st.Attempt, st.LockedBy, stamp(st.CompleteBy))
	}
	return fmt.Sprintf("not claimed since it was ready at %s", stamp(st.ReadyAt))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// wait records a wait that is no failure: a ready step whose message is
// re-sent (or held back for a backlog), or an attempt whose reply may be
// queued. The record keeps only counts; the log says why.
func (s *Supervisor) wait(ctx context.Context, st statestore.Step, dec workflow.Decision, backlog string, now time.Time) (outcome, error) {
	resend := dec.Verdict == workflow.Resend
	err := s.d.Store.Waited(ctx, statestore.Wait{Read: st, Resent: resend, Due: now.Add(dec.After), Now: now})
	if errors.Is(err, statestore.ErrStale) {
		return lost, nil
	}
	if err != nil {
		return none, err
	}
	props := map[string]any{"OrderID": st.OrderID, "Step": st.Name, "Waits": st.Waits + 1, "State": string(st.State)}
	log := []any{"order_id", st.OrderID, "step", st.Name, "state", st.State, "ready_at", st.ReadyAt,
		"waits", st.Waits + 1, "look_again_in", dec.After}
	if !resend {
		s.d.Metrics.Count(metrics.WaitsHeld, 1, props)
		s.d.Log.Info("waiting step held back: a queue it may wait in is backlogged", append(log, "backlog", backlog)...)
		return held, nil
	}
	s.crash("supervisor.after-wait")
	s.d.Metrics.Count(metrics.MessagesResent, 1, props)
	s.d.Log.Info("ready step not claimed and no backlog: its message sent again", log...)
	// If this send is lost, the next look sends it again.
	return resent, s.start.StartRecord(ctx, st, 0)
}

// wake marks a parked record whose time came woken (and due again a pickup
// timeout later, in case the wake is lost) and has the Scheduler complete it.
func (s *Supervisor) wake(ctx context.Context, st statestore.Step, dec workflow.Decision, now time.Time) (outcome, error) {
	err := s.d.Store.Waited(ctx, statestore.Wait{Read: st, Woken: true, Due: now.Add(dec.After), Now: now})
	if errors.Is(err, statestore.ErrStale) {
		return lost, nil
	}
	if err != nil {
		return none, err
	}
	s.crash("supervisor.after-wake")
	s.d.Log.Info("parked step due: woken", "order_id", st.OrderID, "step", st.Name, "kind", st.Kind, "due", st.DueAt)
	m := message.NewSchedule(st.OrderID, st.Ref(), st.Workflow, st.WfVersion)
	m.Wake = true
	// If this send is lost, the next look (a pickup timeout later) sends it again.
	return woken, s.d.Queues.SendJSON(ctx, s.cfg.SchedulerQueueURL, m, 0)
}

// retry sends an attempt that did not complete back to Pending, ready again
// after the decision's backoff.
func (s *Supervisor) retry(ctx context.Context, st statestore.Step, dec workflow.Decision, now time.Time) (outcome, error) {
	reason := waitingFor(st)
	readyAt := now.Add(dec.After)
	err := s.d.Store.Requeue(ctx, statestore.Retry{Read: st, FailureCount: dec.FailureCount, Reason: reason,
		ReadyAt: readyAt, Due: readyAt.Add(s.pickup(st)), Now: now})
	if errors.Is(err, statestore.ErrStale) {
		return lost, nil
	}
	if err != nil {
		return none, err
	}
	s.crash("supervisor.after-requeue")
	s.d.Metrics.Count(metrics.SupervisorRecoveries, 1, map[string]any{"OrderID": st.OrderID, "Step": st.Name,
		"FailureCount": dec.FailureCount, "OverdueMs": now.Sub(st.CompleteBy).Milliseconds()})
	s.d.Log.Info("overdue attempt sent back to Pending", "order_id", st.OrderID, "step", st.Name,
		"failure_count", dec.FailureCount, "delay", dec.After, "reason", reason)
	// If this send is lost, the new pickup deadline brings us back.
	return recovered, s.start.StartRecord(ctx, st, dec.After)
}

// giveUp marks the record Error (for a step, starting compensation, as the
// record itself says), alerts, tells the order's caller and the Scheduler.
func (s *Supervisor) giveUp(ctx context.Context, st statestore.Step, failureCount int, cause workflow.Cause, reason string, now time.Time) (outcome, error) {
	done, err := s.d.Store.GiveUpFor(ctx, statestore.GiveUp{Read: st, FailureCount: failureCount, Cause: cause, Reason: reason,
		Due: now.Add(s.pickup(st)), Now: now})
	state := done.State
	if errors.Is(err, statestore.ErrStale) {
		return lost, nil
	}
	if err != nil {
		return none, err
	}
	s.crash("supervisor.after-give-up")
	st.FailureCount, st.State, st.Cause = failureCount, workflow.Error, cause // as written
	o := gaveUp
	if cause == workflow.Expired {
		o = expired
		s.d.Metrics.Count(metrics.DeadlinesPassed, 1, map[string]any{"OrderID": st.OrderID, "Step": st.Name})
	}
	if state.Ended() {
		notify.CountEnd(s.d.Metrics, st.OrderID, state)
	}
	s.d.Notify.Failed(ctx, notify.Event{OrderID: st.OrderID, ReplyQueue: st.ReplyQueue, Round: st.Round, Index: st.Index,
		Step: st.Name, Error: reason, At: now}, st.Undo, state)
	aerr := s.alert(ctx, st, reason, now)
	// If this send is lost, the undo's pickup deadline brings us back.
	if err := s.start.Start(ctx, st.OrderID, done.Ready, 0); err != nil {
		return o, errors.Join(aerr, err)
	}
	return o, aerr
}

func (s *Supervisor) alert(ctx context.Context, st statestore.Step, reason string, now time.Time) error {
	s.d.Log.Error("step failed for good", "order_id", st.OrderID, "step", st.Name, "reason", reason)
	f := alert.Failure{OrderID: st.OrderID, Step: st.Index, StepName: st.RecordName(), Undo: st.Undo,
		Attempt: st.Attempt, FailureCount: st.FailureCount, LastError: reason,
		Compensation: alert.CompensationOf(st.Undo, st.AfterError()), OrderState: st.AfterError().Next, DetectedBy: "supervisor", At: now}
	if st.State == workflow.Processed { // it took effect and has no undo: the undoing stopped at it
		f.Compensation, f.OrderState = "stopped: this step took effect and has no undo action; the order cannot be undone by itself",
			workflow.CompensationFailed
	}
	err := s.d.Alerts.StepFailed(ctx, f)
	if err != nil {
		return err // still due: the next run alerts
	}
	return s.d.Store.MarkAlerted(ctx, st.OrderID, st.Ref(), now)
}

// pickup is the pickup timeout of the record's workflow (the configured one
// for an order stored before it was kept).
func (s *Supervisor) pickup(st statestore.Step) time.Duration {
	return cmp.Or(st.Pickup, s.cfg.PickupTimeout)
}
