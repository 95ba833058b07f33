// Package sqsbatch runs an SQS-triggered handler over a batch, one record at a
// time in parallel, and reports partial batch failures: a record that failed
// for a transient reason is retried by SQS alone; a record that can never
// succeed (an invalid message) goes to the dead-letter queue with its reason,
// counted, and never fails the rest of the batch.
package sqsbatch

import (
	"context"
	"log/slog"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
)

// RecordFunc handles one record. Return an error wrapping a
// *message.InvalidError to reject the record, any other error to retry it.
type RecordFunc func(ctx context.Context, rec events.SQSMessage) error

// Rejecter sends a rejected body to a dead-letter queue.
type Rejecter interface {
	Reject(ctx context.Context, dlqURL, body, source, reason string) error
}

// Processor runs a RecordFunc over batches.
type Processor struct {
	Name     string // the function's name, for logs
	DLQURL   string // where invalid records go
	Rejecter Rejecter
	Metrics  *metrics.Emitter
	Log      *slog.Logger
	// Parallel bounds how many records run at once (default 10).
	Parallel int
}

// Handle runs fn over every record and returns the records to retry.
func (p *Processor) Handle(ctx context.Context, ev events.SQSEvent, fn RecordFunc) events.SQSEventResponse {
	var (
		mu     sync.Mutex
		failed []events.SQSBatchItemFailure
		wg     sync.WaitGroup
		sem    = make(chan struct{}, max(p.Parallel, 10))
	)
	for _, rec := range ev.Records {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if !p.one(ctx, rec, fn) {
				mu.Lock()
				failed = append(failed, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return events.SQSEventResponse{BatchItemFailures: failed}
}

// one handles a record and reports whether it is done (processed or rejected).
func (p *Processor) one(ctx context.Context, rec events.SQSMessage, fn RecordFunc) (done bool) {
	defer func() {
		if r := recover(); r != nil {
			p.Log.Error("record handler panicked; will retry", "message_id", rec.MessageId, "panic", r)
			done = false
		}
	}()
	err := fn(ctx, rec)
	if err == nil {
		return true
	}
	if !message.IsInvalid(err) {
		p.Log.Warn("record failed; SQS will retry it", "message_id", rec.MessageId, "err", err)
		return false
	}
	p.Log.Error("message rejected to the DLQ", "message_id", rec.MessageId, "reason", err.Error(),
		"source", rec.EventSourceARN)
	if rerr := p.Rejecter.Reject(ctx, p.DLQURL, rec.Body, rec.EventSourceARN, err.Error()); rerr != nil {
		p.Log.Error("could not send rejected message to the DLQ; SQS will retry it", "message_id", rec.MessageId, "err", rerr)
		return false
	}
	p.Metrics.Count(metrics.MalformedMessages, 1, map[string]any{"Reason": err.Error(), "MessageId": rec.MessageId})
	return true
}
