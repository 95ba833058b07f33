// Package handlerbench measures the handlers: their own work per message (a
// sender stand-in that only encodes, and the loop that runs a handler over a
// batch), and their throughput per instance on the local engines (its
// benchmarks, and ReadFigures, which reads their output for a capacity
// model).
package handlerbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/shared/queue"
)

// EncodeOnly sends nothing: it encodes each message as the real sender does,
// and fails every rejection (a benchmark whose message is rejected measures
// the wrong path).
type EncodeOnly struct{}

// SendJSON encodes v.
func (EncodeOnly) SendJSON(_ context.Context, _ string, v any, _ time.Duration) error {
	_, err := json.Marshal(v)
	return err
}

// Reject fails with the reason.
func (EncodeOnly) Reject(_ context.Context, _, _, _, reason string) error {
	return errors.New("rejected: " + reason)
}

// Depth says every queue is empty.
func (EncodeOnly) Depth(context.Context, string) (queue.Depth, error) { return queue.Depth{}, nil }

// Handler is an SQS-triggered handler.
type Handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// Batch is an SQS event with one record per body, message ids "0", "1", …
func Batch(bodies ...string) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(bodies))}
	for i, body := range bodies {
		ev.Records[i] = events.SQSMessage{MessageId: fmt.Sprint(i), Body: body}
	}
	return ev
}

// UnitCPUPerMsg is the CPU time a message took, in ns: unlike its wall
// time (ns/msg), it hardly moves when other processes load the machine.
const UnitCPUPerMsg = "cpu-ns/msg"

// Run runs h over ev b.N times, failing on any error or record to retry, and
// reports allocations, the time per message, the CPU time per message and
// the messages a second of the handler's own work (the store and queues
// doing nothing).
func Run(b *testing.B, h Handler, ev events.SQSEvent) {
	b.Helper()
	b.ReportAllocs()
	cpu := CPUTime()
	for b.Loop() {
		resp, err := h(context.Background(), ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			b.Fatalf("handle: %v %v", err, resp)
		}
	}
	msgs := float64(b.N * len(ev.Records))
	b.ReportMetric(float64((CPUTime()-cpu).Nanoseconds())/msgs, UnitCPUPerMsg)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/msgs, "ns/msg")
	b.ReportMetric(msgs/b.Elapsed().Seconds(), UnitMsgsPerSecond)
}
