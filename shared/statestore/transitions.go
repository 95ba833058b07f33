package statestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/workflow"
)

// Claim is an Agent taking a ready record: the start of an attempt.
type Claim struct {
	OrderID string
	Ref     workflow.Ref
	Agent   string // the claiming agent: a record is claimed only by its own agent
	Owner   string // the claimant, kept in LockedBy
	// Token, for an async step, is the attempt's token nonce: its
	// service's callback must carry it.
	Token string
	Now   time.Time
}

// Claim takes a ready Pending record for c.Owner: LockedBy = owner,
// Processing, Attempt + 1, CompleteBy = now + the action's timeout (also the
// record's deadline). The condition makes the claim exclusive; the time the
// record waited since it became ready (ReadyAt) was queue wait, never counted
// against it. It returns the claimed record, ErrNotClaimable, or, for a ready
// record of another agent, ErrWrongAgent.
//
// The order's entry in the deadline index is not moved by a claim (an index
// write per step), unless it is later than the new CompleteBy: then it is
// pulled in, so a hung attempt is found at CompleteBy.
func (s *Store) Claim(ctx context.Context, c Claim) (Step, error) {
	ch := newChange(c.Now)
	p := ch.rec("r", c.Ref)
	ch.when("%[1]s.s = :pending AND attribute_not_exists(%[1]s.lk) AND attribute_exists(%[1]s.d) AND %[1]s.a = :agent", p)
	ch.val("pending", str(string(workflow.Pending)))
	ch.val("agent", str(c.Agent))
	ch.set = append(ch.set, p+".s = "+ch.val("processing", str(string(workflow.Processing))),
		p+".lk = "+ch.val("owner", str(c.Owner)), p+".cb = "+ch.at()+" + "+p+".t",
		p+".d = "+ch.at()+" + "+p+".t", p+".k = if_not_exists("+p+".k, :zero) + :one", p+".ca = "+ch.at())
	ch.val("zero", num(0))
	if c.Token != "" {
		ch.set = append(ch.set, p+".tk = "+ch.val("token", str(c.Token)))
	}
	in := s.input(ch, c.OrderID)
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return Step{}, notClaimable(ccf.Item, c)
	}
	if err != nil {
		return Step{}, fmt.Errorf("claim %s/%s: %w", c.OrderID, sortKey(c.Ref), err)
	}
	var it stateItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return Step{}, fmt.Errorf("decode claimed %s/%s: %w", c.OrderID, sortKey(c.Ref), err)
	}
	st := it.step(sortKey(c.Ref))
	if it.Parallel {
		st.Records = it.records() // where the others stood: its outcome's first guess
	}
	if err := s.pullIn(ctx, it, ms(st.CompleteBy)); err != nil {
		return st, err
	}
	return st, nil
}

// ErrWrongAgent means the record is ready but belongs to another agent: the
// request was routed to the wrong queue.
var ErrWrongAgent = errors.New("record belongs to another agent")

// notClaimable says why a claim was refused, from the record as it was.
func notClaimable(old map[string]types.AttributeValue, c Claim) error {
	var it stateItem
	if old == nil || attributevalue.UnmarshalMap(old, &it) != nil {
		return ErrNotClaimable
	}
	r, ok := it.Recs[sortKey(c.Ref)]
	if ok && r.Agent != c.Agent && r.State == string(workflow.Pending) && r.DueAt != 0 && r.LockedBy == "" {
		return fmt.Errorf("%s/%s is %q's (%s), not %q's: %w", c.OrderID, sortKey(c.Ref), r.Agent, r.Name, c.Agent, ErrWrongAgent)
	}
	return ErrNotClaimable
}

// Completion is a record done: an attempt's success, an event a wait
// received, a timer woken.
type Completion struct {
	OrderID string
	Ref     workflow.Ref
	Attempt int
	Round   int // the round the attempt ran in (0 for 1)
	// Token, for an async attempt's callback: the nonce its claim stored
	// (a token is refused once its attempt was recovered).
	Token string
	// Parked, for a wait or a timer: the record is fenced by its being
	// parked (ready, of this kind), not by an attempt. Due: only once the
	// Supervisor found its time passed (a timer woken, a wait's timeout let
	// go on).
	Parked workflow.Kind
	Due    bool
	// Event, for a wait: the event received, recorded in the same write
	// (the round's Events[name] = EventID).
	Event, EventID string
	// ResultBytes > 0: the record's result is stored (PutResult).
	ResultBytes int
	// Next is the record to make ready, due at NextDueAt; when nil the task
	// ends in state End.
	Next      *workflow.Ref
	NextDueAt time.Time
	End       workflow.State
	Now       time.Time
	// Progress, for an order whose steps run at once, decides what the
	// completion moves on from the order's records (Next and End are not
	// used then; NextDueAt is when what it makes ready is due). Read are the
	// records as the completer last read them (its claim's, Step.Records):
	// the first guess, or, if nil, they are read first.
	Progress func(workflow.Records) workflow.Progress
	Read     workflow.Records
}

// fence adds the condition that the completion is the record's to make:
// its latest attempt's (and token's), or, for a parked record, its being
// parked.
func (c Completion) fence(ch *change, p string) {
	if c.Parked == "" {
		current(ch, p, c.Attempt, c.Round)
		if c.Token != "" {
			ch.when("%[1]s.tk = :token", p)
			ch.val("token", str(c.Token))
		}
		return
	}
	ch.when("%[1]s.s = :pending AND attribute_exists(%[1]s.d) AND %[1]s.ki = :kind", p)
	ch.val("pending", str(string(workflow.Pending)))
	ch.val("kind", str(string(c.Parked)))
	if c.Due {
		ch.when("(attribute_exists(%[1]s.wk) OR %[1]s.d <= :now)", p)
		ch.at()
	}
	if c.Event != "" {
		ch.names["#ev"] = c.Event
		ch.cond = append(ch.cond, "(attribute_not_exists(Evt.#ev) OR Evt.#ev = :eid)")
		ch.set = append(ch.set, "Evt.#ev = "+ch.val("eid", str(c.EventID)))
		if !c.Due {
			// An event after the wait's timeout is too late, whether or not
			// the Supervisor has swept since: the timeout decides.
			ch.when("(attribute_not_exists(%[1]s.wa) OR %[1]s.d > :now OR attribute_exists(%[1]s.wk))", p)
			ch.at()
		}
	}
}

// done adds marking the record at p Processed (with its result's mark).
func (c Completion) done(ch *change, p string) {
	ch.set = append(ch.set, p+".s = "+ch.val("processed", str(string(workflow.Processed))), p+".dn = "+ch.at())
	if c.ResultBytes > 0 {
		ch.set = append(ch.set, p+".o = "+ch.val("resultBytes", num(int64(c.ResultBytes))))
	}
	ch.remove = append(ch.remove, p+".d", p+".tk")
}

// ErrCancelling means the reply is current but its order is being
// cancelled: what comes next is the undoing (CompleteCancelled), not the
// next step.
var ErrCancelling = errors.New("the order is being cancelled")

// Complete marks the record Processed if, and only if, the reply is from its
// latest attempt (fencing, see current), and in the same write makes the next
// record ready or ends the task (the order then leaves the deadline index,
// unless an Error alert is still unconfirmed). It returns the task's state
// after the write. A stale or duplicate reply gets ErrStale and changes
// nothing; a step's reply while the order is being cancelled gets
// ErrCancelling.
func (s *Store) Complete(ctx context.Context, c Completion) (workflow.State, error) {
	d, err := s.Finish(ctx, c)
	return d.State, err
}

// Done is the order as a completion left it: what the order's caller is told.
type Done struct {
	State      workflow.State // the task's
	ReplyQueue string
	Round      int
	// Ready are the records the write made ready (an order whose steps run
	// at once: the caller starts them). After is, for a failure, what
	// follows it.
	Ready []workflow.Ref
	After workflow.Aftermath
}

// Finish is Complete, returning the order as the write left it.
func (s *Store) Finish(ctx context.Context, c Completion) (Done, error) {
	if c.Progress != nil {
		return s.finishParallel(ctx, c)
	}
	d, err := s.completeOnce(ctx, c, c.Next == nil)
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return d, err
	}
	var old stateItem
	if ccf.Item == nil || attributevalue.UnmarshalMap(ccf.Item, &old) != nil {
		return Done{}, ErrStale
	}
	current := c.isCurrent(old)
	switch {
	case current && old.CxBy != "" && !c.Ref.Undo:
		return Done{}, ErrCancelling
	case current && c.Next == nil && len(old.Unalerted) > 0:
		// An Error of this order is not alerted yet: the order stays in
		// the index, for the Supervisor to alert.
		d, err = s.completeOnce(ctx, c, false)
		if isConditionFailed(err) {
			return Done{}, ErrStale
		}
		return d, err
	}
	return Done{}, ErrStale // a stale or duplicate reply: one write, refused
}

func doneOf(it stateItem) Done {
	return Done{State: workflow.State(it.State), ReplyQueue: it.ReplyQueue, Round: it.Round}
}

// completeOnce is one try of Complete; a refused condition is returned as
// the ConditionalCheckFailedException, with the item as it was.
func (s *Store) completeOnce(ctx context.Context, c Completion, leaveIndex bool) (Done, error) {
	ch := newChange(c.Now)
	p := ch.rec("r", c.Ref)
	c.fence(ch, p)
	if !c.Ref.Undo {
		ch.cond = append(ch.cond, "attribute_not_exists(CxBy)")
	}
	c.done(ch, p)
	if c.Next != nil {
		s.makeReady(ch, *c.Next, c.NextDueAt)
	} else {
		ch.task(taskFrom(c.Ref), c.End, "")
		if leaveIndex {
			ch.cond = append(ch.cond, "attribute_not_exists(Ua)")
			ch.remove = append(ch.remove, "DueShard", "DueAt")
		}
	}
	var due int64 // the next step's look pulls the order's in (0: none)
	if c.Next != nil {
		due = ms(c.NextDueAt)
	}
	return s.writeDone(ctx, c.OrderID, ch, fmt.Sprintf("complete %s/%s attempt %d", c.OrderID, sortKey(c.Ref), c.Attempt), due)
}

// current adds the fence of a reply to the record at path: it is from the
// record's latest attempt in its round, and the record is either still
// claimed by it, or waiting to be claimed again, the Supervisor having found
// the attempt overdue while its reply waited in a queue. The reply of a
// latest attempt is the record's outcome as long as no later attempt began.
func current(ch *change, p string, attempt, round int) {
	ch.when("%[1]s.k = :attempt AND %[1]s.r = :round AND "+
		"(%[1]s.s = :processing OR (%[1]s.s = :pending AND attribute_exists(%[1]s.d)))", p)
	ch.val("attempt", num(int64(attempt)))
	ch.val("round", num(int64(max(round, 1))))
	ch.val("processing", str(string(workflow.Processing)))
	ch.val("pending", str(string(workflow.Pending)))
}

// isCurrent is the completion's fence, read from the item as it was.
func (c Completion) isCurrent(it stateItem) bool {
	r := it.Recs[sortKey(c.Ref)]
	if c.Parked != "" {
		return r.State == string(workflow.Pending) && r.DueAt != 0 && r.Kind == string(c.Parked) &&
			(!c.Due || r.Woken != 0 || r.DueAt <= ms(c.Now)) && (c.Event == "" || it.Events[c.Event] == "" || it.Events[c.Event] == c.EventID) &&
			(c.Event == "" || c.Due || r.Armed == 0 || r.DueAt > ms(c.Now) || r.Woken != 0)
	}
	return r.Attempt == c.Attempt && r.Round == max(c.Round, 1) && (c.Token == "" || r.Token == c.Token) &&
		(r.State == string(workflow.Processing) || (r.State == string(workflow.Pending) && r.DueAt != 0))
}

// taskFrom is the state a task is in while r runs.
func taskFrom(r workflow.Ref) workflow.State {
	if r.Undo {
		return workflow.Compensating
	}
	return workflow.Pending
}

// makeReady adds to ch making waiting Pending record r ready (from now), due
// at due. The order's index entry does not move: the Supervisor reads the
// order when the entry comes due and then recovers r if it is overdue, or
// moves the entry on to r's deadline (a writer that sets an earlier deadline
// than the entry pulls it in: see pullIn).
func (s *Store) makeReady(ch *change, r workflow.Ref, due time.Time) { s.makeReadyAs(ch, "n", r, due) }

// update runs the change; a failed condition is ErrStale.
func (s *Store) update(ctx context.Context, orderID string, ch *change, what string) error {
	_, err := s.db.UpdateItem(ctx, s.input(ch, orderID))
	if isConditionFailed(err) {
		return ErrStale
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// writeDone runs the change and returns the order as it left it, as
// updateDone does, but a refused condition comes back as the
// ConditionalCheckFailedException with the item as it was, for the caller
// to decide again on it (or to tell a repeat from a stale reply). The
// order's look is pulled in to due (0: not moved).
func (s *Store) writeDone(ctx context.Context, orderID string, ch *change, what string, due int64) (Done, error) {
	in := s.input(ch, orderID)
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := s.db.UpdateItem(ctx, in)
	if err != nil {
		if isConditionFailed(err) {
			return Done{}, err
		}
		return Done{}, fmt.Errorf("%s: %w", what, err)
	}
	var it stateItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return Done{}, fmt.Errorf("decode %s: %w", orderID, err)
	}
	return doneOf(it), s.pullIn(ctx, it, due)
}

// updateDone runs the change and returns the order as it left it; a failed
// condition is ErrStale.
func (s *Store) updateDone(ctx context.Context, orderID string, ch *change, what string) (Done, error) {
	in := s.input(ch, orderID)
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.db.UpdateItem(ctx, in)
	if isConditionFailed(err) {
		return Done{}, ErrStale
	}
	if err != nil {
		return Done{}, fmt.Errorf("%s: %w", what, err)
	}
	var it stateItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return Done{}, fmt.Errorf("decode %s: %w", orderID, err)
	}
	return doneOf(it), nil
}

// pullIn moves the order's index entry earlier, to due, if it (as the write
// just made returned it) is later: the Supervisor moves an entry on to the
// next deadline it knows of, and a claim or a completion may then set an
// earlier one. It does not bump the Version: it only moves a look earlier,
// and a Supervisor that read the order before writes on what it read.
// Losing this write (a crash) only delays the Supervisor's look.
func (s *Store) pullIn(ctx context.Context, it stateItem, due int64) error {
	if it.DueAt == 0 || it.DueAt <= due || due == 0 {
		return nil
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.state, Key: key(it.OrderID, taskSK),
		UpdateExpression:          aws.String("SET DueAt = :due"),
		ConditionExpression:       aws.String("DueAt > :due"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":due": num(due)},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("pull in the index entry of %s: %w", it.OrderID, err)
	}
	return nil
}
