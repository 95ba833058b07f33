package statestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// A duplicate of the reply that ended an order is refused in one write, and
// a current reply that ends an order whose alert is unconfirmed takes two (the
// second keeps the order in the index): counted from the requests made.
func TestEndingCompletionWrites(t *testing.T) {
	for name, c := range engines {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			meter := accounting.New()
			metered, err := awsclient.Load(ctx, awsclient.Options{Endpoint: c.DynamoDBEndpoint,
				Emulated: true, APIOptions: []func(*middleware.Stack) error{meter.AddTo}})
			require.NoError(t, err)
			s := storetest.NewStore(t, metered.DynamoDB)
			def := workflow.Orders(workflow.Settings{})
			now := time.Now()
			submit := func(id string) {
				_, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: "{}", Workflow: def, Now: now})
				require.NoError(t, err)
			}
			updates := func() int64 {
				var n int64
				for k, u := range meter.Snapshot() {
					if k.Operation == "UpdateItem" {
						n += u.Requests
					}
				}
				return n
			}
			end := func(id string, r workflow.Ref, attempt, round int, state workflow.State) error {
				return errOf(s.Complete(ctx, statestore.Completion{OrderID: id, Ref: r, Attempt: attempt, Round: round, End: state, Now: now}))
			}

			// runToEnd runs the three steps; the last completion's writes are counted.
			runToEnd := func(id string) (lastAttempt int, writes int64) {
				for i := range 3 {
					r := workflow.Ref{Index: i}
					st, err := claimOrder(ctx, s, id, r, "sched", now)
					require.NoError(t, err)
					if i < 2 {
						next := workflow.Ref{Index: i + 1}
						require.NoError(t, errOf(s.Complete(ctx, statestore.Completion{OrderID: id, Ref: r, Attempt: st.Attempt,
							Round: st.Round, Next: &next, NextDueAt: now, Now: now})))
						continue
					}
					before := updates()
					require.NoError(t, end(id, r, st.Attempt, st.Round, workflow.Processed))
					return st.Attempt, updates() - before
				}
				return 0, 0
			}

			// Processed, then the same reply again.
			submit("o-dup")
			attempt, writes := runToEnd("o-dup")
			require.Equal(t, int64(1), writes, "the final reply: one write")
			before := updates()
			require.ErrorIs(t, end("o-dup", workflow.Ref{Index: 2}, attempt, 1, workflow.Processed), statestore.ErrStale)
			require.Equal(t, int64(1), updates()-before, "a duplicate final reply: one refused write")

			// Refused at the first step, its alert not yet confirmed, resubmitted (the
			// record runs again, so no alert is owed for it) and run to the end: the
			// order leaves the index in one write.
			submit("o-again")
			st, err := claimOrder(ctx, s, "o-again", workflow.Ref{}, "sched", now)
			require.NoError(t, err)
			require.NoError(t, errOf(s.Fail(ctx, statestore.Failure{OrderID: "o-again", Ref: workflow.Ref{},
				After: workflow.AfterRefusal(false, -1), Reason: "declined", Due: now, Now: now}, st.Attempt, 1)))
			_, err = s.Resubmit(ctx, "o-again", "", time.Minute, now)
			require.NoError(t, err)
			_, writes = runToEnd("o-again")
			require.Equal(t, int64(1), writes, "a resubmitted order's final reply: one write")

			// Failed with its alert unconfirmed, then the last undo's reply.
			submit("o-unalerted")
			st, err = claimOrder(ctx, s, "o-unalerted", workflow.Ref{}, "sched", now)
			require.NoError(t, err)
			next := workflow.Ref{Index: 1}
			require.NoError(t, errOf(s.Complete(ctx, statestore.Completion{OrderID: "o-unalerted", Ref: workflow.Ref{},
				Attempt: st.Attempt, Next: &next, NextDueAt: now, Now: now})))
			st, err = claimOrder(ctx, s, "o-unalerted", next, "sched", now)
			require.NoError(t, err)
			require.NoError(t, errOf(s.Fail(ctx, statestore.Failure{OrderID: "o-unalerted", Ref: next,
				After: workflow.AfterRefusal(false, 0), Reason: "declined", Due: now, Now: now}, st.Attempt, 1)))
			undo := workflow.Ref{Index: 0, Undo: true}
			u, err := claimOrder(ctx, s, "o-unalerted", undo, "sched", now)
			require.NoError(t, err)
			before = updates()
			require.NoError(t, end("o-unalerted", undo, u.Attempt, 1, workflow.Failed))
			require.Equal(t, int64(2), updates()-before, "refused while the alert is due, then written keeping the index entry")
			due, err := s.Overdue(ctx, now.Add(time.Second), 10)
			require.NoError(t, err)
			require.Equal(t, []string{"o-unalerted"}, orderIDs(due), "still due for its alert")
		})
	}
}

func orderIDs(steps []statestore.Step) []string {
	var out []string
	for _, st := range steps {
		out = append(out, st.OrderID)
	}
	return out
}

// claimOrder claims record r of an order of the default order workflow as
// the record's own agent would.
func claimOrder(ctx context.Context, s *statestore.Store, orderID string, r workflow.Ref, owner string, now time.Time) (statestore.Step, error) {
	a, _ := workflow.Orders(workflow.Settings{}).Action(r)
	return s.Claim(ctx, statestore.Claim{OrderID: orderID, Ref: r, Agent: a.Agent, Owner: owner, Now: now})
}

// errOf is the error of a write that also says the task's state.
func errOf(_ workflow.State, err error) error { return err }
