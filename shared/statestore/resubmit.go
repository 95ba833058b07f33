package statestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// NotResubmittableError says why an order cannot be resubmitted.
type NotResubmittableError struct{ Reason string }

// Error says why.
func (e *NotResubmittableError) Error() string { return e.Reason }

// IsNotResubmittable reports whether err is a *NotResubmittableError.
func IsNotResubmittable(err error) bool {
	var e *NotResubmittableError
	return errors.As(err, &e)
}

// Resubmission is what a resubmission made ready.
type Resubmission struct {
	Ref       workflow.Ref   // the record the Scheduler must be told about
	Ready     []workflow.Ref // every record made ready (Ref among them): several, for a new round of parallel steps
	Step      string         // its name
	Round     int            // the task's round from now on
	Workflow  string         // the order's workflow, and its version
	WfVersion string
}

// Resubmit puts a task that ended badly back to work after the operator fixed
// the cause, and returns the record made ready:
//   - a Failed task (its completed steps were undone) runs again from its first
//     step in a new round: every record back to Pending with FailureCount 0, and
//     new idempotency keys, since the earlier effects were undone;
//   - a CompensationFailed task retries its failed undo action, FailureCount 0,
//     and compensation goes on from there;
//   - a CompensationFailed task whose pivot step (no undo action) timed out for
//     good runs that step again in the same round, with the same idempotency
//     key: if the effect happened, the remote answers as before.
//
// step, if not empty, must name the record in Error. Attempt numbers keep
// counting, so a late reply of an earlier attempt stays fenced off. It is one
// write, conditional on the order being as read. An order that ended a moment
// ago still takes the Supervisor's bookkeeping writes (its alert confirmed, its
// index entry removed): if one lands between the read and the write, the order
// is read and checked again, up to resubmitTries times.
func (s *Store) Resubmit(ctx context.Context, orderID, step string, pickup time.Duration, now time.Time) (Resubmission, error) {
	for range resubmitTries {
		res, err := s.resubmit(ctx, orderID, step, pickup, now)
		if !errors.Is(err, ErrStale) {
			return res, err
		}
	}
	return Resubmission{}, &NotResubmittableError{fmt.Sprintf("order %s changed each of the %d times it was read to be resubmitted; look again", orderID, resubmitTries)}
}

// resubmitTries bounds Resubmit's read-check-write rounds.
const resubmitTries = 5

// resubmit is one round of Resubmit: ErrStale if the order changed after it
// was read.
func (s *Store) resubmit(ctx context.Context, orderID, step string, pickup time.Duration, now time.Time) (Resubmission, error) {
	it, err := s.item(ctx, orderID)
	if err != nil {
		return Resubmission{}, err
	}
	task := it.task()
	failed := failedRecord(it, task.State)
	if err := resubmittable(it, task.State, failed, step); err != nil {
		return Resubmission{}, err
	}
	read := it.Version
	ready := []string{failed}
	res := Resubmission{Ref: it.step(failed).Ref(), Step: it.Recs[failed].Name, Round: task.Round,
		Workflow: it.Workflow, WfVersion: it.WfVersion}
	it.State = string(workflow.Compensating)
	if !refOf(failed).Undo {
		it.State = string(workflow.Pending) // the pivot step runs again
	}
	res.Ready = []workflow.Ref{res.Ref}
	if task.State == workflow.Failed {
		res.Round++
		first := sortKey(workflow.Ref{}) // a new round starts at the first step
		res.Ref, res.Step, ready = workflow.Ref{}, it.Recs[first].Name, slices.Collect(maps.Keys(it.Recs))
		res.Ready = []workflow.Ref{res.Ref}
		if it.Parallel { // ... or at every record that starts with the order
			res.Ready = it.starts()
			res.Ref, res.Step = res.Ready[0], it.Recs[sortKey(res.Ready[0])].Name
			if it.ItemsDone != nil {
				it.ItemsDone = map[string]int{}
			}
		}
		it.State = string(workflow.Pending)
	}
	due := ms(now.Add(it.pickup(pickup)))
	it.reset(ready, res, due, now)
	// In the index by the earlier of the pickup deadline and the step's
	// timeout, as Submit puts a new order.
	it.DueShard, it.DueAt = shardOf(orderID, s.shards), min(due, ms(now)+it.Recs[sortKey(res.Ref)].TimeoutMs)
	if err := s.keepOrder(ctx, orderID, now.Add(2*time.Duration(it.DeadlineMs)*time.Millisecond)); err != nil {
		return res, err
	}
	if err := s.replace(ctx, it, read); errors.Is(err, ErrStale) {
		return res, err
	} else if err != nil {
		return res, fmt.Errorf("resubmit %s: %w", orderID, err)
	}
	return res, nil
}

// failedRecord is the sort key of the record to run again: in a Failed task
// the step that failed; in a CompensationFailed one, the undo, or if no undo
// failed, the pivot step ("" if none is in Error).
func failedRecord(it stateItem, state workflow.State) string {
	var failed string
	for _, r := range it.steps() {
		if r.State != workflow.Error || (r.Undo && state != workflow.CompensationFailed) {
			continue
		}
		if failed == "" || r.Undo {
			failed = sortKey(r.Ref())
		}
	}
	return failed
}

// resubmittable says why an order cannot be resubmitted (at step, if
// named), or nil.
func resubmittable(it stateItem, state workflow.State, failed, step string) error {
	switch {
	case state != workflow.Failed && state != workflow.CompensationFailed:
		return &NotResubmittableError{fmt.Sprintf("order %s is %s; only Failed or CompensationFailed orders can be resubmitted", it.OrderID, state)}
	case failed == "":
		return &NotResubmittableError{fmt.Sprintf("order %s is %s but no step is in Error", it.OrderID, state)}
	case step != "" && step != it.Recs[failed].Name:
		return &NotResubmittableError{fmt.Sprintf("order %s: step %q is not the one that failed (%s)", it.OrderID, step, it.Recs[failed].Name)}
	case it.Parallel && state == workflow.CompensationFailed && !refOf(failed).Undo:
		return &NotResubmittableError{fmt.Sprintf("order %s: a step that took effect has no undo, and its steps run at once: "+
			"settle it with its services by hand (sasctl status %s says what completed)", it.OrderID, it.OrderID)}
	}
	return nil
}

// starts are the records of an order whose steps run at once that are ready
// when a round starts.
func (it stateItem) starts() []workflow.Ref {
	var out []workflow.Ref
	for sk, r := range it.Recs {
		if r.Starts {
			out = append(out, refOf(sk))
		}
	}
	slices.SortFunc(out, func(a, b workflow.Ref) int { return cmp.Or(a.Index-b.Index, a.Item-b.Item) })
	return out
}

// reset puts the ready records back to Pending for res's round (the one to
// run first due by due) and the task at work again, with a new deadline.
func (it *stateItem) reset(ready []string, res Resubmission, due int64, now time.Time) {
	for _, sk := range ready {
		r := it.Recs[sk]
		r.State, r.FailureCount, r.Round = string(workflow.Pending), 0, res.Round
		r.LockedBy, r.CompleteBy, r.LastError, r.Alerted, r.DueAt = "", 0, "", false, 0
		r.ReadyAt, r.ClaimedAt, r.DoneAt, r.Cause = 0, 0, 0, ""
		r.Armed, r.Woken, r.Token, r.Result = 0, 0, "", 0
		if slices.Contains(res.Ready, refOf(sk)) {
			r.DueAt, r.ReadyAt = due, ms(now)
		}
		r.Incidents = append(r.Incidents, incident(now, "resubmitted by the operator (round %d)", res.Round))
		it.Recs[sk] = r
	}
	if res.Round != it.Round && it.Events != nil {
		it.Events = map[string]string{} // a new round waits for its own events
	}
	it.Round, it.Version, it.UpdatedAt, it.CompletedAt, it.LastError = res.Round, it.Version+1, ms(now), 0, ""
	it.Expires = 0 // at work again: kept until it ends again
	it.Unalerted = slices.DeleteFunc(it.Unalerted, func(sk string) bool { return it.Recs[sk].State != string(workflow.Error) })
	if len(it.Unalerted) == 0 {
		it.Unalerted = nil // absent, not an empty (NULL) attribute: an ending completion checks attribute_not_exists
	}
	it.DeadlineAt = ms(now) + it.DeadlineMs // at work again (forward or compensating): a new deadline
}

// replace writes the whole state item, on the condition that it is still at
// Version read; ErrStale if not.
func (s *Store) replace(ctx context.Context, it stateItem, read int) error {
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return fmt.Errorf("encode state of %s: %w", it.OrderID, err)
	}
	if it.Events != nil && len(it.Events) == 0 {
		av["Evt"] = emptyMap()
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.state, Item: av,
		ConditionExpression:       aws.String("V = :version"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":version": num(int64(read))},
	})
	if isConditionFailed(err) {
		return ErrStale
	}
	return err
}

// keepOrder pushes out when a resubmitted order may expire (with a
// retention): its orders item and its kept results (which the new round's
// steps may read) expire at end, the latest its new round can end, plus the
// retention. It is written before the state item, so that an order at work
// again never loses them (if the state write then fails, they are only kept
// longer).
func (s *Store) keepOrder(ctx context.Context, orderID string, end time.Time) error {
	if s.keep == 0 {
		return nil
	}
	exp := map[string]types.AttributeValue{":exp": s.expires(end)}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.orders, Key: map[string]types.AttributeValue{topology.KeyOrderID: str(orderID)},
		UpdateExpression:          aws.String("SET " + ExpiresAttribute + " = :exp"),
		ConditionExpression:       aws.String("attribute_exists(OrderID)"),
		ExpressionAttributeValues: exp,
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("keep the order %s: %w", orderID, err)
	}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{TableName: &s.state, ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("#id = :id AND begins_with(#sk, :r)"),
		ProjectionExpression:      aws.String("#id, #sk"),
		ExpressionAttributeNames:  map[string]string{"#id": topology.KeyOrderID, "#sk": topology.KeySort},
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(orderID), ":r": str(resultPrefix)}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("read the results of %s: %w", orderID, err)
		}
		for _, key := range page.Items {
			_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.state, Key: key,
				UpdateExpression:          aws.String("SET " + ExpiresAttribute + " = :exp"),
				ConditionExpression:       aws.String("attribute_exists(#sk)"),
				ExpressionAttributeNames:  map[string]string{"#sk": topology.KeySort},
				ExpressionAttributeValues: exp})
			if err != nil && !isConditionFailed(err) {
				return fmt.Errorf("keep a result of %s: %w", orderID, err)
			}
		}
	}
	return nil
}
