package statestore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
	Now    time.Time
}

// Fence is what makes an outcome the record's to record: it is from the
// record's latest attempt in its round (for an async attempt, with its
// token's nonce), and the record is still claimed by it, or ready to be
// claimed again (the Supervisor gave the attempt back while its outcome was
// on its way: the outcome of a latest attempt stands as long as no later
// attempt began). For a wait or a timer, it is its being parked, in an
// order that runs forward.
type Fence struct {
	Ref     workflow.Ref
	Attempt int
	Round   int    // the round the attempt ran in (0 for 1)
	Token   string // an async attempt's nonce: a token is refused once its attempt was recovered
	// Parked, for a wait or a timer. Due: only once the Supervisor found its
	// time passed (a timer woken, a wait's timeout let go on). Event, for a
	// wait: the event received, recorded in the same write (the round's
	// Events[Event] = EventID).
	Parked         workflow.Kind
	Due            bool
	Event, EventID string
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
			w.Fence.condition(ch, snap.it)
		}
		s.compile(ch, snap.it, w)
		return ch
	}
	ch := build()
	in, err := s.input(ch, snap.it.OrderID)
	if errors.Is(err, ErrTooLarge) {
		// Too many fields to name one by one: the records it changes are
		// written whole, on the order as read.
		ch = build()
		in, err = s.inputWhole(ch, snap.it)
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
	if !w.Move.Read.Version {
		// Not conditioned on the whole order: the index entry is only pulled
		// in (to a record made ready, say), never moved on from a guess.
		return Snapshot{it: it}, s.pullIn(ctx, it, it.nextDue())
	}
	return Snapshot{it: it}, nil
}

// Holds reports whether the fence holds on the order as snap has it, at now.
func (f Fence) Holds(snap Snapshot, now time.Time) bool { return f.holds(snap.it, now) }

func (f Fence) holds(it stateItem, now time.Time) bool {
	r, ok := it.Recs[sortKey(f.Ref)]
	if !ok {
		return false
	}
	if f.Parked != "" {
		ev := it.Events[f.Event]
		return it.State == string(workflow.Pending) && r.State == string(workflow.Pending) && r.DueAt != 0 &&
			r.Kind == string(f.Parked) && (!f.Due || r.Woken != 0 || r.DueAt <= ms(now)) &&
			(f.Event == "" || ev == "" || ev == f.EventID) &&
			(f.Event == "" || f.Due || r.Armed == 0 || r.DueAt > ms(now) || r.Woken != 0)
	}
	return r.Attempt == f.Attempt && r.Round == max(f.Round, 1) && (f.Token == "" || r.Token == f.Token) &&
		(r.State == string(workflow.Processing) || (r.State == string(workflow.Pending) && r.DueAt != 0))
}

// condition adds the fence to ch.
func (f Fence) condition(ch *change, it stateItem) {
	p := ch.rec(f.Ref)
	if f.Parked == "" {
		ch.when("%[1]s.k = :attempt AND %[1]s.r = :round AND "+
			"(%[1]s.s = :processing OR (%[1]s.s = :pending AND attribute_exists(%[1]s.d)))", p)
		ch.val("attempt", num(int64(f.Attempt)))
		ch.val("round", num(int64(max(f.Round, 1))))
		ch.val("processing", str(string(workflow.Processing)))
		ch.val("pending", str(string(workflow.Pending)))
		if f.Token != "" {
			ch.when("%[1]s.tk = :token", p)
			ch.val("token", str(f.Token))
		}
		return
	}
	ch.when("%[1]s.s = :pending AND attribute_exists(%[1]s.d) AND %[1]s.ki = :kind", p)
	ch.val("pending", str(string(workflow.Pending)))
	ch.val("kind", str(string(f.Parked)))
	ch.state(workflow.Pending)
	if f.Due {
		ch.when("(attribute_exists(%[1]s.wk) OR %[1]s.d <= :now)", p)
		ch.at()
	}
	if f.Event != "" {
		ev := ch.alias("ev", f.Event)
		ch.cond = append(ch.cond, fmt.Sprintf("(attribute_not_exists(Evt.%[1]s) OR Evt.%[1]s = :eid)", ev))
		ch.set = append(ch.set, "Evt."+ev+" = "+ch.val("eid", str(f.EventID)))
		if !f.Due {
			// An event after the wait's timeout is too late, whether or not
			// the Supervisor has swept since: the timeout decides.
			ch.when("(attribute_not_exists(%[1]s.wa) OR %[1]s.d > :now OR attribute_exists(%[1]s.wk))", p)
			ch.at()
		}
	}
}

// compile adds to ch what w decided on the order as it (the item read).
func (s *Store) compile(ch *change, it stateItem, w Write) {
	m := w.Move
	readCondition(ch, it, m.Read)
	for _, l := range w.Looks {
		look(ch, l, it.Recs[sortKey(l.Ref)])
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
				ch.del = append(ch.del, "Ua "+ch.val("skipped", &types.AttributeValueMemberSS{Value: []string{sortKey(c.Ref)}}))
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
				ch.set = append(ch.set, "Err="+ch.val("taskError", str(clip(label(workflow.RecordName(it.Recs[sortKey(c.Ref)].Name, c.Ref), c.Ref)+": "+reason, MaxErrorBytes))))
			}
		}
	}
	for step, n := range itemsDone {
		ch.add = append(ch.add, "P."+ch.alias("p", strconv.Itoa(step))+" "+ch.val("items"+strconv.Itoa(step), num(int64(n))))
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
			ch.set = append(ch.set, "Err="+ch.val("taskError", str(fmt.Sprintf("%s took effect and has no undo: the order cannot be undone",
				label(it.Recs[sortKey(*m.Pivot)].Name, *m.Pivot)))))
		}
	}
	if len(errs) > 0 {
		ch.add = append(ch.add, "Ua "+ch.val("ua", &types.AttributeValueMemberSS{Value: errs}))
	}
	s.compileTask(ch, it, w)
}

// compileTask adds the task's move, and where the order stands in the
// deadline index after it.
func (s *Store) compileTask(ch *change, it stateItem, w Write) {
	m := w.Move
	if m.State != "" && m.State != workflow.State(it.State) {
		ch.task(m.State, "")
		held := it.State == string(workflow.Held)
		switch {
		case m.State == workflow.Compensating && (it.State == string(workflow.Pending) || held):
			ch.set = append(ch.set, "Dl=DlMs+"+ch.at()) // the undoing has as long as the order had
		case m.State == workflow.Pending && held:
			// The order's deadline stood still while it was held.
			ch.set = append(ch.set, "Dl="+ch.val("dlHeld", num(it.DeadlineAt+max(ms(w.Now)-it.HeldAt, 0))))
		case m.State == workflow.Held:
			ch.set = append(ch.set, "Ha="+ch.at(), "Hu="+ch.val("heldUntil", num(ms(m.HeldUntil))))
		}
		if held {
			ch.remove = append(ch.remove, "Ha", "Hu")
		}
	}
	if w.Cancel != nil {
		ch.set = append(ch.set, "CxBy="+ch.val("by", str(clip(w.Cancel.By, MaxErrorBytes))), "CxAt="+ch.at())
		if w.Cancel.Reason != "" {
			ch.set = append(ch.set, "CxWhy="+ch.val("why", str(clip(w.Cancel.Reason, MaxErrorBytes))))
		}
	}
	if m.Cancel {
		ch.set = append(ch.set, "Ea="+ch.val("endAs", str(string(workflow.Cancelled))))
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
		switch {
		case it.Finished == nil:
			ch.cond = append(ch.cond, "attribute_not_exists(Fn)")
			ch.set = append(ch.set, "Fn="+ch.val("fn", num(1)))
		default:
			ch.cond = append(ch.cond, "Fn="+ch.val("fnRead", num(int64(*it.Finished))))
			ch.set = append(ch.set, "Fn="+ch.val("fn", num(int64(*it.Finished+1))))
		}
	}
	if r.Items != nil {
		p := "P." + ch.alias("p", strconv.Itoa(r.Items.Step))
		_, stored := it.ItemsDone[strconv.Itoa(r.Items.Step)]
		switch {
		case r.Items.Last() && !stored && r.Items.Done == 0:
			ch.cond = append(ch.cond, "attribute_not_exists("+p+")")
		case r.Items.Last():
			ch.cond = append(ch.cond, p+"="+ch.val("doneRead", num(int64(r.Items.Done))))
		case !stored:
			ch.cond = append(ch.cond, "(attribute_not_exists("+p+") OR "+p+"<"+ch.val("notLast", num(int64(r.Items.Of-1)))+")")
		default:
			ch.cond = append(ch.cond, p+"<"+ch.val("notLast", num(int64(r.Items.Of-1))))
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
			ch.del = append(ch.del, "Ua "+ch.val("retried", &types.AttributeValueMemberSS{Value: []string{sortKey(l.Ref)}}))
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
