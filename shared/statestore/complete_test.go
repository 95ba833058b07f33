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
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// A duplicate of the reply that ended an order is refused in one write, and
// a current reply that ends an order whose alert is unconfirmed takes two (the
// second keeps the order in the index): counted from the requests made. An
// end adds one write more: its count in its workflow's health.
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
			rec := outcome.Recorder{Store: s}
			record := func(st statestore.Step, refusal string) (outcome.Recorded, error) {
				return rec.Record(ctx, def, outcome.Attempt{OrderID: st.OrderID, Ref: st.Ref, Attempt: st.Attempt, Round: st.Round,
					Refusal: refusal, Read: st.Read, Now: now})
			}
			claimed := func(id string, r workflow.Ref) statestore.Step {
				st, err := claimOrder(ctx, s, id, r, "sched", now)
				require.NoError(t, err)
				return st
			}

			// runToEnd runs the three steps; the last completion's writes are counted.
			runToEnd := func(id string) (last statestore.Step, writes int64) {
				for i := range 3 {
					st := claimed(id, workflow.Ref{Index: i})
					before := updates()
					r, err := record(st, "")
					require.NoError(t, err)
					require.False(t, r.Stale)
					if i == 2 {
						require.Equal(t, workflow.Processed, r.State)
						return st, updates() - before
					}
					require.Equal(t, int64(1), updates()-before, "a completion that makes the next step ready: one write")
				}
				return statestore.Step{}, 0
			}

			// Processed, then the same reply again (as the Scheduler records a
			// reply of an Agent of an earlier version: no claim's answer).
			submit("o-dup")
			last, writes := runToEnd("o-dup")
			require.Equal(t, int64(2), writes, "the final reply: one write, and the end's count in its workflow's health")
			before := updates()
			last.Read = nil
			r, err := record(last, "")
			require.NoError(t, err)
			require.True(t, r.Stale)
			require.Zero(t, updates()-before, "a duplicate final reply: read, found stale, no write")

			// Refused at the first step, its alert not yet confirmed, resubmitted (the
			// record runs again, so no alert is owed for it) and run to the end: the
			// order leaves the index in one write.
			submit("o-again")
			_, err = record(claimed("o-again", workflow.Ref{}), "declined")
			require.NoError(t, err)
			_, err = s.Resubmit(ctx, "o-again", "", time.Minute, now)
			require.NoError(t, err)
			_, writes = runToEnd("o-again")
			require.Equal(t, int64(2), writes, "a resubmitted order's final reply: one write, and the end's count")
			n, err := s.CountInFlight(ctx)
			require.NoError(t, err)
			require.Zero(t, n, "both ended and left the index")

			// Failed with its alert unconfirmed, then the last undo's reply: one
			// write, which keeps the order in the index for its alert.
			submit("o-unalerted")
			_, err = record(claimed("o-unalerted", workflow.Ref{}), "")
			require.NoError(t, err)
			_, err = record(claimed("o-unalerted", workflow.Ref{Index: 1}), "declined")
			require.NoError(t, err)
			u := claimed("o-unalerted", workflow.Ref{Index: 0, Undo: true})
			before = updates()
			r, err = record(u, "")
			require.NoError(t, err)
			require.Equal(t, workflow.Failed, r.State)
			require.Equal(t, int64(2), updates()-before, "the last undo's reply: one write, and the end's count")
			due, err := storetest.Overdue(ctx, s, now.Add(2*time.Minute), 10)
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
