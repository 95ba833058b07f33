package statestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Failure is a record that failed for good.
type Failure struct {
	OrderID string
	Ref     workflow.Ref
	// After is what follows: the undo action to start and the task's state.
	After    workflow.Aftermath
	Reason   string
	AlertDue time.Time // the record stays due until MarkAlerted; if the alert is lost, the supervisor sends it
	UndoDue  time.Time // the first undo action's pickup deadline
	Now      time.Time
}

// Fail records a non-transient error reply of the record's current attempt.
// In one write: the record becomes Error and the task moves to f.After:
// Compensating (its first undo action made ready), or it ends Failed or
// CompensationFailed. The order is due at f.AlertDue until MarkAlerted.
func (s *Store) Fail(ctx context.Context, f Failure, attempt int) error {
	ch := newChange(f.Now)
	p := ch.rec("r", f.Ref)
	ch.when("%[1]s.ProcessState = :processing AND %[1]s.Attempt = :attempt", p)
	ch.val("processing", str(string(workflow.Processing)))
	ch.val("attempt", num(int64(attempt)))
	return s.markError(ctx, ch, p, f, -1)
}

// GiveUp does what Fail does for a record the supervisor found overdue at its
// failure threshold, on the condition that the order is still as it read it
// (same Version). What follows comes from the record itself (AfterGiveUp: a
// timed-out step is undone too, a pivot is left to the operator): the
// supervisor knows nothing of the workflow.
func (s *Store) GiveUp(ctx context.Context, read Step, failureCount int, reason string, alertDue, undoDue, now time.Time) error {
	f := Failure{OrderID: read.OrderID, Ref: read.Ref(), After: read.AfterGiveUp(), Reason: reason,
		AlertDue: alertDue, UndoDue: undoDue, Now: now}
	ch := newChange(now)
	p := ch.rec("r", f.Ref)
	ch.cond = append(ch.cond, "Version = "+ch.val("version", num(int64(read.Version))))
	return s.markError(ctx, ch, p, f, failureCount)
}

func (s *Store) markError(ctx context.Context, ch *change, p string, f Failure, failureCount int) error {
	ch.set = append(ch.set, p+".ProcessState = "+ch.val("error", str(string(workflow.Error))),
		p+".LastError = "+ch.val("reason", str(f.Reason)), p+".DueAt = "+ch.val("alertDue", num(ms(f.AlertDue))))
	if failureCount >= 0 {
		ch.set = append(ch.set, p+".FailureCount = "+ch.val("fc", num(int64(failureCount))))
	}
	ch.remove = append(ch.remove, p+".LockedBy")
	ch.add = append(ch.add, "Unalerted "+ch.val("sk", &types.AttributeValueMemberSS{Value: []string{sortKey(f.Ref)}}))
	ch.event(p, "r", "failed for good: %s", f.Reason)
	ch.task(taskFrom(f.Ref), f.After.Next, fmt.Sprintf("%s: %s", sortKey(f.Ref), f.Reason))
	due := f.AlertDue
	if f.After.Next == workflow.Compensating {
		s.makeReady(ch, workflow.Ref{Index: f.After.UndoFrom, Undo: true}, f.UndoDue)
		if f.UndoDue.Before(due) {
			due = f.UndoDue
		}
	}
	ch.index(f.OrderID, s.shards, due)
	return s.update(ctx, f.OrderID, ch, fmt.Sprintf("mark %s/%s Error", f.OrderID, sortKey(f.Ref)))
}

// MarkAlerted records that the record's Error alert was sent: it has no
// deadline any more. Marking an already alerted record is a no-op. The
// order's index entry stays: the Supervisor moves it on, or removes it, when
// it comes (an alert is sent once per failure, so this costs little).
func (s *Store) MarkAlerted(ctx context.Context, orderID string, r workflow.Ref, now time.Time) error {
	ch := newChange(now)
	p := ch.rec("r", r)
	ch.when("%[1]s.ProcessState = :error AND attribute_exists(%[1]s.DueAt)", p)
	ch.val("error", str(string(workflow.Error)))
	ch.set = append(ch.set, p+".Alerted = "+ch.val("true", &types.AttributeValueMemberBOOL{Value: true}))
	ch.remove = append(ch.remove, p+".DueAt")
	ch.del = append(ch.del, "Unalerted "+ch.val("sk", &types.AttributeValueMemberSS{Value: []string{sortKey(r)}}))
	ch.event(p, "r", "operator alerted")
	_, err := s.db.UpdateItem(ctx, ch.input(s.state, orderID))
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("mark %s/%s alerted: %w", orderID, sortKey(r), err)
	}
	return nil
}

// Requeue puts an overdue record (the order still as read: same Version) back
// to Pending with its new FailureCount, no claim, and a new pickup deadline
// dueAt, which is also the order's in the index.
func (s *Store) Requeue(ctx context.Context, read Step, failureCount int, reason string, dueAt, now time.Time) error {
	ch := newChange(now)
	p := ch.rec("r", read.Ref())
	ch.cond = append(ch.cond, "Version = "+ch.val("version", num(int64(read.Version))))
	ch.set = append(ch.set, p+".ProcessState = "+ch.val("pending", str(string(workflow.Pending))),
		p+".FailureCount = "+ch.val("fc", num(int64(failureCount))), p+".LastError = "+ch.val("reason", str(reason)),
		p+".DueAt = "+ch.val("recDue", num(ms(dueAt))))
	ch.remove = append(ch.remove, p+".LockedBy", p+".CompleteBy")
	ch.event(p, "r", "recovered by the supervisor (failure %d): %s", failureCount, reason)
	ch.index(read.OrderID, s.shards, dueAt)
	return s.update(ctx, read.OrderID, ch, "requeue "+read.Key())
}

// Overdue returns up to limit records whose deadline is at or before now.
//
// It queries every shard of the sparse deadline index for the orders due (the
// index holds only orders with work in flight or an alert unconfirmed, so its
// cost follows the overdue work, not the table), then reads those orders
// consistently. An order's index entry is when the Supervisor must look next,
// which may be before its records' deadlines: the writes of the hot path do
// not move it (a claim, a step made ready), to save the index writes. So an
// order found due with no record overdue is moved on in the index to its
// earliest record deadline, or leaves it if none has one (a conditional
// write on the Version read). Every write made on what this returns is
// conditional on the Version read too.
func (s *Store) Overdue(ctx context.Context, now time.Time, limit int) ([]Step, error) {
	var ids []string
	for shard := 0; shard < s.shards && len(ids) < limit; shard++ {
		p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
			TableName:              &s.state,
			IndexName:              aws.String(topology.DeadlineIndex),
			KeyConditionExpression: aws.String("DueShard = :shard AND DueAt <= :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":shard": str(strconv.Itoa(shard)), ":now": num(ms(now)),
			},
			Limit: aws.Int32(int32(min(limit, 500))),
		})
		for p.HasMorePages() && len(ids) < limit {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("query overdue shard %d: %w", shard, err)
			}
			for _, item := range page.Items {
				if id, ok := item[topology.KeyOrderID].(*types.AttributeValueMemberS); ok && len(ids) < limit {
					ids = append(ids, id.Value)
				}
			}
		}
	}
	items, err := s.items(ctx, ids, true)
	if err != nil {
		return nil, fmt.Errorf("read overdue orders: %w", err)
	}
	var out []Step
	var errs []error
	for _, id := range ids {
		it, ok := items[id]
		if !ok || it.DueAt == 0 || it.DueAt > ms(now) {
			continue // moved on since the index was read
		}
		var due []Step
		for _, st := range it.steps() {
			if !st.DueAt.IsZero() && !st.DueAt.After(now) {
				due = append(due, st)
			}
		}
		if len(due) == 0 {
			if err := s.moveOn(ctx, it, now); err != nil {
				errs = append(errs, err)
			}
		}
		out = append(out, due...)
	}
	return out, errors.Join(errs...)
}

// moveOn moves an order found due early on in the deadline index, to its
// earliest record deadline, or out of the index if no record has one. Lost to
// another write, it changes nothing: the order stays due and is read again.
func (s *Store) moveOn(ctx context.Context, it stateItem, now time.Time) error {
	ch := newChange(now)
	ch.cond = append(ch.cond, "Version = "+ch.val("version", num(int64(it.Version))))
	if next := it.nextDue(); next != 0 {
		ch.index(it.OrderID, s.shards, fromMs(next))
	} else {
		ch.remove = append(ch.remove, "DueShard", "DueAt")
	}
	if err := s.update(ctx, it.OrderID, ch, "move on "+it.OrderID); err != nil && !errors.Is(err, ErrStale) {
		return err
	}
	return nil
}
