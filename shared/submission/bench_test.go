package submission_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/queue/queuetest"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/submission"
	"github.com/sas-go/sas/shared/workflow"
)

// The benchmarks measure the handler's own work per message: decode,
// validate, build the submission, encode the Scheduler's message. The store
// and the queue do nothing (their cost is the requests, which sasctl bench
// counts).
type nopStore struct{}

func (nopStore) Submit(context.Context, statestore.Submission) (bool, error) { return true, nil }

func BenchmarkSubmissionPerMessage(b *testing.B) {
	for _, wf := range []string{workflow.SingleWorkflow, workflow.OrderWorkflow} {
		b.Run(wf, func(b *testing.B) {
			s := workflow.DefaultSettings()
			s.Workflow = wf
			def, _ := workflow.For(s)
			m := metrics.New(io.Discard, "submission")
			log := slog.New(slog.DiscardHandler)
			h := submission.New(submission.Config{Workflow: def, SchedulerQueueURL: "q", DLQURL: "dlq"}, nopStore{}, queuetest.EncodeOnly{},
				notify.New(queuetest.EncodeOnly{}, nil, m, log), m, log)
			ev := events.SQSEvent{Records: make([]events.SQSMessage, 10)}
			for i := range ev.Records {
				ev.Records[i] = events.SQSMessage{MessageId: fmt.Sprint(i), Body: fmt.Sprintf(
					`{"orderId":"o-%d","customerId":"c-1","items":[{"sku":"SKU-1","quantity":2,"unitPriceCents":499}]}`, i)}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				resp, err := h.Handle(context.Background(), ev)
				if err != nil || len(resp.BatchItemFailures) > 0 {
					b.Fatalf("handle: %v %v", err, resp)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ev.Records)), "ns/msg")
		})
	}
}
