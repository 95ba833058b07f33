package statestore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/workflow"
)

// Write is one decision of the rules to write (a workflow.Move), with what
// the store keeps beside it.
type Write struct {
	Move workflow.Move
	// Fence, for an outcome, is the record whose outcome it is and what
	// makes it that record's to record.
	Fence *Fence
	// Reason is a failure's (the failed record's last error); the
	// Supervisor's give-ups carry theirs in their Looks.
	Reason string
	// ResultBytes > 0: the fenced record's result is stored (PutResult);
	// without a fence, ResultOf's (a held record skipped with a result).
	ResultBytes int
	ResultOf    workflow.Ref
	// Looks are the Supervisor's bookkeeping of the records it found due.
	Looks []Look
	// Due is when the records the move makes ready are due (their pickup
	// deadline), and a failure's alert.
	Due time.Time
	// Cancel, for a cancel's move, is who asked and why.
	Cancel *CancelRequest
	// Notes are lines for records' histories: who decided what (an
	// operator's skip or undo of a held order).
	Notes []Note
	Now   time.Time
}

// Note is a line for a record's history (its incidents).
type Note struct {
	Ref  workflow.Ref
	What string
}

// Look is the Supervisor's bookkeeping of one record it found due (its
// decision, if it changes the record's state, is in the write's Move).
type Look struct {
	Ref workflow.Ref
	// Waited: a wait counted, no failure (Resent: its message was sent
	// again; Woken: a parked record whose time came, its wake sent).
	Waited, Resent, Woken bool
	Due                   time.Time // when the Supervisor looks again (a give-back: when it is due unclaimed)
	// For an attempt given back or given up on: its failure count from now
	// on and why; ReadyAt, for a give-back, when it is ready again.
	FailureCount int
	Reason       string
	ReadyAt      time.Time
	// By, for a give-back that is not the Supervisor's, says whose: a
	// cancel's (of an async attempt its service accepted), or its Agent's
	// (its service asked to slow down). It counts no failure.
	By string
	// Retry, for a give-back of a record that failed for good (a held
	// order's, retried by its operator): its failure is forgotten.
	Retry bool
	// Held, for a give-back by its Agent's flow control (a pause, a
	// Retry-After, its key's slots all held) before the call was made: it
	// did nothing, and waits; Reason says for what.
	Held bool
}

// Conflict means what a decision read of the order changed before its write
// (another write landed): Now is the order as that write left it (returned
// by the refused write itself), to decide again on.
type Conflict struct{ Now Snapshot }

func (c *Conflict) Error() string {
	return fmt.Sprintf("order %s changed since it was read (version %d now)", c.Now.OrderID(), c.Now.Version())
}

// Apply writes w, decided on snap, as one conditional UpdateItem that must
// find what the decision read still so (w.Move.Read) and, for an outcome,
// its fence holding. It returns the order as written; ErrStale if the fence
// no longer holds (the outcome is not the record's to record: nothing
// follows); or a *Conflict to decide again on.
func (s *Store) Apply(ctx context.Context, snap Snapshot, w Write) (Snapshot, error) {
	build := func() *change {
		ch := newChange(w.Now)
		ch.retain = snap.it.retention(s.keep)
		if w.Fence != nil {
			w.Fence.condition(ch)
		}
		ch.runs(snap.it.WfVersion)
		s.compile(ch, snap.it, w)
		return ch
	}
	var ch *change
	var in *dynamodb.UpdateItemInput
	err := ErrTooLarge
	for f := byField; f <= byMap && errors.Is(err, ErrTooLarge); f++ {
		// Too many fields to name one by one: the records it changes are
		// written whole, on the order as read; too many of those, the
		// whole record map. (A builder is spent once built: each form is
		// built afresh.)
		ch = build()
		in, err = s.input(ch, snap.it.OrderID, f, snap.it)
	}
	if err != nil {
		return snap, err
	}
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := s.updateItem(ctx, ch, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		var now stateItem
		if ccf.Item == nil || attributevalue.UnmarshalMap(ccf.Item, &now) != nil {
			return snap, ErrStale // the order is gone
		}
		if w.Fence != nil && !w.Fence.holds(now, w.Now) {
			return snap, ErrStale
		}
		if now.Version == snap.it.Version {
			return snap, fmt.Errorf("write %s: refused on the order as it was read (version %d): its counters disagree with its records",
				snap.it.OrderID, now.Version)
		}
		return snap, &Conflict{Now: Snapshot{it: now}}
	}
	if err != nil {
		return snap, fmt.Errorf("write %s: %w", snap.it.OrderID, err)
	}
	var it stateItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return snap, fmt.Errorf("decode %s: %w", snap.it.OrderID, err)
	}
	s.tellEnd(ctx, snap.it, it)
	if !w.Move.Read.Version {
		// Not conditioned on the whole order: the index entry is only pulled
		// in (to a record made ready, say), never moved on from a guess.
		return Snapshot{it: it}, s.pullIn(ctx, it, it.nextDue())
	}
	return Snapshot{it: it}, nil
}

// compile adds to ch what w decided on the order as it (the item read).
func (s *Store) compile(ch *change, it stateItem, w Write) {
	m := w.Move
	readCondition(ch, it, m.Read)
	for _, l := range w.Looks {
		look(ch, l, it.Recs[sortKey(l.Ref)])
	}
	for _, n := range w.Notes {
		ch.incident(ch.rec(n.Ref), "%s", clip(n.What, MaxIncidentBytes))
	}
	errs, itemsDone := []string{}, map[int]int{}
	after := m.State
	if after == "" {
		after = workflow.State(it.State)
	}
	for _, c := range m.Changes {
		p := ch.rec(c.Ref)
		switch c.State {
		case workflow.Processed:
			ch.put(p, "s", str(string(workflow.Processed)))
			ch.put(p, "dn", num(ms(c.DoneAt)))
			ch.drop(p, "d", "tk")
			if w.ResultBytes > 0 && ((w.Fence != nil && c.Ref == w.Fence.Ref) || (w.Fence == nil && c.Ref == w.ResultOf)) {
				ch.put(p, "o", num(int64(w.ResultBytes)))
			}
			if c.Ref.Item > 0 && !c.Ref.Undo {
				itemsDone[c.Ref.Index]++
			}
			if it.Recs[sortKey(c.Ref)].State == string(workflow.Error) { // a held record skipped: no alert is due
				ch.b.Delete(ch.attr("Ua"), ch.b.Value(&types.AttributeValueMemberSS{Value: []string{sortKey(c.Ref)}}))
			}
		case workflow.Error:
			reason := w.Reason
			if l, ok := lookAt(w.Looks, c.Ref); ok {
				reason = l.Reason
			}
			ch.put(p, "s", str(string(workflow.Error)))
			ch.put(p, "e", str(clip(reason, MaxRecordErrorBytes)))
			ch.put(p, "d", num(ms(w.Due)))
			ch.put(p, "c", str(string(c.Cause)))
			ch.put(p, "dn", num(ms(c.DoneAt)))
			ch.put(p, "af", str(string(after)))
			ch.drop(p, "tk")
			errs = append(errs, sortKey(c.Ref))
			if len(errs) == 1 {
				ch.b.Set(ch.attr("Err"), ch.b.String(clip(label(workflow.RecordName(it.Recs[sortKey(c.Ref)].Name, c.Ref), c.Ref)+": "+reason,
					MaxErrorBytes)))
			}
		}
	}
	for step, n := range itemsDone {
		ch.b.Add(ch.b.Key(ch.attr("P"), strconv.Itoa(step)), ch.b.Int(int64(n)))
	}
	for _, r := range m.Ready {
		p := ch.rec(r)
		ch.put(p, "d", num(ms(w.Due)))
		ch.put(p, "ra", num(ms(w.Now)))
	}
	if m.Pivot != nil && !slicesContains(errs, sortKey(*m.Pivot)) {
		// The undoing stops at a record that took effect (or may have: one
		// given up on, already alerted for its failure) with no undo: it is
		// due for an alert of its own, saying so.
		p := ch.rec(*m.Pivot)
		ch.put(p, "d", num(ms(w.Now)))
		ch.put(p, "af", str(string(after)))
		if it.Recs[sortKey(*m.Pivot)].State != string(workflow.Error) {
			ch.put(p, "e", str("it took effect and has no undo: the order cannot be undone"))
		}
		ch.drop(p, "al")
		errs = append(errs, sortKey(*m.Pivot))
		if len(errs) == 1 {
			ch.b.Set(ch.attr("Err"), ch.b.String(fmt.Sprintf("%s took effect and has no undo: the order cannot be undone",
				label(it.Recs[sortKey(*m.Pivot)].Name, *m.Pivot))))
		}
	}
	if len(errs) > 0 {
		ch.b.Add(ch.attr("Ua"), ch.b.Value(&types.AttributeValueMemberSS{Value: errs}))
	}
	s.compileTask(ch, it, w)
}

// compileTask adds the task's move, and where the order stands in the
// deadline index after it.
func (s *Store) compileTask(ch *change, it stateItem, w Write) {
	m := w.Move
	if m.State != "" && m.State != workflow.State(it.State) {
		ch.task(m.State)
		s.endEntry(ch, it, m.State)
		held := it.State == string(workflow.Held)
		switch {
		case m.State == workflow.Compensating && (it.State == string(workflow.Pending) || held):
			ch.b.Set(ch.attr("Dl"), x.Plus(ch.attr("DlMs"), ch.at())) // the undoing has as long as the order had
		case m.State == workflow.Pending && held:
			// The order's deadline stood still while it was held.
			ch.b.Set(ch.attr("Dl"), ch.b.Int(it.DeadlineAt+max(ms(w.Now)-it.HeldAt, 0)))
		case m.State == workflow.Held:
			ch.b.Set(ch.attr("Ha"), ch.at())
			ch.b.Set(ch.attr("Hu"), ch.b.Int(ms(m.HeldUntil)))
		}
		if held {
			ch.b.Remove(ch.attr("Ha"))
			ch.b.Remove(ch.attr("Hu"))
		}
	}
	if w.Cancel != nil {
		ch.b.Set(ch.attr("CxBy"), ch.b.String(clip(w.Cancel.By, MaxErrorBytes)))
		ch.b.Set(ch.attr("CxAt"), ch.at())
		if w.Cancel.Reason != "" {
			ch.b.Set(ch.attr("CxWhy"), ch.b.String(clip(w.Cancel.Reason, MaxErrorBytes)))
		}
	}
	if m.Cancel {
		ch.b.Set(ch.attr("Ea"), ch.b.String(string(workflow.Cancelled)))
	}
	switch {
	case m.Read.Version:
		// The order as read, exactly: its entry goes where the write leaves
		// its work due.
		if due := it.with(w).nextDue(); due != 0 {
			ch.index(it.shard(s.shards), fromMs(due))
		} else if it.DueShard != "" {
			ch.leaveIndex()
		}
	case m.State.Ended() && len(it.Unalerted) == 0:
		ch.leaveIndex()
	}
}

// readCondition adds what the decision read, which the write must find
// still so.
func readCondition(ch *change, it stateItem, r workflow.Read) {
	if r.Version {
		ch.version(it.Version)
	}
	if r.Forward {
		ch.state(workflow.Pending)
	}
	if r.Finishes {
		fn := ch.attr("Fn")
		switch {
		case it.Finished == nil:
			ch.b.If(x.NotExists(fn))
			ch.b.Set(fn, ch.b.Int(1))
		default:
			ch.b.If(x.Equal(fn, ch.b.Int(int64(*it.Finished))))
			ch.b.Set(fn, ch.b.Int(int64(*it.Finished+1)))
		}
	}
	if r.Items != nil {
		p := ch.b.Key(ch.attr("P"), strconv.Itoa(r.Items.Step))
		_, stored := it.ItemsDone[strconv.Itoa(r.Items.Step)]
		notLast := x.Less(p, ch.b.Int(int64(r.Items.Of-1)))
		switch {
		case r.Items.Last() && !stored && r.Items.Done == 0:
			ch.b.If(x.NotExists(p))
		case r.Items.Last():
			ch.b.If(x.Equal(p, ch.b.Int(int64(r.Items.Done))))
		case !stored:
			ch.b.If(x.Or(x.NotExists(p), notLast))
		default:
			ch.b.If(notLast)
		}
	}
}

// look adds the Supervisor's bookkeeping of one record, or a give-back's.
func look(ch *change, l Look, r recItem) {
	p := ch.rec(l.Ref)
	if !l.Due.IsZero() {
		ch.put(p, "d", num(ms(l.Due)))
	}
	switch {
	case l.Waited:
		ch.count(p, "w")
		if l.Resent {
			ch.count(p, "rs")
		}
		if l.Woken {
			ch.keep(p, "wk", num(ms(ch.now)))
		}
	case !l.ReadyAt.IsZero(): // given back
		ch.put(p, "s", str(string(workflow.Pending)))
		ch.put(p, "fc", num(int64(l.FailureCount)))
		ch.put(p, "ra", num(ms(l.ReadyAt)))
		ch.drop(p, "lk", "cb", "tk", "ac", "hk") // a recovered attempt's token is refused from now on
		if l.Retry {
			ch.drop(p, "dn", "c", "af", "al")
			if !r.ran() { // refused: it did nothing, and is no "may have run" for its retry (workflow's RetryHeld)
				ch.drop(p, "ca")
			} else {
				// Its failure is forgotten, not that an attempt of the
				// round may have taken effect: a give-back of a later
				// attempt before its call (its flow control, a payload
				// not read) keeps the claim that says so.
				ch.put(p, "mr", &types.AttributeValueMemberBOOL{Value: true})
			}
			ch.b.Delete(ch.attr("Ua"), ch.b.Value(&types.AttributeValueMemberSS{Value: []string{sortKey(l.Ref)}}))
		}
		switch {
		case l.Held:
			// Its flow control held the call, which was never made: a wait,
			// not a failure. The record keeps how often and the latest
			// reason (not a line each: a call may wait an hour), and, if
			// no earlier attempt of the round may have run (none failed,
			// none was given back after its request went), no claim that
			// would make it "may have run".
			ch.count(p, "hw")
			ch.put(p, "hy", str(clip(l.Reason, MaxIncidentBytes)))
			if l.FailureCount == 0 && !r.MayHaveRun {
				ch.drop(p, "ca")
			}
		case l.By != "":
			if !l.Retry {
				// Given back after its request went (a Retry-After after a
				// retry, a key lost mid-call): it may have taken effect,
				// whatever the attempts after it do.
				ch.put(p, "mr", &types.AttributeValueMemberBOOL{Value: true})
			}
			ch.put(p, "e", str(clip(l.Reason, MaxRecordErrorBytes)))
			ch.incident(p, "attempt given back by %s: %s", l.By, clip(l.Reason, MaxIncidentBytes))
		default:
			ch.put(p, "e", str(clip(l.Reason, MaxRecordErrorBytes)))
			if l.FailureCount <= MaxIncidents {
				ch.incident(p, "recovered by the supervisor (failure %d): %s", l.FailureCount, clip(l.Reason, MaxIncidentBytes))
			}
		}
	default: // given up on
		ch.put(p, "fc", num(int64(l.FailureCount)))
	}
}

func lookAt(looks []Look, r workflow.Ref) (Look, bool) {
	for _, l := range looks {
		if l.Ref == r {
			return l, true
		}
	}
	return Look{}, false
}

// with is the item as w leaves it, in what the deadline index follows: the
// task's state and deadline, and its records' states and deadlines.
func (it stateItem) with(w Write) stateItem {
	out := it
	out.Recs = maps.Clone(it.Recs)
	set := func(r workflow.Ref, f func(*recItem)) {
		rec := out.Recs[sortKey(r)]
		f(&rec)
		out.Recs[sortKey(r)] = rec
	}
	for _, l := range w.Looks {
		if !l.Due.IsZero() {
			set(l.Ref, func(r *recItem) { r.DueAt = ms(l.Due) })
		}
	}
	for _, c := range w.Move.Changes {
		set(c.Ref, func(r *recItem) {
			r.State = string(c.State)
			switch c.State {
			case workflow.Processed:
				r.DueAt = 0
			case workflow.Error:
				r.DueAt = ms(w.Due)
			}
		})
	}
	for _, ref := range w.Move.Ready {
		set(ref, func(r *recItem) { r.DueAt = ms(w.Due) })
	}
	if w.Move.Pivot != nil {
		set(*w.Move.Pivot, func(r *recItem) { r.DueAt = ms(w.Now) })
	}
	if s := w.Move.State; s != "" && s != workflow.State(it.State) {
		held := it.State == string(workflow.Held)
		switch {
		case s == workflow.Compensating && (it.State == string(workflow.Pending) || held):
			out.DeadlineAt = it.DeadlineMs + ms(w.Now)
		case s == workflow.Pending && held:
			out.DeadlineAt = it.DeadlineAt + max(ms(w.Now)-it.HeldAt, 0)
		case s == workflow.Held:
			out.HeldAt, out.HeldUntil = ms(w.Now), ms(w.Move.HeldUntil)
		}
		if held {
			out.HeldAt, out.HeldUntil = 0, 0
		}
		out.State = string(s)
	}
	return out
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
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
