package supervisor_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/devkit/handlerbench"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/workflow"
)

// The Supervisor's own work per overdue record: read its response queue's
// depth (none waiting), decide (recover or give up), encode the Scheduler's
// message. The store's one shard returns a page of ten overdue steps and
// accepts every write; the queue only encodes.
type overdueStore struct{ due []statestore.Step }

func (overdueStore) Shards() int { return 1 }
func (s overdueStore) DuePage(context.Context, statestore.DueQuery) (statestore.DuePage, error) {
	return statestore.DuePage{Orders: len(s.due), Steps: s.due}, nil
}
func (overdueStore) MoveOn(context.Context, statestore.Early, time.Time) error { return nil }
func (overdueStore) Waited(context.Context, statestore.Wait) error             { return nil }
func (overdueStore) Requeue(context.Context, statestore.Retry) error           { return nil }
func (overdueStore) GiveUpFor(context.Context, statestore.GiveUp) (statestore.Done, error) {
	return statestore.Done{}, nil
}
func (overdueStore) MarkAlerted(context.Context, string, workflow.Ref, time.Time) error { return nil }
func (overdueStore) RecordsOf(context.Context, string, []workflow.Ref) ([]statestore.Step, error) {
	return nil, nil
}

type nopAlerter struct{}

func (nopAlerter) StepFailed(context.Context, alert.Failure) error { return nil }

func BenchmarkSupervisorPerOverdueRecord(b *testing.B) {
	now := time.Now()
	var due []statestore.Step
	for i := range 10 {
		due = append(due, statestore.Step{OrderID: fmt.Sprintf("o-%d", i), Index: 1, Name: "charge-payment", Agent: "payment",
			State: workflow.Processing, Attempt: 1, LockedBy: "sched", CompleteBy: now.Add(-time.Second), Timeout: 20 * time.Second,
			MaxFailures: 3, RetryBackoff: 5 * time.Second, Version: 3, Round: 1, DueAt: now.Add(-time.Second)})
	}
	m := metrics.New(io.Discard, "supervisor")
	log := slog.New(slog.DiscardHandler)
	s := supervisor.New(supervisor.Config{SchedulerQueueURL: "q", PickupTimeout: time.Minute,
		AgentQueues: map[string]supervisor.AgentQueues{"payment": {Requests: "req", Responses: "resp"}}},
		supervisor.Deps{Store: overdueStore{due}, Queues: handlerbench.EncodeOnly{}, Alerts: nopAlerter{},
			Notify: notify.New(handlerbench.EncodeOnly{}, nil, m, log), Metrics: m, Log: log})
	b.ReportAllocs()
	for b.Loop() {
		rep, err := s.Sweep(context.Background())
		if err != nil || rep.Recovered != len(due) {
			b.Fatalf("sweep: %v %+v", err, rep)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(due)), "ns/record")
}
