package scheduler_test

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
	"github.com/sas-go/sas/shared/scheduler"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The benchmarks measure the handler's own work per message (decode, decide,
// encode); the store and the queues do nothing but encode what they are given.
type nopStore struct {
	scheduler.Store // what the benchmarks do not reach: nil
}

func (nopStore) Definition(context.Context, string) (workflow.Definition, error) {
	return workflow.Definition{}, statestore.ErrNotFound
}
func (nopStore) MarkAlerted(context.Context, string, workflow.Ref, time.Time) error { return nil }
func (nopStore) AlertPending(context.Context, string, workflow.Ref) (bool, error)   { return true, nil }

type nopAlerter struct{}

func (nopAlerter) StepFailed(context.Context, alert.Failure) error { return nil }

func BenchmarkSchedulerPerMessage(b *testing.B) {
	def := workflow.Orders(workflow.Settings{})
	m := metrics.New(io.Discard, "scheduler")
	log := slog.New(slog.DiscardHandler)
	queues := map[string]string{}
	for _, a := range def.Agents() {
		queues[a] = "q-" + a
	}
	h, err := scheduler.New(scheduler.Config{Workflows: workflow.MustSet(def), AgentQueues: queues, DLQURL: "dlq"},
		scheduler.Deps{Store: nopStore{}, Send: handlerbench.EncodeOnly{}, Alerts: nopAlerter{},
			Notify: notify.New(handlerbench.EncodeOnly{}, nil, m, log), Metrics: m, Log: log})
	if err != nil {
		b.Fatal(err)
	}
	for name, body := range map[string]string{
		"start": `{"kind":"schedule","orderId":"o-%d","step":1}`,
		"reply": `{"kind":"reply","orderId":"o-%d","step":1,"stepName":"charge-payment","attempt":1,"ok":true,"result":{"id":"x"},` +
			`"recorded":true,"state":"Pending","ready":[{"step":2}]}`,
	} {
		b.Run(name, func(b *testing.B) {
			var bodies []string
			for i := range 10 {
				bodies = append(bodies, fmt.Sprintf(body, i))
			}
			handlerbench.Run(b, h.Handle, handlerbench.Batch(bodies...))
		})
	}
}
