// Package runner plays Lambda's part locally, where no emulator runs Go
// Lambdas: it polls each queue the way an event source mapping does (batches
// of up to 10, long polling, the queue's visibility timeout, delete only what
// succeeded, partial batch failures honoured; the queue's redrive policy
// moves a message that keeps failing to its DLQ) and calls the very handler
// values the functions' mains pass to lambda.Start. Tickers play EventBridge
// scheduled rules. A Faults hook can drop or duplicate deliveries.
package runner

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/shared/devkit/accounting"
)

// API is the part of the SQS client the runner uses.
type API interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Handler is an SQS-triggered Lambda handler.
type Handler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// Source is one event source mapping: a queue and the function it invokes.
type Source struct {
	Function  string // the function's name, for stats and logs
	QueueURL  string
	QueueARN  string
	Handler   Handler
	BatchSize int           // 1..10 (default 10)
	Wait      time.Duration // long-poll wait (default 1s)
	// Window is the batching window (MaximumBatchingWindowInSeconds): after
	// the first message, receive until the batch is full or Window passed.
	// Zero invokes with what the first receive returned.
	Window  time.Duration
	Pollers int           // concurrent pollers, like Lambda's concurrency (default 2)
	Timeout time.Duration // the function's timeout (default 30s)
	// Capacity, if set, caps the function's pace across all its sources, as
	// a function at its maximum concurrency: messages wait in their queues.
	Capacity    *Capacity
	Region      string
	Description string
}

// Ticker is a scheduled rule: Run is called every Every, never overlapping itself.
type Ticker struct {
	Function string
	Every    time.Duration
	Run      func(ctx context.Context) error
}

// Action is what the Faults hook does with one received message.
type Action int

// The actions of a Faults hook.
const (
	Deliver   Action = iota // deliver normally
	Drop                    // delete without delivering: a lost message
	Duplicate               // deliver twice, in two concurrent invocations
	Delay                   // deliver later: hidden for Runner.DelayFor
)

// Faults decides the fate of each received message (nil delivers all).
type Faults func(function string, msg types.Message) Action

// Runner runs sources and tickers until its context ends.
type Runner struct {
	SQS     API
	Sources []Source
	Tickers []Ticker
	Faults  Faults
	Log     *slog.Logger
	Stats   *Stats
	// DelayFor is how long a Delay fault hides a message (default 5s).
	DelayFor time.Duration
}

// Run blocks until ctx is done. Invocations in flight see ctx cancelled, as a
// killed process would: what they did not finish is redelivered by SQS.
func (r *Runner) Run(ctx context.Context) error {
	if r.Stats == nil {
		r.Stats = NewStats()
	}
	var wg sync.WaitGroup
	for _, src := range r.Sources {
		src = src.withDefaults()
		// The poller's requests are billed to the account like the
		// function's own: counted under the function's name.
		fctx := accounting.WithFunction(ctx, src.Function)
		for range src.Pollers {
			wg.Go(func() { r.poll(fctx, src) })
		}
	}
	for _, t := range r.Tickers {
		fctx := accounting.WithFunction(ctx, t.Function)
		wg.Go(func() { r.tick(fctx, t) })
	}
	wg.Wait()
	return ctx.Err()
}

func (s Source) withDefaults() Source {
	if s.BatchSize <= 0 || s.BatchSize > 10 {
		s.BatchSize = 10
	}
	if s.Wait <= 0 {
		s.Wait = time.Second
	}
	if s.Pollers <= 0 {
		s.Pollers = 2
	}
	if s.Timeout <= 0 {
		s.Timeout = 30 * time.Second
	}
	if s.Region == "" {
		s.Region = "us-east-1"
	}
	return s
}

func (r *Runner) tick(ctx context.Context, t Ticker) {
	tk := time.NewTicker(t.Every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		start := time.Now()
		err := t.Run(ctx)
		r.Stats.invoked(t.Function, time.Since(start), 0, err != nil)
		if err != nil && ctx.Err() == nil {
			r.Log.Error("scheduled invocation failed", "function", t.Function, "err", err)
		}
	}
}

func (r *Runner) poll(ctx context.Context, src Source) {
	if src.Capacity != nil {
		r.pollAtCapacity(ctx, src)
		return
	}
	for ctx.Err() == nil {
		out, err := r.receive(ctx, src, src.BatchSize, max(src.Wait, time.Second))
		if err != nil {
			if ctx.Err() == nil {
				r.Log.Warn("receive failed", "function", src.Function, "err", err)
				sleepCtx(ctx, 200*time.Millisecond)
			}
			continue
		}
		if len(out.Messages) > 0 {
			r.deliver(ctx, src, r.gather(ctx, src, out.Messages))
		}
	}
}

// gather fills a batch within the source's batching window, counted from
// the first receive. A receive waits at most a second past the window
// (WaitTimeSeconds is whole seconds); none is cut short, so no message is
// left hidden by a receive whose answer was dropped.
func (r *Runner) gather(ctx context.Context, src Source, msgs []types.Message) []types.Message {
	end := time.Now().Add(src.Window)
	for len(msgs) < src.BatchSize && ctx.Err() == nil {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		wait := min((left + time.Second - 1).Truncate(time.Second), 20*time.Second) // whole seconds, SQS's most 20
		out, err := r.receive(ctx, src, src.BatchSize-len(msgs), wait)
		if err != nil {
			if ctx.Err() == nil {
				r.Log.Warn("receive failed while filling a batch; invoking with what there is", "function", src.Function, "err", err)
			}
			break
		}
		msgs = append(msgs, out.Messages...)
	}
	return msgs
}

// receive asks for up to n messages, long-polling for wait (whole seconds,
// rounded down).
func (r *Runner) receive(ctx context.Context, src Source, n int, wait time.Duration) (*sqs.ReceiveMessageOutput, error) {
	return r.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(src.QueueURL),
		MaxNumberOfMessages:         int32(n),
		WaitTimeSeconds:             int32(wait / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
}

// deliver invokes the function with a batch, applies faults, and deletes
// what succeeded.
func (r *Runner) deliver(ctx context.Context, src Source, msgs []types.Message) {
	var batch, dropped, dups []types.Message
	for _, m := range msgs {
		switch r.action(src.Function, m) {
		case Drop:
			dropped = append(dropped, m)
		case Delay:
			r.Stats.faulted(src.Function, "delayed", 1)
			r.delay(ctx, src, m)
		case Duplicate:
			dups = append(dups, m)
			batch = append(batch, m)
		default:
			batch = append(batch, m)
		}
	}
	if len(dropped) > 0 {
		r.Stats.faulted(src.Function, "dropped", len(dropped))
		r.delete(ctx, src, dropped)
	}
	if len(batch) == 0 {
		return
	}
	var wg sync.WaitGroup
	if len(dups) > 0 {
		r.Stats.faulted(src.Function, "duplicated", len(dups))
		wg.Go(func() { r.invoke(ctx, src, dups) }) // a second delivery; its result deletes nothing
	}
	failed, ok := r.invoke(ctx, src, batch)
	wg.Wait()
	if !ok || ctx.Err() != nil {
		return // nothing deleted: every message comes back after its visibility timeout
	}
	var done []types.Message
	for _, m := range batch {
		if !failed[aws.ToString(m.MessageId)] {
			done = append(done, m)
		}
	}
	r.delete(ctx, src, done)
}

// delay hides a message for DelayFor: it is delivered again after that.
func (r *Runner) delay(ctx context.Context, src Source, m types.Message) {
	d := r.DelayFor
	if d <= 0 {
		d = 5 * time.Second
	}
	_, err := r.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(src.QueueURL),
		ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: int32((d + time.Second - 1) / time.Second)})
	if err != nil && ctx.Err() == nil {
		r.Log.Warn("delay failed; the message comes back after its visibility timeout", "function", src.Function, "err", err)
	}
}

func (r *Runner) action(function string, m types.Message) Action {
	if r.Faults == nil {
		return Deliver
	}
	return r.Faults(function, m)
}

// invoke calls the handler once and returns the failed message ids; ok is
// false when the invocation as a whole failed.
func (r *Runner) invoke(ctx context.Context, src Source, msgs []types.Message) (failed map[string]bool, ok bool) {
	ictx, cancel := context.WithTimeout(ctx, src.Timeout)
	defer cancel()
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		ev.Records[i] = toRecord(m, src)
	}
	start := time.Now()
	resp, err := callHandler(ictx, src.Handler, ev)
	r.Stats.invoked(src.Function, time.Since(start), len(msgs), err != nil)
	r.Stats.delivered(queueName(src.QueueURL), len(msgs))
	if err != nil {
		if ctx.Err() == nil {
			r.Log.Error("invocation failed; the whole batch will be retried", "function", src.Function, "err", err)
		}
		return nil, false
	}
	failed = make(map[string]bool, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	r.Stats.failedItems(src.Function, len(failed))
	return failed, true
}

// callHandler turns a handler panic into an invocation error, as Lambda does.
func callHandler(ctx context.Context, h Handler, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h(ctx, ev)
}

func (r *Runner) delete(ctx context.Context, src Source, msgs []types.Message) {
	if len(msgs) == 0 {
		return
	}
	entries := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle}
	}
	out, err := r.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(src.QueueURL), Entries: entries})
	if err != nil && ctx.Err() == nil {
		r.Log.Warn("delete failed; messages will be redelivered", "function", src.Function, "err", err)
	} else if err == nil && len(out.Failed) > 0 {
		r.Log.Warn("some deletes failed; those messages will be redelivered", "function", src.Function, "failed", len(out.Failed))
	}
}

func toRecord(m types.Message, src Source) events.SQSMessage {
	attrs := make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes))
	for k, v := range m.MessageAttributes {
		attrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	return events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
		Body: aws.ToString(m.Body), Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: m.Attributes,
		MessageAttributes: attrs, EventSource: "aws:sqs", EventSourceARN: src.QueueARN, AWSRegion: src.Region,
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
