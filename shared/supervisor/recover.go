package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/tracing"
	"github.com/sas-go/sas/shared/workflow"
)

// maxWrites bounds the writes one sweep makes of one order, races lost
// included: what is left is due still, for the next sweep.
const maxWrites = 12

// handleOrder handles every record of one order found due, in one
// conditional write (on the order's version as read) per sweep: its waits,
// wakes, retries and give-ups, decided together by the rules, the give-ups
// first (an order being undone starts nothing again). A write that loses a
// race is decided again on the order as the winner left it. Then it sends
// what follows (re-sends, wakes, retries after their backoff, the first
// undo), and the alerts not yet sent.
func (s *Supervisor) handleOrder(ctx context.Context, due statestore.DueOrder, now time.Time, d *depths) ([]outcome, error) {
	ctx, span := tracing.Join(ctx, due.Read.Trace(), "supervisor order") // what it sends goes on in its order's trace
	defer span.End()
	var outs []outcome
	var errs []error
	snap, steps := due.Read, due.Steps
	for n := 0; n < maxWrites; n++ {
		p := s.plan(ctx, snap, steps, now, d)
		if p.empty() {
			break
		}
		after, err := s.d.Store.Apply(ctx, snap, p.write)
		var c *statestore.Conflict
		if errors.As(err, &c) {
			outs = append(outs, lost)
			snap, steps = c.Now, c.Now.Due(now)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			break
		}
		o, err := s.follow(ctx, p, after, now)
		outs = append(outs, o...)
		if err != nil {
			errs = append(errs, err)
		}
		snap, steps = after, after.Due(now)
	}
	for _, st := range steps {
		if unalerted(st) {
			outs = append(outs, alerted)
			errs = append(errs, s.alert(ctx, st, st.LastError, now))
		}
	}
	return outs, errors.Join(errs...)
}

// unalerted reports whether st's alert is due and not confirmed sent: its
// failure, or, a record that took effect and has no undo, that the undoing
// stopped at it.
func unalerted(st statestore.Step) bool {
	return !st.Alerted && (st.State == workflow.Error || (st.Unalerted && st.State == workflow.Processed))
}

// plan is one write of the records of an order found due, and what follows
// it.
type plan struct {
	write   statestore.Write
	giveUps []giveUp
	waits   []wait
	// holdEnded: the order was held past its hold, and is undone.
	holdEnded bool
}

type giveUp struct {
	st     statestore.Step
	cause  workflow.Cause
	reason string
	count  int
}

type wait struct {
	st      statestore.Step
	verdict workflow.Verdict
	after   time.Duration
	backlog string
}

func (p plan) empty() bool { return len(p.giveUps) == 0 && len(p.waits) == 0 && !p.holdEnded }

// plan decides what becomes of the order's due records (steps), on the
// order as snap has it: the give-ups first, each on the order the ones
// before it left (an order being undone starts nothing again, so a running
// record is then given up on, not retried), then the waits, wakes and
// retries of what still runs.
func (s *Supervisor) plan(ctx context.Context, snap statestore.Snapshot, steps []statestore.Step, now time.Time, d *depths) plan {
	o := snap.Order()
	p := plan{write: statestore.Write{Move: workflow.Move{Read: workflow.Read{Version: true}}, Now: now}}
	p.write.Due = now.Add(s.pickup(snap))
	if snap.HoldEnded(now) {
		// No operator decided within the hold: it is undone, as its
		// failure would have done at once.
		if m, err := o.UndoHeld(); err == nil {
			o, p.write.Move, p.holdEnded = o.After(m), m, true
		}
	}
	decided := map[workflow.Ref]bool{}
	for more := true; more; {
		more = false
		for _, st := range steps {
			if decided[st.Ref] || !s.looksAt(st, o) {
				continue
			}
			f := s.found(st, o, now)
			if f.Parked == "" && f.State == workflow.Pending && !f.PastDeadline {
				continue // a wait's verdict follows the give-ups
			}
			dec := workflow.Decide(f, s.pickup(snap))
			if dec.Verdict != workflow.GiveUp {
				continue
			}
			g := giveUp{st: st, count: dec.FailureCount}
			g.cause, g.reason = whyGiveUp(st, f, now)
			m := o.Fail(st.Ref, g.cause, st.State == workflow.Processing || st.Ran, now)
			o, p.write.Move = o.After(m), p.write.Move.Then(m)
			p.write.Looks = append(p.write.Looks, statestore.Look{Ref: st.Ref, FailureCount: g.count, Reason: g.reason})
			p.giveUps, decided[st.Ref], more = append(p.giveUps, g), true, true
		}
	}
	for _, st := range steps {
		if decided[st.Ref] || !s.looksAt(st, o) {
			continue
		}
		f := s.found(st, o, now)
		var backlog string
		switch {
		case f.Parked == "":
			backlog, f.BacklogEnds = s.backlog(ctx, d, st, s.startQueues(st)...)
		case f.SinceWoken > 0:
			backlog, _ = s.backlog(ctx, d, st, s.cfg.SchedulerQueueURL) // where its wake waits
		}
		f.Backlogged = backlog != ""
		dec := workflow.Decide(f, s.pickup(snap))
		w := wait{st: st, verdict: dec.Verdict, after: dec.After, backlog: backlog}
		l := statestore.Look{Ref: st.Ref, Due: now.Add(dec.After)}
		switch dec.Verdict {
		case workflow.Resend, workflow.Hold, workflow.Wake:
			l.Waited, l.Resent, l.Woken = true, dec.Verdict == workflow.Resend, dec.Verdict == workflow.Wake
		case workflow.Retry:
			l.FailureCount, l.Reason, l.ReadyAt = dec.FailureCount, waitingFor(st), now.Add(dec.After)
			l.Due = l.ReadyAt.Add(s.pickup(snap))
			m := o.GiveBack(st.Ref, true)
			o, p.write.Move = o.After(m), p.write.Move.Then(m)
		default:
			continue // decided above
		}
		p.write.Looks = append(p.write.Looks, l)
		p.waits = append(p.waits, w)
	}
	return p
}

// looksAt reports whether the plan decides anything of st: a record at
// work in the order (a step stopped by its order's undoing is not, nor an
// alert still to send).
func (s *Supervisor) looksAt(st statestore.Step, o workflow.Order) bool {
	r := o.Recs[st.Ref]
	return (st.State == workflow.Pending || st.State == workflow.Processing) && !o.Stopped(r) && r.State == st.State
}

// found is what the rules know of st, in the order as o has it.
func (s *Supervisor) found(st statestore.Step, o workflow.Order, now time.Time) workflow.Found {
	f := workflow.Found{Action: st.Action, State: st.State, FailureCount: st.FailureCount,
		Waited: now.Sub(st.ReadyAt), Overdue: now.Sub(st.CompleteBy),
		Cancelled:    !st.Undo && o.State != workflow.Pending && o.State != workflow.Held,
		PastDeadline: !st.Deadline.IsZero() && !now.Before(st.Deadline)}
	if st.State == workflow.Pending && !st.Armed.IsZero() {
		f.Parked, f.Continue, f.EventKept = st.Kind, st.Continue, st.EventKept
		if !st.Woken.IsZero() {
			f.SinceWoken = max(now.Sub(st.Woken), time.Millisecond)
		}
	}
	return f
}

// whyGiveUp is the cause and the reason of giving up on st.
func whyGiveUp(st statestore.Step, f workflow.Found, now time.Time) (workflow.Cause, string) {
	switch {
	case f.PastDeadline:
		return workflow.Expired, fmt.Sprintf("order deadline %s passed: %s", stamp(st.Deadline), waitingFor(st))
	case f.Cancelled:
		return workflow.TimedOut, fmt.Sprintf("the order is being undone: %s", waitingFor(st))
	case f.Parked == workflow.KindEvent:
		return workflow.TimedOut, waitingFor(st)
	}
	return workflow.TimedOut, fmt.Sprintf("failure threshold %d reached: %s", st.MaxFailures, waitingFor(st))
}

// follow does what follows a plan's write: the give-ups' alerts and the
// undo they started, the re-sends, wakes and retries.
func (s *Supervisor) follow(ctx context.Context, p plan, after statestore.Snapshot, now time.Time) ([]outcome, error) {
	var outs []outcome
	var errs []error
	task := after.Task()
	if len(p.giveUps) > 0 {
		s.crash("supervisor.after-give-up")
	}
	if p.holdEnded {
		s.d.Metrics.Count(metrics.HoldsEnded, 1, map[string]any{"OrderID": task.OrderID, "State": string(task.State)})
		s.d.Log.Warn("held order not decided on within its hold: undone", "order_id", task.OrderID, "state", task.State)
		outs = append(outs, holdEnded)
	}
	for _, g := range p.giveUps {
		outs = append(outs, s.gaveUp(ctx, g, task, now, &errs))
	}
	// If this send is lost, the undo's pickup deadline brings us back.
	if err := s.start.Start(ctx, task.OrderID, p.write.Move.Ready, 0); err != nil {
		errs = append(errs, err)
	}
	for _, w := range p.waits {
		o, err := s.waited(ctx, w, now)
		outs = append(outs, o)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return outs, errors.Join(errs...)
}

// gaveUp tells the order's caller and the operator that g's record failed
// for good.
func (s *Supervisor) gaveUp(ctx context.Context, g giveUp, task statestore.Task, now time.Time, errs *[]error) outcome {
	st := g.st
	st.Ran = st.State == workflow.Processing || st.Ran
	st.FailureCount, st.State, st.Cause, st.After = g.count, workflow.Error, g.cause, task.State // as written
	o := gaveUp
	if g.cause == workflow.Expired {
		o = expired
		s.d.Metrics.Count(metrics.DeadlinesPassed, 1, map[string]any{"OrderID": st.OrderID, "Step": st.Name})
	}
	s.d.Notify.Failed(ctx, notify.Event{OrderID: st.OrderID, ReplyQueue: st.ReplyQueue, Round: st.Round, Ref: st.Ref,
		Step: st.RecordName(), Error: g.reason, At: now}, st.Undo, task.State)
	if err := s.alert(ctx, st, g.reason, now); err != nil {
		*errs = append(*errs, err)
	}
	return o
}

// waited does what follows a wait, a wake or a retry written.
func (s *Supervisor) waited(ctx context.Context, w wait, now time.Time) (outcome, error) {
	st := w.st
	switch w.verdict {
	case workflow.Hold:
		s.d.Metrics.Count(metrics.WaitsHeld, 1, map[string]any{"OrderID": st.OrderID, "Step": st.Name, "Waits": st.Waits + 1, "State": string(st.State)})
		s.d.Log.Info("waiting step held back: a queue it may wait in is backlogged", "order_id", st.OrderID, "step", st.RecordName(),
			"ready_at", st.ReadyAt, "waits", st.Waits+1, "look_again_in", w.after, "backlog", w.backlog)
		return held, nil
	case workflow.Resend:
		s.crash("supervisor.after-wait")
		s.d.Metrics.Count(metrics.MessagesResent, 1, map[string]any{"OrderID": st.OrderID, "Step": st.Name, "Waits": st.Waits + 1, "State": string(st.State)})
		s.d.Log.Info("ready step not claimed and no backlog: its message sent again", "order_id", st.OrderID, "step", st.RecordName(),
			"ready_at", st.ReadyAt, "waits", st.Waits+1, "look_again_in", w.after)
		// If this send is lost, the next look sends it again.
		return resent, s.start.StartRecord(ctx, st, 0)
	case workflow.Wake:
		s.crash("supervisor.after-wake")
		s.d.Log.Info("parked step due: woken", "order_id", st.OrderID, "step", st.Name, "kind", st.Kind, "due", st.DueAt)
		m := message.NewSchedule(st.OrderID, st.Ref, st.Workflow, st.WfVersion)
		m.Wake = true
		// If this send is lost, the next look (a pickup timeout later) sends it again.
		return woken, s.d.Queues.SendJSON(ctx, s.cfg.SchedulerQueueURL, m, 0)
	}
	s.crash("supervisor.after-requeue")
	count := st.FailureCount + 1
	s.d.Metrics.Count(metrics.SupervisorRecoveries, 1, map[string]any{"OrderID": st.OrderID, "Step": st.Name,
		"FailureCount": count, "OverdueMs": now.Sub(st.CompleteBy).Milliseconds()})
	s.d.Log.Info("overdue attempt sent back to Pending", "order_id", st.OrderID, "step", st.RecordName(),
		"failure_count", count, "delay", w.after, "reason", waitingFor(st))
	// If this send is lost, the new pickup deadline brings us back.
	return recovered, s.start.StartRecord(ctx, st, w.after)
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
		// An attempt its Agent ended after its service answered, transiently,
		// notes the answer (an incident); otherwise the Agent's line has it.
		if why := abandoned(st); why != "" {
			return fmt.Sprintf("attempt %d (%s) not completed by %s: %s", st.Attempt, st.LockedBy, stamp(st.CompleteBy), why)
		}
		return fmt.Sprintf("attempt %d (%s) not completed by %s; its service's last answer, if one came, is in its Agent's "+
			"log line \"attempt abandoned; no reply sent\" (order_id %s, attempt %d)", st.Attempt, st.LockedBy,
			stamp(st.CompleteBy), st.OrderID, st.Attempt)
	}
	if st.FlowWhy != "" { // given back before its call, waiting: say for what
		return fmt.Sprintf("not claimed since it was ready at %s; it waited: %s", stamp(st.ReadyAt), st.FlowWhy)
	}
	return fmt.Sprintf("not claimed since it was ready at %s", stamp(st.ReadyAt))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// abandoned is why st's current attempt was ended by its Agent, if it was
// ("": not noted): the incident of that attempt's abandonment.
func abandoned(st statestore.Step) string {
	prefix := fmt.Sprintf("attempt %d abandoned by its agent: ", st.Attempt)
	for i := len(st.Incidents) - 1; i >= 0; i-- {
		if what, ok := strings.CutPrefix(st.Incidents[i].What, prefix); ok {
			return what
		}
	}
	return ""
}

// alert tells the operator st failed for good (or, a record that took
// effect with no undo, that the undoing stopped at it), and records it sent.
func (s *Supervisor) alert(ctx context.Context, st statestore.Step, reason string, now time.Time) error {
	s.d.Log.Error("step failed for good", "order_id", st.OrderID, "step", st.RecordName(), "reason", reason)
	f := alert.Failure{OrderID: st.OrderID, Step: st.Index, StepName: st.RecordName(), Undo: st.Undo,
		Attempt: st.Attempt, FailureCount: st.FailureCount, LastError: reason,
		Compensation: alert.CompensationOf(st.Undo, st.After, !st.HasUndo && st.Ran), OrderState: st.After, DetectedBy: "supervisor", At: now}
	if st.State == workflow.Processed { // it took effect and has no undo: the undoing stopped at it
		f.Compensation, f.OrderState = "stopped: this step took effect and has no undo action; the order cannot be undone by itself",
			workflow.CompensationFailed
	}
	if err := s.d.Alerts.StepFailed(ctx, f); err != nil {
		return err // still due: the next run alerts
	}
	return s.d.Store.MarkAlerted(ctx, st.OrderID, st.Ref, now)
}

// pickup is the pickup timeout of the order's workflow (the configured one
// for an order stored before it was kept).
func (s *Supervisor) pickup(snap statestore.Snapshot) time.Duration {
	return snap.Pickup(cmp.Or(s.cfg.PickupTimeout, time.Minute))
}
