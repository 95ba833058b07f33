package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The actors' writes, as the product makes them: an Agent's outcome
// (outcome.Recorder, the workflow's rules, the store's one conditional
// write), the Supervisor's decisions on what it read, a cancel.

// complete records attempt's success on record r of order id, as its Agent
// does (the workflow read back from the store); a stale one is ErrStale.
func complete(ctx context.Context, s *statestore.Store, id string, r workflow.Ref, attempt int, now time.Time) (outcome.Recorded, error) {
	return recordAttempt(ctx, s, outcome.Attempt{OrderID: id, Ref: r, Attempt: attempt, Round: 1, Now: now})
}

// refuse records attempt's refusal (reason) of record r of order id.
func refuse(ctx context.Context, s *statestore.Store, id string, r workflow.Ref, attempt int, reason string, now time.Time) (outcome.Recorded, error) {
	return recordAttempt(ctx, s, outcome.Attempt{OrderID: id, Ref: r, Attempt: attempt, Round: 1, Refusal: reason, Now: now})
}

func recordAttempt(ctx context.Context, s *statestore.Store, a outcome.Attempt) (outcome.Recorded, error) {
	d, err := s.Definition(ctx, a.OrderID)
	if err != nil {
		return outcome.Recorded{}, err
	}
	rec, err := outcome.Recorder{Store: s}.Record(ctx, d, a)
	if err == nil && rec.Stale {
		err = statestore.ErrStale
	}
	return rec, err
}

// run claims and completes r of order id, at now.
func run(t *testing.T, s *statestore.Store, id string, r workflow.Ref, now time.Time) outcome.Recorded {
	t.Helper()
	st, err := claim(context.Background(), s, id, r, "sched", now)
	require.NoError(t, err)
	rec, err := complete(context.Background(), s, id, r, st.Attempt, now)
	require.NoError(t, err)
	return rec
}

// giveUp is the Supervisor failing read for good (cause, its failure count
// from now on), on the order as read: a *Conflict if it changed.
func giveUp(ctx context.Context, s *statestore.Store, read statestore.Step, count int, cause workflow.Cause, reason string, due, now time.Time) (workflow.Move, error) {
	m := read.Read.Order().Fail(read.Ref, cause, read.State == workflow.Processing || read.Ran, now)
	_, err := s.Apply(ctx, *read.Read, statestore.Write{Move: m, Due: due, Now: now,
		Looks: []statestore.Look{{Ref: read.Ref, FailureCount: count, Reason: reason}}})
	return m, err
}

// giveBack is the Supervisor giving read's overdue attempt back, ready
// again at readyAt and due at due.
func giveBack(ctx context.Context, s *statestore.Store, read statestore.Step, count int, reason string, readyAt, due, now time.Time) error {
	_, err := s.Apply(ctx, *read.Read, statestore.Write{Move: read.Read.Order().GiveBack(read.Ref, true), Now: now,
		Looks: []statestore.Look{{Ref: read.Ref, FailureCount: count, Reason: reason, ReadyAt: readyAt, Due: due}}})
	return err
}

// waited is the Supervisor finding read waiting (resent: its message sent
// again; woken: a parked record whose time came), due again at due.
func waited(ctx context.Context, s *statestore.Store, read statestore.Step, resent, woken bool, due, now time.Time) error {
	_, err := s.Apply(ctx, *read.Read, statestore.Write{Move: workflow.Move{Read: workflow.Read{Version: true}}, Now: now,
		Looks: []statestore.Look{{Ref: read.Ref, Waited: true, Resent: resent, Woken: woken, Due: due}}})
	return err
}

// cancel cancels an order as the one cancel does (outcome.Canceller),
// starting nothing.
func cancel(ctx context.Context, s *statestore.Store, c statestore.CancelRequest) (statestore.Cancellation, error) {
	return outcome.Canceller{Store: s}.Cancel(ctx, c)
}

// isConflict reports whether err is a *statestore.Conflict.
func isConflict(err error) bool {
	var c *statestore.Conflict
	return errors.As(err, &c)
}

// completeParked completes the wait or timer f fences (or, with a token, an
// attempt) as the Scheduler or an event does, in one write decided on the
// order as read: ErrStale if the fence does not hold.
func completeParked(ctx context.Context, s *statestore.Store, id string, f statestore.Fence, resultBytes int, now time.Time) (workflow.State, error) {
	d, err := s.Definition(ctx, id)
	if err != nil {
		return "", err
	}
	snap, err := s.Read(ctx, id)
	if err != nil {
		return "", err
	}
	if !f.Holds(snap, now) {
		return "", statestore.ErrStale
	}
	after, err := s.Apply(ctx, snap, statestore.Write{Move: d.Complete(snap.Order(), f.Ref, now), Fence: &f, ResultBytes: resultBytes,
		Due: now.Add(d.PickupTimeout), Now: now})
	return after.Task().State, err
}

func isCCF(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}
