package sqsbatch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/sqsbatch"
)

// recordingSQS records the requests and refuses the bodies it is told to.
type recordingSQS struct {
	mu      sync.Mutex
	singles int
	batches [][]string
	refuse  func(body string) bool
	down    bool // every SendMessageBatch fails
}

func (r *recordingSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return nil, errors.New("not recorded")
}

func (r *recordingSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.singles++
	return &sqs.SendMessageOutput{}, nil
}

func (r *recordingSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return nil, errors.New("SQS is unreachable")
	}
	var bodies []string
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		bodies = append(bodies, aws.ToString(e.MessageBody))
		if r.refuse != nil && r.refuse(aws.ToString(e.MessageBody)) {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Message: aws.String("refused")})
		}
	}
	r.batches = append(r.batches, bodies)
	return out, nil
}

func batchOf(n int) events.SQSEvent {
	ev := events.SQSEvent{}
	for i := range n {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i), Body: fmt.Sprint(i)})
	}
	return ev
}

// Each record sends two messages to two queues; with a buffer the twelve
// sends of six records go out in two requests, and a record whose message
// was refused, or whose work failed, is retried and sends nothing.
func TestBufferedSendsGoOutInBatches(t *testing.T) {
	api := &recordingSQS{refuse: func(body string) bool { return body == `"a-3"` }}
	send := queue.NewSender(api)
	p := &sqsbatch.Processor{Name: "t", Rejecter: send, Metrics: metrics.New(io.Discard, "t"),
		Log: slog.New(slog.DiscardHandler), Buffer: sqsbatch.BufferingOf(send)}
	resp := p.Handle(context.Background(), batchOf(6), func(ctx context.Context, rec events.SQSMessage) error {
		if err := send.SendJSON(ctx, "qa", "a-"+rec.Body, 0); err != nil {
			return err
		}
		if err := send.SendJSON(ctx, "qb", "b-"+rec.Body, 0); err != nil {
			return err
		}
		if rec.Body == "5" {
			return errors.New("the store is down")
		}
		return nil
	})
	require.Zero(t, api.singles)
	require.Len(t, api.batches, 2, "one request per queue")
	for _, b := range api.batches {
		require.Len(t, b, 5, "record 5 failed: its messages are not sent")
		require.NotContains(t, strings.Join(b, ","), "-5")
	}
	require.Equal(t, []events.SQSBatchItemFailure{{ItemIdentifier: "m3"}, {ItemIdentifier: "m5"}}, resp.BatchItemFailures)
}

// Without a buffer each send is its own request, as before.
func TestUnbufferedSendsGoOutAtOnce(t *testing.T) {
	api := &recordingSQS{}
	send := queue.NewSender(api)
	p := &sqsbatch.Processor{Name: "t", Rejecter: send, Metrics: metrics.New(io.Discard, "t"), Log: slog.New(slog.DiscardHandler)}
	resp := p.Handle(context.Background(), batchOf(3), func(ctx context.Context, rec events.SQSMessage) error {
		return send.SendJSON(ctx, "qa", rec.Body, 0)
	})
	require.Empty(t, resp.BatchItemFailures)
	require.Equal(t, 3, api.singles)
	require.Empty(t, api.batches)
}

// More than ten messages for one queue take more than one request.
func TestBufferSplitsAtTen(t *testing.T) {
	api := &recordingSQS{}
	send := queue.NewSender(api)
	buf := send.NewBuffer()
	for i := range 23 {
		require.NoError(t, send.SendJSON(queue.WithBuffer(context.Background(), buf, fmt.Sprint(i)), "q", i, 0))
	}
	failed, err := buf.Flush(context.Background(), nil)
	require.NoError(t, err)
	require.Empty(t, failed)
	require.Len(t, api.batches, 3)
	require.Len(t, api.batches[2], 3)
}

// A slow record does not hold back a quick one's message: buffered messages
// go out every FlushEvery while records run.
func TestBufferedSendsDoNotWaitForASlowRecord(t *testing.T) {
	api := &recordingSQS{}
	send := queue.NewSender(api)
	p := &sqsbatch.Processor{Name: "t", Rejecter: send, Metrics: metrics.New(io.Discard, "t"),
		Log: slog.New(slog.DiscardHandler), Buffer: sqsbatch.BufferingOf(send), FlushEvery: 10 * time.Millisecond}
	resp := p.Handle(context.Background(), batchOf(2), func(ctx context.Context, rec events.SQSMessage) error {
		if rec.Body == "0" {
			return send.SendJSON(ctx, "q", "quick", 0)
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) { // the slow record waits for the quick one's message to be sent
			api.mu.Lock()
			sent := len(api.batches)
			api.mu.Unlock()
			if sent > 0 {
				return send.SendJSON(ctx, "q", "slow", 0)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return errors.New("the quick record's message was held back")
	})
	require.Empty(t, resp.BatchItemFailures)
	require.Equal(t, [][]string{{`"quick"`}, {`"slow"`}}, api.batches)
}

// When SQS refuses the whole request, every record whose message was in it
// is retried.
func TestBufferedSendsThatFailWholeRetryTheirRecords(t *testing.T) {
	api := &recordingSQS{down: true}
	send := queue.NewSender(api)
	p := &sqsbatch.Processor{Name: "t", Rejecter: send, Metrics: metrics.New(io.Discard, "t"),
		Log: slog.New(slog.DiscardHandler), Buffer: sqsbatch.BufferingOf(send)}
	resp := p.Handle(context.Background(), batchOf(3), func(ctx context.Context, rec events.SQSMessage) error {
		if rec.Body == "1" {
			return nil // sends nothing: nothing to retry
		}
		return send.SendJSON(ctx, "q", rec.Body, 0)
	})
	require.Equal(t, []events.SQSBatchItemFailure{{ItemIdentifier: "m0"}, {ItemIdentifier: "m2"}}, resp.BatchItemFailures)
}

// hider records the messages hidden; it fails for the handles it is told to.
type hider struct {
	mu     sync.Mutex
	hidden map[string]time.Duration // receipt handle → for how long
	fail   string
}

func (h *hider) Hide(_ context.Context, queueURL, handle string, d time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if handle == h.fail {
		return errors.New("SQS is unreachable")
	}
	if queueURL != "q-orders" {
		return fmt.Errorf("hid a message of %s", queueURL)
	}
	h.hidden[handle] = d
	return nil
}

// A record that asks to come back later (RetryIn) is hidden for its delay
// and reported failed, so SQS delivers it again then; one whose hiding
// fails is retried all the same (after the queue's visibility timeout); a
// plain failure hides nothing.
func TestARecordRetriedInComesBackAfterItsDelay(t *testing.T) {
	h := &hider{hidden: map[string]time.Duration{}, fail: "rh-2"}
	p := &sqsbatch.Processor{Name: "t", Metrics: metrics.New(io.Discard, "t"), Log: slog.New(slog.DiscardHandler),
		Hider: h, QueueURL: "q-orders"}
	ev := batchOf(4)
	for i := range ev.Records {
		ev.Records[i].ReceiptHandle = fmt.Sprintf("rh-%d", i)
	}
	resp := p.Handle(context.Background(), ev, func(_ context.Context, rec events.SQSMessage) error {
		switch rec.Body {
		case "1", "2":
			return sqsbatch.RetryIn(3*time.Second, errors.New("no such order yet"))
		case "3":
			return errors.New("the store is unreachable")
		}
		return nil
	})
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	require.Equal(t, []string{"m1", "m2", "m3"}, failed)
	require.Equal(t, map[string]time.Duration{"rh-1": 3 * time.Second}, h.hidden)
	var later *sqsbatch.Later
	require.ErrorAs(t, sqsbatch.RetryIn(time.Second, errors.New("x")), &later)
	require.EqualError(t, later, "x")
}
