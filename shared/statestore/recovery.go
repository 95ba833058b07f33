package statestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// Failure is a record that failed for good.
type Failure struct {
	OrderID string
	Ref     workflow.Ref
	Name    string // the step's or undo action's, for the task's last error
	// After is what follows: the undo action to start and the task's state.
	After  workflow.Aftermath
	Cause  workflow.Cause
	Reason string
	Token  string // for an async attempt's callback: its token nonce
	// Parallel: the order's workflow runs steps at once: After is decided
	// from the order's records as read (failParallel), not given.
	Parallel bool
	// Due is when the alert, and the first undo action's pickup, are due: the
	// record stays due until MarkAlerted; if the alert or the undo's message
	// is lost, the Supervisor comes then.
	Due time.Time
	Now time.Time
}

// Fail records a non-transient error reply of the record's latest attempt
// (fenced as a completion is, see current). In one write: the record becomes
// Error and the task moves to f.After: Compensating (its first undo action
// made ready), or it ends Failed or CompensationFailed. The order is due at
// f.Due until MarkAlerted. It returns the task's state after the write.
func (s *Store) Fail(ctx context.Context, f Failure, attempt, round int) (workflow.State, error) {
	d, err := s.FailFor(ctx, f, attempt, round)
	return d.State, err
}

// FailFor is Fail, returning the order as the write left it.
func (s *Store) FailFor(ctx context.Context, f Failure, attempt, round int) (Done, error) {
	if f.Cause == "" {
		f.Cause = workflow.Refused
	}
	fence := func(ch *change, p string) { Completion{Attempt: attempt, Round: round, Token: f.Token}.fence(ch, p) }
	if f.Parallel {
		return s.failParallel(ctx, f, fence, -1, -1, attempt > 0)
	}
	ch := newChange(f.Now)
	p := ch.rec("r", f.Ref)
	fence(ch, p)
	return s.markError(ctx, ch, p, f, -1, taskFrom(f.Ref))
}

// GiveUp is the Supervisor failing a record for good.
type GiveUp struct {
	Read         Step // the record as read: the write is conditional on its Version
	FailureCount int  // the record's FailureCount from now on
	Cause        workflow.Cause
	Reason       string
	Due          time.Time // as Failure.Due
	Now          time.Time
}

// GiveUp does what Fail does for a record the Supervisor found overdue at its
// failure threshold or past the order's deadline, on the condition that the
// order is still as it read it (same Version). What follows comes from the
// record itself (AfterGiveUp: a timed-out step is undone too, a pivot is left
// to the operator): the Supervisor knows nothing of the workflow.
func (s *Store) GiveUp(ctx context.Context, g GiveUp) (workflow.State, error) {
	d, err := s.GiveUpFor(ctx, g)
	return d.State, err
}

// GiveUpFor is GiveUp, returning the order as the write left it: with the
// undo action it made ready, if any.
func (s *Store) GiveUpFor(ctx context.Context, g GiveUp) (Done, error) {
	f := Failure{OrderID: g.Read.OrderID, Ref: g.Read.Ref(), Name: g.Read.Name, After: g.Read.AfterGiveUp(), Cause: g.Cause,
		Reason: g.Reason, Due: g.Due, Now: g.Now}
	if g.Read.Parallel {
		return s.failParallel(ctx, f, func(*change, string) {}, g.FailureCount, g.Read.Version, g.Read.Attempt > 0)
	}
	ch := newChange(g.Now)
	p := ch.rec("r", f.Ref)
	ch.cond = append(ch.cond, "V = "+ch.val("version", num(int64(g.Read.Version))))
	return s.markError(ctx, ch, p, f, g.FailureCount, taskFrom(f.Ref))
}

// failParallel is markError for an order whose steps run at once: what
// follows comes from the order's records as read (workflow.Records'
// Compensate: what is ready stops, what runs is awaited, the latest done is
// undone first), and the write is conditional on the order's version as
// read, decided again on a race. version, if not -1, is the version the
// caller (the Supervisor) read: an order changed since is ErrStale. ran: the
// failing record may have taken effect (it was claimed).
func (s *Store) failParallel(ctx context.Context, f Failure, fence func(*change, string), failureCount, version int, ran bool) (Done, error) {
	it, err := s.item(ctx, f.OrderID)
	if err != nil {
		return Done{}, err
	}
	for range parallelTries {
		if version >= 0 && it.Version != version {
			return Done{}, ErrStale
		}
		recs := it.records()
		r := recs[f.Ref]
		r.State, r.Ready, r.DoneAt = workflow.Error, false, f.Now
		r.Ran = ran && (f.Cause.GaveUp() || f.Cause == workflow.Oversized)
		recs[f.Ref] = r
		f.After = workflow.Aftermath{UndoFrom: -1, Next: workflow.CompensationFailed}
		if !f.Ref.Undo {
			comp := recs.Compensate()
			f.After = workflow.Aftermath{UndoFrom: -1, Next: workflow.Compensating, Stop: comp.Stop}
			if comp.End != "" {
				f.After.Next = comp.End
			}
			if comp.Undo != nil {
				f.After.UndoFrom, f.After.UndoItem = comp.Undo.Index, comp.Undo.Item
			}
		}
		ch := newChange(f.Now)
		p := ch.rec("r", f.Ref)
		fence(ch, p)
		ch.cond = append(ch.cond, "V = "+ch.val("version", num(int64(it.Version))))
		d, err := s.markError(ctx, ch, p, f, failureCount, workflow.State(it.State))
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) || version >= 0 || ccf.Item == nil {
			if ccf != nil {
				return Done{}, ErrStale
			}
			return d, err
		}
		var old stateItem
		if attributevalue.UnmarshalMap(ccf.Item, &old) != nil {
			return Done{}, ErrStale
		}
		it = old
	}
	return Done{}, fmt.Errorf("fail %s/%s: the order changed each of the %d times it was decided; tried again",
		f.OrderID, sortKey(f.Ref), parallelTries)
}

func (s *Store) markError(ctx context.Context, ch *change, p string, f Failure, failureCount int, from workflow.State) (Done, error) {
	ch.set = append(ch.set, p+".s = "+ch.val("error", str(string(workflow.Error))),
		p+".e = "+ch.val("reason", str(f.Reason)), p+".d = "+ch.val("alertDue", num(ms(f.Due))),
		p+".c = "+ch.val("cause", str(string(f.Cause))), p+".dn = "+ch.at())
	if failureCount >= 0 {
		ch.set = append(ch.set, p+".fc = "+ch.val("fc", num(int64(failureCount))))
	}
	ch.add = append(ch.add, "Ua "+ch.val("sk", &types.AttributeValueMemberSS{Value: []string{sortKey(f.Ref)}}))
	ch.task(from, f.After.Next, fmt.Sprintf("%s: %s", label(workflow.RecordName(f.Name, f.Ref), f.Ref), f.Reason))
	if f.After.Next == workflow.Compensating && from == workflow.Pending {
		// Compensation starts, with as long as the order had.
		ch.set = append(ch.set, "Dl = DlMs + "+ch.at())
	}
	s.stopAll(ch, f.After.Stop, "not started: the order is being undone")
	if u, ok := f.After.Undo(); ok {
		s.makeReadyAs(ch, "un", u, f.Due)
	}
	ch.index(f.OrderID, s.shards, f.Due)
	what := fmt.Sprintf("mark %s/%s Error", f.OrderID, sortKey(f.Ref))
	var (
		d   Done
		err error
	)
	if f.Parallel || len(f.After.Stop) > 0 {
		d, err = s.writeDone(ctx, f.OrderID, ch, what, ms(f.Due))
	} else {
		d, err = s.updateDone(ctx, f.OrderID, ch, what)
	}
	if u, ok := f.After.Undo(); ok && err == nil {
		d.Ready = []workflow.Ref{u}
	}
	d.After = f.After
	return d, err
}

// label names a record for people: its action's name, "(undo)" for an
// undo action.
func label(name string, r workflow.Ref) string {
	if name == "" {
		name = sortKey(r)
	}
	if r.Undo {
		return name + " (undo)"
	}
	return name
}

// MarkAlerted records that the record's Error alert was sent: it has no
// deadline any more. Marking an already alerted record is a no-op. The
// order's index entry stays: the Supervisor moves it on, or removes it, when
// it comes (an alert is sent once per failure, so this costs little).
func (s *Store) MarkAlerted(ctx context.Context, orderID string, r workflow.Ref, now time.Time) error {
	ch := newChange(now)
	p := ch.rec("r", r)
	ch.when("attribute_exists(%[1]s.d) AND contains(Ua, :skv)", p)
	ch.val("skv", str(sortKey(r)))
	ch.set = append(ch.set, p+".al = "+ch.val("true", &types.AttributeValueMemberBOOL{Value: true}))
	ch.remove = append(ch.remove, p+".d")
	ch.del = append(ch.del, "Ua "+ch.val("sk", &types.AttributeValueMemberSS{Value: []string{sortKey(r)}}))
	ch.incident(p, "r", "operator alerted")
	_, err := s.db.UpdateItem(ctx, s.input(ch, orderID))
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("mark %s/%s alerted: %w", orderID, sortKey(r), err)
	}
	return nil
}

// AlertPending reports whether record r of the order failed for good and its
// alert is not yet recorded as sent (read consistently): a reply delivered
// twice is alerted once.
func (s *Store) AlertPending(ctx context.Context, orderID string, r workflow.Ref) (bool, error) {
	it, err := s.item(ctx, orderID)
	if err != nil {
		return false, err
	}
	rec, ok := it.Recs[sortKey(r)]
	return ok && rec.State == string(workflow.Error) && !rec.Alerted && rec.DueAt != 0, nil
}

// Retry is the Supervisor sending an attempt that did not complete back to
// Pending.
type Retry struct {
	Read         Step // the record as read: the write is conditional on its Version
	FailureCount int
	Reason       string
	ReadyAt      time.Time // when its message is delivered again (after the backoff)
	Due          time.Time // when the Supervisor looks again if it is not claimed
	Now          time.Time
}

// Requeue puts an overdue claimed record (the order still as read: same
// Version) back to Pending with its new FailureCount and no claim, ready
// from r.ReadyAt and due at r.Due.
func (s *Store) Requeue(ctx context.Context, r Retry) error {
	ch := newChange(r.Now)
	p := ch.rec("r", r.Read.Ref())
	ch.cond = append(ch.cond, "V = "+ch.val("version", num(int64(r.Read.Version))))
	ch.set = append(ch.set, p+".s = "+ch.val("pending", str(string(workflow.Pending))),
		p+".fc = "+ch.val("fc", num(int64(r.FailureCount))), p+".e = "+ch.val("reason", str(r.Reason)),
		p+".d = "+ch.val("recDue", num(ms(r.Due))), p+".ra = "+ch.val("readyAt", num(ms(r.ReadyAt))))
	ch.remove = append(ch.remove, p+".lk", p+".cb", p+".tk") // a recovered attempt's token is refused from now on
	ch.incident(p, "r", "recovered by the supervisor (failure %d): %s", r.FailureCount, r.Reason)
	ch.indexAfter(r.Read, s.shards, r.Due)
	return s.update(ctx, r.Read.OrderID, ch, "requeue "+r.Read.Key())
}

// Abandon ends an async attempt early, for its own Agent: its service never
// accepted the call before the Agent's time ran out, so no callback will
// come, and the attempt would otherwise hold the step until its CompleteBy
// (for an async step, the whole wait: hours). Fenced by the attempt and its
// token's nonce, it moves CompleteBy to now and pulls the order's look in:
// the Supervisor recovers the attempt at its next sweep, by the usual rules
// (retried after a backoff, or at the threshold failed for good).
func (s *Store) Abandon(ctx context.Context, st Step, reason string, now time.Time) error {
	ch := newChange(now)
	p := ch.rec("r", st.Ref())
	current(ch, p, st.Attempt, st.Round)
	ch.when("%[1]s.s = :processing AND %[1]s.tk = :token", p)
	ch.val("token", str(st.Token))
	ch.set = append(ch.set, p+".cb = "+ch.at(), p+".d = "+ch.at())
	ch.incident(p, "r", "attempt %d abandoned by its agent: %s", st.Attempt, reason)
	in := s.input(ch, st.OrderID)
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.db.UpdateItem(ctx, in)
	if isConditionFailed(err) {
		return ErrStale
	}
	if err != nil {
		return fmt.Errorf("abandon %s: %w", st.Key(), err)
	}
	var it stateItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return fmt.Errorf("decode %s: %w", st.OrderID, err)
	}
	return s.pullIn(ctx, it, ms(now))
}

// Wait is the Supervisor finding a record waiting: a ready record not yet
// claimed (its message re-sent, or held back for a backlog), or a claimed one
// whose reply may be waiting in a backlogged queue. It is not a failure.
type Wait struct {
	Read   Step // the record as read: the write is conditional on its Version
	Resent bool // its message was re-sent (else held back)
	// Woken: a parked record whose time passed, its wake sent to the
	// Scheduler (which completes only a record so marked).
	Woken bool
	Due   time.Time // when the Supervisor looks again
	Now   time.Time
}

// Waited records a Wait: Waits + 1 (and Resent + 1 if its message was
// re-sent) and a later deadline, and nothing else (no FailureCount, no
// attempt, no line in its incidents: a long wait is many looks, and each line
// would grow every later write; the Supervisor logs why).
func (s *Store) Waited(ctx context.Context, w Wait) error {
	ch := newChange(w.Now)
	p := ch.rec("r", w.Read.Ref())
	ch.cond = append(ch.cond, "V = "+ch.val("version", num(int64(w.Read.Version))))
	ch.set = append(ch.set, p+".w = "+ch.val("waits", num(int64(w.Read.Waits+1))),
		p+".d = "+ch.val("recDue", num(ms(w.Due))))
	if w.Resent {
		ch.set = append(ch.set, p+".rs = "+ch.val("resent", num(int64(w.Read.Resent+1))))
	}
	if w.Woken && w.Read.Woken.IsZero() {
		ch.set = append(ch.set, p+".wk = "+ch.at())
	}
	ch.indexAfter(w.Read, s.shards, w.Due)
	return s.update(ctx, w.Read.OrderID, ch, "record the wait of "+w.Read.Key())
}
