package localrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/scheduler"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/workflow"
)

// brokenAlerter fails every publish, as SNS would in an outage.
type brokenAlerter struct{ calls int }

func (b *brokenAlerter) StepFailed(context.Context, alert.Failure) error {
	b.calls++
	return errors.New("SNS unavailable")
}

func TestLostAlertIsSentByTheSupervisor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) { o.SupervisorEvery = time.Hour })
	ctx := context.Background()
	d, store := e.stack.Deployment, e.stack.Store
	wf := d.Config.Workflows.Default()
	now := time.Now()
	_, err := store.Submit(ctx, statestore.Submission{OrderID: "o-alert", Order: localrun.DemoOrder("o-alert", 1).JSON(), Workflow: wf, Now: now})
	require.NoError(t, err)
	_, err = store.Claim(ctx, statestore.Claim{OrderID: "o-alert", Ref: workflow.Ref{}, Agent: "inventory",
		Owner: "agent-inventory/test", Now: now})
	require.NoError(t, err)

	// The scheduler records the permanent failure, but its alert is lost.
	broken := &brokenAlerter{}
	tally := metrics.NewTally()
	discard := slog.New(slog.DiscardHandler)
	quiet := notify.New(queue.NewSender(d.Clients.SQS), nil, metrics.New(tally, "scheduler"), discard)
	sched, err := scheduler.New(scheduler.Config{Workflows: workflow.MustSet(wf),
		AgentQueues: map[string]string{"inventory": "unused", "payment": "unused", "shipping": "unused"}},
		scheduler.Deps{Store: store, Send: queue.NewSender(d.Clients.SQS), Alerts: broken, Notify: quiet,
			Metrics: metrics.New(tally, "scheduler"), Log: discard})
	require.NoError(t, err)
	reply, _ := json.Marshal(message.AgentReply{Kind: message.KindReply, OrderID: "o-alert", StepName: "reserve-inventory",
		Attempt: 1, Error: "card declined"})
	resp, err := sched.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "r1", Body: string(reply)}}})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures, "the state is recorded; the supervisor owns the alert now")
	require.Equal(t, 1, broken.calls)
	st := e.step("o-alert", 0)
	require.Equal(t, workflow.Error, st.State)
	require.False(t, st.Alerted)

	// A supervisor that cannot publish either reports the failure and leaves
	// the record due.
	later := time.Now().Add(wf.PickupTimeout + time.Second) // past the alert's due time, whenever the scheduler wrote it
	failing := supervisor.New(supervisor.Config{SchedulerQueueURL: "unused", PickupTimeout: wf.PickupTimeout},
		supervisor.Deps{Store: store, Queues: queue.NewSender(d.Clients.SQS), Alerts: broken, Notify: quiet,
			Metrics: metrics.New(tally, "supervisor"), Log: discard})
	failing.Now = func() time.Time { return later }
	_, err = failing.Sweep(ctx)
	require.ErrorContains(t, err, "SNS unavailable")
	require.False(t, e.step("o-alert", 0).Alerted)

	// A healthy supervisor sends it, once.
	sup := d.Supervisor("supervisor/test")
	sup.Now = func() time.Time { return later }
	rep, err := sup.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Alerted)
	require.True(t, e.step("o-alert", 0).Alerted)
	rep, err = sup.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Overdue, "an alerted Error leaves the deadline index")
	alerts := e.alerts(1)
	require.Equal(t, "o-alert", alerts[0].OrderID)
	require.Equal(t, "supervisor", alerts[0].DetectedBy)
	require.Equal(t, "card declined", alerts[0].LastError)
}
