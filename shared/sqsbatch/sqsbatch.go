// Package sqsbatch runs an SQS-triggered handler over a batch, one record at a
// time in parallel, and reports partial batch failures: a record that failed
// for a transient reason is retried by SQS alone; a record that can never
// succeed (an invalid message) goes to the dead-letter queue with its reason,
// counted, and never fails the rest of the batch.
package sqsbatch

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/tracing"
)

// RecordFunc handles one record. Return an error wrapping a
// *message.InvalidError to reject the record, one made by RetryIn to have it
// again after a while, any other error to retry it after the queue's
// visibility timeout.
type RecordFunc func(ctx context.Context, rec events.SQSMessage) error

// Rejecter sends a rejected body to a dead-letter queue.
type Rejecter interface {
	Reject(ctx context.Context, dlqURL, body, source, reason string) error
}

// Later is a record's error that asks for the record again after After,
// sooner than the queue's visibility timeout (RetryIn).
type Later struct {
	After time.Duration
	Err   error
}

func (l *Later) Error() string { return l.Err.Error() }

// Unwrap returns the reason the record is retried.
func (l *Later) Unwrap() error { return l.Err }

// RetryIn is err, for a record to be delivered again in d: its message is
// hidden for d (Processor.Hider) instead of the queue's whole visibility
// timeout. SQS counts each receive as usual, so a record retried this way
// still reaches its queue's DLQ at its MaxReceiveCount.
func RetryIn(d time.Duration, err error) error { return &Later{After: d, Err: err} }

// Hider hides a received message for a while (a *queue.Sender: SQS
// ChangeMessageVisibility).
type Hider interface {
	Hide(ctx context.Context, queueURL, receiptHandle string, d time.Duration) error
}

// Buffering is what the records' sender (a *queue.Sender) implements so that
// the sends of one batch go out together: ten messages per request instead
// of one.
type Buffering interface {
	NewBuffer() *queue.Buffer
}

// BufferingOf returns send as Buffering if it can buffer, else nil.
func BufferingOf(send any) Buffering {
	b, _ := send.(Buffering)
	return b
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
	// Buffer, if set, holds the records' sends and sends them in batches:
	// every FlushEvery while records run, and when the last one is done.
	Buffer Buffering
	// FlushEvery bounds how long a buffered message waits (default 50ms), so a
	// slow record does not hold back the others' messages. A handler whose
	// records are all quick (a write and a send) sets OnceAtEnd instead: one
	// request per queue per invocation.
	FlushEvery time.Duration
	// OnceAtEnd sends the buffered messages only when every record has run.
	OnceAtEnd bool
	// Hider and QueueURL (the queue the records come from), if set, let a
	// record retried with RetryIn come back after its own delay.
	Hider    Hider
	QueueURL string
}

// Handle runs fn over every record and returns the records to retry. With a
// Buffer, the messages the records send go out in batches, every FlushEvery
// while records run and once more when all have run; a record whose message
// could not be sent is retried, and a record that failed sends nothing more.
// The metrics the records emitted are written last, one document for the
// batch (metrics.Emitter.Flush).
func (p *Processor) Handle(ctx context.Context, ev events.SQSEvent, fn RecordFunc) events.SQSEventResponse {
	defer p.Metrics.Flush()
	var (
		failed failures
		wg     sync.WaitGroup
		sem    = make(chan struct{}, max(p.Parallel, 10))
		buf    *queue.Buffer
	)
	stopFlushing := func() {}
	if p.Buffer != nil {
		buf = p.Buffer.NewBuffer()
		if !p.OnceAtEnd {
			stopFlushing = p.flushWhileRunning(ctx, buf, &failed)
		}
	}
	for _, rec := range ev.Records {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			rctx := ctx
			if buf != nil {
				rctx = queue.WithBuffer(ctx, buf, rec.MessageId)
			}
			if !p.one(rctx, rec, fn) {
				failed.add(map[string]bool{rec.MessageId: true})
			}
		}()
	}
	wg.Wait()
	if buf != nil {
		stopFlushing()
		p.flush(ctx, buf, &failed)
	}
	var out []events.SQSBatchItemFailure
	for _, rec := range ev.Records { // in the batch's order
		if failed.has(rec.MessageId) {
			out = append(out, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	return events.SQSEventResponse{BatchItemFailures: out}
}

// failures are the records to retry; safe for concurrent use.
type failures struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (f *failures) add(ids map[string]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ids == nil {
		f.ids = map[string]bool{}
	}
	maps.Copy(f.ids, ids)
}

func (f *failures) has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ids[id]
}

func (f *failures) snapshot() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.ids)
}

// flush sends what buf holds, but for the records that failed, and marks the
// records whose messages were not sent.
func (p *Processor) flush(ctx context.Context, buf *queue.Buffer, failed *failures) {
	if buf.Len() == 0 {
		return
	}
	unsent, err := buf.Flush(ctx, failed.snapshot())
	if err != nil {
		p.Log.Warn("messages not sent; their records will be retried", "records", len(unsent), "err", err)
	}
	failed.add(unsent)
}

// flushWhileRunning flushes buf every FlushEvery (default 50 ms) until the
// returned stop is called, so a slow record does not hold the others'
// messages back; stop returns once the flusher has.
func (p *Processor) flushWhileRunning(ctx context.Context, buf *queue.Buffer, failed *failures) (stop func()) {
	every := p.FlushEvery
	if every <= 0 {
		every = 50 * time.Millisecond
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				p.flush(ctx, buf, failed)
			}
		}
	}()
	return func() { close(quit); <-done }
}

// OrderIDAttribute is the span attribute naming a message's order.
const OrderIDAttribute = "sas.order_id"

// one handles a record and reports whether it is done (processed or rejected).
func (p *Processor) one(ctx context.Context, rec events.SQSMessage, fn RecordFunc) (done bool) {
	// A span of its own in the trace the message carries (its order's).
	ctx, span := tracing.Tracer().Start(tracing.FromMessage(ctx, rec), p.Name,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attribute.String("messaging.system", "aws_sqs"),
			attribute.String("messaging.message.id", rec.MessageId), attribute.String("messaging.destination.name", p.Name)))
	if span.IsRecording() {
		// Every message of the product names its order: the span says it,
		// so a collector finds an order's spans by its id (sas.order_id).
		var head struct {
			OrderID string `json:"orderId"`
		}
		if json.Unmarshal([]byte(rec.Body), &head) == nil && head.OrderID != "" {
			span.SetAttributes(attribute.String(OrderIDAttribute, head.OrderID))
		}
	}
	defer func() {
		if !done {
			span.SetStatus(codes.Error, "record failed")
		}
		span.End()
	}()
	defer func() {
		if r := recover(); r != nil {
			p.Log.Error("record handler panicked; will retry", "message_id", rec.MessageId, "panic", r)
			done = false
		}
	}()
	err := fn(ctx, rec)
	if err != nil {
		span.RecordError(err)
	}
	if err == nil {
		return true
	}
	var later *Later
	switch {
	case errors.As(err, &later) && p.Hider != nil && p.QueueURL != "" && rec.ReceiptHandle != "":
		if herr := p.Hider.Hide(ctx, p.QueueURL, rec.ReceiptHandle, later.After); herr != nil {
			p.Log.Warn("record failed, and could not be hidden for its delay; SQS will retry it", "message_id", rec.MessageId,
				"err", err, "hide_err", herr)
			return false
		}
		p.Log.Info("record comes back later", "message_id", rec.MessageId, "in", later.After, "why", err)
		return false
	case !message.IsInvalid(err):
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
