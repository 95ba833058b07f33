package supervisor_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/devkit/handlerbench"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// The Supervisor's own work per overdue record: read its queues' depths
// (none waiting), decide (recover or give up), build the write, encode the
// Agent's message. The orders are real (ten single-step orders, each
// claimed and overdue, read once from DynamoDB Local); the store then serves
// that page from memory and takes every write without a round trip, and the
// queues only encode.
type overdueStore struct{ page statestore.DuePage }

func (overdueStore) Shards() int { return 1 }
func (s overdueStore) DuePage(context.Context, statestore.DueQuery) (statestore.DuePage, error) {
	return s.page, nil
}
func (overdueStore) MoveOn(context.Context, statestore.Early, time.Time) error { return nil }

// Apply leaves the order as read, its records no longer due: the write is
// counted done.
func (overdueStore) Apply(_ context.Context, snap statestore.Snapshot, _ statestore.Write) (statestore.Snapshot, error) {
	return statestore.Snapshot{}, nil
}
func (overdueStore) MarkAlerted(context.Context, string, workflow.Ref, time.Time) error { return nil }
func (overdueStore) RecordsOf(context.Context, string, []workflow.Ref) ([]statestore.Step, error) {
	return nil, nil
}

type nopAlerter struct{}

func (nopAlerter) StepFailed(context.Context, alert.Failure) error { return nil }

// duePage stores n single-step orders on DynamoDB Local, each claimed an
// hour ago, and reads them back as the Supervisor's page, at now.
func duePage(b *testing.B, n int, now time.Time) statestore.DuePage {
	ctx := context.Background()
	db := engines["dynamodb-local"].Clients.DynamoDB
	topo := topology.Default(fmt.Sprintf("bench%d", time.Now().UnixNano()%1e6), "payment")
	topo.DeadlineShards = 1
	require.NoError(b, provision.EnsureTables(ctx, db, topo))
	store := statestore.New(db, topo.OrdersTable(), topo.StateTable(), 1)
	def := workflow.Single(workflow.Settings{})
	for i := range n {
		id := fmt.Sprintf("o-%d", i)
		_, err := store.Submit(ctx, statestore.Submission{OrderID: id, Order: "{}", Workflow: def, Now: now.Add(-time.Hour)})
		require.NoError(b, err)
		_, err = store.Claim(ctx, statestore.Claim{OrderID: id, Ref: workflow.Ref{}, Agent: "payment", Owner: "a", Now: now.Add(-time.Hour)})
		require.NoError(b, err)
	}
	page, err := store.DuePage(ctx, statestore.DueQuery{AsOf: now, Now: now, Limit: statestore.MaxDuePage})
	require.NoError(b, err)
	require.Len(b, page.Due, n)
	return page
}

func BenchmarkSupervisorPerOverdueRecord(b *testing.B) {
	now := time.Now()
	page := duePage(b, 10, now)
	m := metrics.New(io.Discard, "supervisor")
	log := slog.New(slog.DiscardHandler)
	s := supervisor.New(supervisor.Config{SchedulerQueueURL: "q", PickupTimeout: time.Minute,
		AgentQueues: map[string]supervisor.AgentQueues{"payment": {Requests: "req", Responses: "resp"}}},
		supervisor.Deps{Store: overdueStore{page}, Queues: handlerbench.EncodeOnly{}, Alerts: nopAlerter{},
			Notify: notify.New(handlerbench.EncodeOnly{}, nil, m, log), Metrics: m, Log: log})
	s.Now = func() time.Time { return now }
	b.ReportAllocs()
	for b.Loop() {
		rep, err := s.Sweep(context.Background())
		if err != nil || rep.Recovered != len(page.Due) {
			b.Fatalf("sweep: %v %+v", err, rep)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(page.Due)), "ns/record")
}
