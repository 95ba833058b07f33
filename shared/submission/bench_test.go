package submission_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/sas-go/sas/shared/devkit/handlerbench"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/submission"
	"github.com/sas-go/sas/shared/workflow"
)

// The benchmarks measure the handler's own work per message: decode,
// validate, build the submission, encode the Scheduler's message. The store
// and the queue do nothing (their cost is the requests, which sasctl bench
// counts).
type nopStore struct {
	submission.Store // what the benchmarks do not reach: nil
}

func (nopStore) Submit(context.Context, statestore.Submission) (bool, error) { return true, nil }
func (nopStore) Definition(context.Context, string) (workflow.Definition, error) {
	return workflow.Definition{}, statestore.ErrNotFound
}
func (nopStore) Order(context.Context, string) (string, error) { return "", nil }
func (nopStore) Cancel(context.Context, statestore.CancelRequest) (statestore.Cancellation, error) {
	return statestore.Cancellation{}, nil
}

func BenchmarkSubmissionPerMessage(b *testing.B) {
	for _, wf := range []string{workflow.SingleWorkflow, workflow.OrderWorkflow} {
		b.Run(wf, func(b *testing.B) {
			def := workflow.MustExample(wf)
			m := metrics.New(io.Discard, "submission")
			log := slog.New(slog.DiscardHandler)
			queues := map[string]string{}
			for _, a := range def.Agents() {
				queues[a] = "q-" + a
			}
			h, err := submission.New(submission.Config{Workflows: workflow.MustSet(def), AgentQueues: queues, DLQURL: "dlq"},
				submission.Deps{Store: nopStore{}, Send: handlerbench.EncodeOnly{},
					Notify: notify.New(handlerbench.EncodeOnly{}, nil, m, log), Metrics: m, Log: log})
			if err != nil {
				b.Fatal(err)
			}
			var bodies []string
			for i := range 10 {
				bodies = append(bodies, fmt.Sprintf(
					`{"orderId":"o-%d","customerId":"c-1","items":[{"sku":"SKU-1","quantity":2,"unitPriceCents":499}]}`, i))
			}
			handlerbench.Run(b, h.Handle, handlerbench.Batch(bodies...))
		})
	}
}
