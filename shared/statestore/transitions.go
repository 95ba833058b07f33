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

// Claim takes a ready Pending record for owner: LockedBy = owner, Processing,
// Attempt + 1, CompleteBy = now + the action's timeout (also the record's
// deadline). The condition makes the claim exclusive. The order's entry in
// the deadline index does not move: the Supervisor looks at the pickup
// deadline, and then at CompleteBy if the step still runs (see Overdue). It
// returns the claimed record, or ErrNotClaimable.
func (s *Store) Claim(ctx context.Context, orderID string, r workflow.Ref, owner string, now time.Time) (Step, error) {
	c := newChange(now)
	p := c.rec("r", r)
	c.when("%[1]s.ProcessState = :pending AND attribute_not_exists(%[1]s.LockedBy) AND attribute_exists(%[1]s.DueAt)", p)
	c.val("pending", str(string(workflow.Pending)))
	c.set = append(c.set, p+".ProcessState = "+c.val("processing", str(string(workflow.Processing))),
		p+".LockedBy = "+c.val("owner", str(owner)), p+".CompleteBy = "+c.at()+" + "+p+".TimeoutMs",
		p+".DueAt = "+c.at()+" + "+p+".TimeoutMs", p+".Attempt = "+p+".Attempt + :one", p+".ClaimedAt = "+c.at())
	c.event(p, "r", "claimed by %s", owner)
	in := c.input(s.state, orderID)
	in.ReturnValues = types.ReturnValueAllNew
	out, err := s.db.UpdateItem(ctx, in)
	if isConditionFailed(err) {
		return Step{}, ErrNotClaimable
	}
	if err != nil {
		return Step{}, fmt.Errorf("claim %s/%s: %w", orderID, sortKey(r), err)
	}
	var it stateItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return Step{}, fmt.Errorf("decode claimed %s/%s: %w", orderID, sortKey(r), err)
	}
	return it.step(sortKey(r)), nil
}

// Completion is a successful reply to record.
type Completion struct {
	OrderID string
	Ref     workflow.Ref
	Attempt int
	Result  string
	// Next is the record to make ready, due at NextDueAt; when nil the task
	// ends in state End.
	Next      *workflow.Ref
	NextDueAt time.Time
	End       workflow.State
	Now       time.Time
}

// Complete marks the record Processed if, and only if, the reply is from its
// current attempt (fencing), and in the same write makes the next record
// ready or ends the task (the order then leaves the deadline index, unless an
// Error alert is still unconfirmed). A stale or duplicate reply gets ErrStale
// and changes nothing.
func (s *Store) Complete(ctx context.Context, c Completion) error {
	build := func(leaveIndex bool) *change {
		ch := newChange(c.Now)
		p := ch.rec("r", c.Ref)
		ch.when("%[1]s.ProcessState = :processing AND %[1]s.Attempt = :attempt", p)
		ch.val("processing", str(string(workflow.Processing)))
		ch.val("attempt", num(int64(c.Attempt)))
		ch.set = append(ch.set, p+".ProcessState = "+ch.val("processed", str(string(workflow.Processed))),
			p+".StepResult = "+ch.val("result", str(c.Result)))
		ch.remove = append(ch.remove, p+".LockedBy", p+".DueAt")
		ch.event(p, "r", "processed (attempt %d)", c.Attempt)
		if c.Next != nil {
			s.makeReady(ch, *c.Next, c.NextDueAt)
			return ch
		}
		ch.task(taskFrom(c.Ref), c.End, "")
		if leaveIndex {
			ch.cond = append(ch.cond, "attribute_not_exists(Unalerted)")
			ch.remove = append(ch.remove, "DueShard", "DueAt")
		}
		return ch
	}
	what := fmt.Sprintf("complete %s/%s attempt %d", c.OrderID, sortKey(c.Ref), c.Attempt)
	if c.Next != nil {
		return s.update(ctx, c.OrderID, build(false), what)
	}
	in := build(true).input(s.state, c.OrderID)
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	_, err := s.db.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &ccf):
		return fmt.Errorf("%s: %w", what, err)
	case !alertPending(ccf.Item, c):
		return ErrStale // a stale or duplicate reply: one write, refused
	}
	// The reply is current, but an Error of this order is not alerted yet:
	// the order stays in the index, for the Supervisor to alert.
	return s.update(ctx, c.OrderID, build(false), what)
}

// alertPending reports whether old, the order as a refused ending completion
// found it, still awaits an alert while the reply is current; when old is
// missing or unreadable it says true, and the retry's own condition decides.
func alertPending(old map[string]types.AttributeValue, c Completion) bool {
	var it stateItem
	if old == nil || attributevalue.UnmarshalMap(old, &it) != nil {
		return true
	}
	_, unalerted := old["Unalerted"] // as the refused condition saw it
	r := it.Recs[sortKey(c.Ref)]
	return unalerted && r.ProcessState == string(workflow.Processing) && r.Attempt == c.Attempt
}

// taskFrom is the state a task is in while r runs.
func taskFrom(r workflow.Ref) workflow.State {
	if r.Undo {
		return workflow.Compensating
	}
	return workflow.Pending
}

// makeReady adds to ch making waiting Pending record r ready, due at due. The
// order's index entry does not move: the Supervisor reads the order when the
// entry comes due and then recovers r if it is overdue, or moves the entry
// on to r's deadline.
func (s *Store) makeReady(ch *change, r workflow.Ref, due time.Time) {
	n := ch.rec("n", r)
	ch.when("%[1]s.ProcessState = :pending AND attribute_not_exists(%[1]s.DueAt)", n)
	ch.val("pending", str(string(workflow.Pending)))
	ch.set = append(ch.set, n+".DueAt = "+ch.val("nextDue", num(ms(due))))
	ch.event(n, "n", "ready")
}

// update runs the change; a failed condition is ErrStale.
func (s *Store) update(ctx context.Context, orderID string, ch *change, what string) error {
	_, err := s.db.UpdateItem(ctx, ch.input(s.state, orderID))
	if isConditionFailed(err) {
		return ErrStale
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
