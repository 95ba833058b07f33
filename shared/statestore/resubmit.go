package statestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	x "github.com/sas-go/sas/shared/dynamoexpr"
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
// the cause, and returns the records made ready:
//   - a Failed task (its completed steps were undone) runs again from the
//     steps that need nothing, in a new round: every record back to Pending
//     with FailureCount 0, and new idempotency keys, since the earlier
//     effects were undone;
//   - a CompensationFailed task whose undo action failed retries it,
//     FailureCount 0, and the undoing goes on from there;
//   - a CompensationFailed task stopped at a step without undo that took
//     effect (a pivot), with nothing undone yet, goes on forward in the
//     same round: its failed steps run again with the same idempotency keys
//     (if an effect happened, the service answers as before), and the steps
//     that were ready when it stopped are ready again. With something
//     already undone, its services are settled by hand: it is refused.
//
// step, if not empty, must name a record in Error. Attempt numbers keep
// counting, so a late reply of an earlier attempt stays fenced off. It is one
// write, conditional on the order being as read. An order that ended a moment
// ago still takes the Supervisor's bookkeeping writes (its alert confirmed, its
// index entry removed): if one lands between the read and the write, the order
// is read and checked again, up to resubmitTries times.
func (s *Store) Resubmit(ctx context.Context, orderID, step string, pickup time.Duration, now time.Time) (Resubmission, error) {
	return s.ResubmitBy(ctx, orderID, step, "", pickup, now)
}

// ResubmitBy is Resubmit for by, whom the records' histories name ("": the
// operator).
func (s *Store) ResubmitBy(ctx context.Context, orderID, step, by string, pickup time.Duration, now time.Time) (Resubmission, error) {
	for range resubmitTries {
		res, err := s.resubmit(ctx, orderID, step, by, pickup, now)
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
func (s *Store) resubmit(ctx context.Context, orderID, step, by string, pickup time.Duration, now time.Time) (Resubmission, error) {
	it, err := s.item(ctx, orderID)
	if err != nil {
		return Resubmission{}, err
	}
	read := it.Version
	res, reset, err := it.rerun(step)
	if err != nil {
		return res, err
	}
	due := ms(now.Add(it.pickup(pickup)))
	it.reset(reset, res, due, by, now)
	// In the index by the earlier of the pickup deadline and the first
	// record's timeout, as Submit puts a new order.
	it.DueShard, it.DueAt = it.shard(s.shards), min(due, ms(now)+it.Recs[sortKey(res.Ref)].TimeoutMs)
	if err := s.keepOrder(ctx, orderID, now.Add(it.lifetime()), it); err != nil {
		return res, err
	}
	if err := s.replace(ctx, it, read); errors.Is(err, ErrStale) {
		return res, err
	} else if err != nil {
		return res, fmt.Errorf("resubmit %s: %w", orderID, err)
	}
	return res, nil
}

// rerun is what resubmitting the order puts back to work (at step, if
// named): the records made ready, and every record reset (for a new round,
// all of them).
func (it stateItem) rerun(step string) (Resubmission, []string, error) {
	state := workflow.State(it.State)
	res := Resubmission{Round: it.Round, Workflow: it.Workflow, WfVersion: it.WfVersion}
	var failed []string // the records in Error, steps first
	for _, r := range it.steps() {
		if r.State == workflow.Error {
			failed = append(failed, sortKey(r.Ref))
		}
	}
	switch {
	case state != workflow.Failed && state != workflow.CompensationFailed:
		return res, nil, &NotResubmittableError{fmt.Sprintf("order %s is %s; only Failed or CompensationFailed orders can be resubmitted", it.OrderID, state)}
	case len(failed) == 0:
		return res, nil, &NotResubmittableError{fmt.Sprintf("order %s is %s but no step is in Error", it.OrderID, state)}
	case step != "" && !slices.ContainsFunc(failed, func(sk string) bool { return it.Recs[sk].Name == step }):
		return res, nil, &NotResubmittableError{fmt.Sprintf("order %s: step %q is not one that failed (%s)", it.OrderID, step, it.names(failed))}
	}
	var reset []string
	switch undo := failed[len(failed)-1]; {
	case state == workflow.Failed:
		res.Round++
		res.Ready, reset = it.starts(), slices.Collect(maps.Keys(it.Recs))
	case refOf(undo).Undo: // the undo action that failed runs again
		res.Ready, reset = []workflow.Ref{refOf(undo)}, []string{undo}
	case it.undid():
		return res, nil, &NotResubmittableError{fmt.Sprintf("order %s stopped at a step that took effect and has no undo, with work "+
			"already undone: settle it with its services by hand (sasctl status %s says what completed)", it.OrderID, it.OrderID)}
	default: // stopped at a pivot: the order goes on
		for _, sk := range failed {
			res.Ready, reset = append(res.Ready, refOf(sk)), append(reset, sk)
		}
		for _, st := range it.steps() {
			if st.Stopped {
				res.Ready, reset = append(res.Ready, st.Ref), append(reset, sortKey(st.Ref))
			}
		}
	}
	res.Ref = res.Ready[0]
	res.Step = it.Recs[sortKey(res.Ref)].Name
	return res, reset, nil
}

// undid reports whether an undo action of the round has run.
func (it stateItem) undid() bool {
	for sk, r := range it.Recs {
		if refOf(sk).Undo && r.State == string(workflow.Processed) && r.Round == it.Round {
			return true
		}
	}
	return false
}

// names are the records' names, for a reason.
func (it stateItem) names(sks []string) string {
	out := make([]string, len(sks))
	for i, sk := range sks {
		out[i] = workflow.RecordName(it.Recs[sk].Name, refOf(sk))
	}
	return strings.Join(out, ", ")
}

// starts are the records ready when a round starts: those of the steps
// that need nothing (for an order stored before they were marked, the first
// step).
func (it stateItem) starts() []workflow.Ref {
	var out []workflow.Ref
	for sk, r := range it.Recs {
		if r.Starts {
			out = append(out, refOf(sk))
		}
	}
	if len(out) == 0 {
		return []workflow.Ref{{}}
	}
	slices.SortFunc(out, func(a, b workflow.Ref) int { return cmp.Or(a.Index-b.Index, a.Item-b.Item) })
	return out
}

// reset puts the records back to Pending for res's round (those res makes
// ready due by due) and the task at work again, with a new deadline.
func (it *stateItem) reset(records []string, res Resubmission, due int64, by string, now time.Time) {
	newRound := res.Round != it.Round
	for _, sk := range records {
		r := it.Recs[sk]
		r.State, r.FailureCount, r.Round = string(workflow.Pending), 0, res.Round
		r.LockedBy, r.CompleteBy, r.LastError, r.Alerted, r.DueAt = "", 0, "", false, 0
		r.ReadyAt, r.DoneAt, r.Cause, r.After = 0, 0, "", ""
		r.Armed, r.Woken, r.Token, r.Result = 0, 0, "", 0
		if newRound {
			r.ClaimedAt, r.MayHaveRun = 0, false // nothing of the new round ran yet; in the same round, a claim says it may have taken effect
		}
		if slices.Contains(res.Ready, refOf(sk)) {
			r.DueAt, r.ReadyAt = due, ms(now)
		}
		r.Incidents = append(r.Incidents, incident(now, "resubmitted by %s (round %d)", cmp.Or(by, "the operator"), res.Round))
		it.Recs[sk] = r
	}
	if newRound {
		if it.Events != nil {
			it.Events = map[string]string{} // a new round waits for its own events
		}
		for k := range it.ItemsDone {
			it.ItemsDone[k] = 0
		}
		zero := 0
		it.Finished = &zero
	}
	if !res.Ref.Undo {
		// It runs forward again: a cancel asked before is not carried on
		// (an undo run again keeps it: its undoing still ends as asked).
		it.CxBy, it.CxAt, it.CxWhy, it.EndAs = "", 0, "", ""
	}
	it.State = string(workflow.Pending)
	if res.Ref.Undo {
		it.State = string(workflow.Compensating)
	}
	it.Round, it.Version, it.UpdatedAt, it.CompletedAt, it.LastError = res.Round, it.Version+1, ms(now), 0, ""
	it.EndShard = "" // out of the end index: not ended
	it.Expires = 0   // at work again: kept until it ends again
	it.Unalerted = slices.DeleteFunc(it.Unalerted, func(sk string) bool { return it.Recs[sk].State != string(workflow.Error) })
	if len(it.Unalerted) == 0 {
		it.Unalerted = nil // absent, not an empty (NULL) attribute
	}
	it.DeadlineAt = ms(now) + it.DeadlineMs // at work again (forward or compensating): a new deadline
}

// replace writes the whole state item, on the condition that it is still at
// Version read; ErrStale if not.
func (s *Store) replace(ctx context.Context, it stateItem, read int) error {
	put, id, err := s.putAsRead(it, read)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: put.TableName, Item: put.Item,
		ConditionExpression: put.ConditionExpression, ExpressionAttributeValues: put.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if ownWrite(ccf.Item, id) {
			return nil // an earlier try of this write was applied, its answer lost
		}
		return ErrStale
	}
	return err
}

// putAsRead is the put of the whole state item it, with a write id of its
// own (returned, to tell its own outcome from another's), on the condition
// that the item is still at Version read.
func (s *Store) putAsRead(it stateItem, read int) (types.Put, string, error) {
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return types.Put{}, "", fmt.Errorf("encode state of %s: %w", it.OrderID, err)
	}
	if it.Events != nil && len(it.Events) == 0 {
		av["Evt"] = emptyMap()
	}
	id := writeID()
	av[WriteIDAttribute] = str(id)
	b := x.New()
	asRead, err := condition(b, x.Equal(b.Plain("V"), b.Int(int64(read))))
	if err != nil {
		return types.Put{}, "", err
	}
	return types.Put{TableName: &s.state, Item: av, ConditionExpression: &asRead.Condition,
		ExpressionAttributeValues: asRead.Values, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}, id, nil
}

// Keep pushes out, before a decision puts the order of snap to work again
// (an operator's on a held order), when what it keeps may expire: its
// orders item and its results, past the latest end it can now reach (its
// Lifetime from now) plus its retention, as a resubmission does. A hold
// stops the order's deadline, not the time its items have to live.
func (s *Store) Keep(ctx context.Context, snap Snapshot, now time.Time) error {
	return s.keepOrder(ctx, snap.it.OrderID, now.Add(snap.it.lifetime()), snap.it)
}

// keepOrder pushes out when the order of it, at work again, may expire
// (by s.pushOut): its orders item and its kept results (which its steps
// may read) expire at end, the latest it can now end, plus its retention,
// if that is later than they would. It is
// written before the state item, so that an order at work again never
// loses them (if the state write then fails, they are only kept longer).
func (s *Store) keepOrder(ctx context.Context, orderID string, end time.Time, it stateItem) error {
	keep, existing := s.pushOut(it)
	if keep == 0 {
		return nil
	}
	exp := expires(end, keep)
	b := x.New()
	later(b, b.Plain(topology.KeyOrderID), exp, existing)
	in, err := b.UpdateInput(s.orders, map[string]types.AttributeValue{topology.KeyOrderID: str(orderID)})
	if err == nil {
		_, err = s.db.UpdateItem(ctx, in)
	}
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("keep the order %s: %w", orderID, err)
	}
	b = x.New()
	results, err := condition(b, x.Equal(b.Plain(topology.KeyOrderID), b.String(orderID)),
		x.BeginsWith(b.Plain(topology.KeySort), b.String(resultPrefix)))
	if err != nil {
		return err
	}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{TableName: &s.state, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: &results.Condition, ExpressionAttributeValues: results.Values,
		ProjectionExpression: aws.String(topology.KeyOrderID + "," + topology.KeySort)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("read the results of %s: %w", orderID, err)
		}
		for _, key := range page.Items {
			b := x.New()
			later(b, b.Plain(topology.KeySort), exp, existing)
			in, err := b.UpdateInput(s.state, key)
			if err == nil {
				_, err = s.db.UpdateItem(ctx, in)
			}
			if err != nil && !isConditionFailed(err) {
				return fmt.Errorf("keep a result of %s: %w", orderID, err)
			}
		}
	}
	return nil
}

// later sets an item's expiry to exp, only ever later (a writer whose clock
// runs behind another's, or whose order's lifetime is shorter than a
// result's, never pulls an expiry in), on an item that exists (its key
// attribute key); existing: only on one that expires already.
func later(b *x.Builder, key x.Path, exp types.AttributeValue, existing bool) {
	at := b.Plain(ExpiresAttribute)
	b.Set(at, b.Value(exp))
	sooner := x.Less(at, b.Value(exp))
	if existing {
		b.If(x.Exists(key), x.Exists(at), sooner)
		return
	}
	b.If(x.Exists(key), x.Or(x.NotExists(at), sooner))
}
