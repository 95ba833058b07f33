package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/workflow"
)

// wire is an SQS client that keeps what it is sent.
type wire struct {
	mu     sync.Mutex
	bodies []string
	why    []string // each message's RejectReason, if it has one
}

func (w *wire) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bodies = append(w.bodies, aws.ToString(in.MessageBody))
	if r, ok := in.MessageAttributes["RejectReason"]; ok {
		w.why = append(w.why, aws.ToString(r.StringValue))
	}
	return &sqs.SendMessageOutput{}, nil
}

func (w *wire) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range in.Entries {
		w.bodies = append(w.bodies, aws.ToString(e.MessageBody))
	}
	return &sqs.SendMessageBatchOutput{}, nil
}

func (w *wire) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return nil, fmt.Errorf("not served")
}

// xml is a JSON order or answer of n bytes holding XML: <, >, & everywhere.
func xml(n int) []byte {
	head, tail := `{"orderId":"o-1","doc":"`, `"}`
	line := `<line sku='A-1' qty='2'>R&amp;D &lt;kit&gt;</line>`
	body := strings.Repeat(line, (n-len(head)-len(tail))/len(line))
	return []byte(head + body + strings.Repeat("<", n-len(head)-len(tail)-len(body)) + tail)
}

// An Agent's reply carrying a 30 KB order and a 30 KB answer holding XML,
// each kept inline under the default 32 KiB limit, travels as it was
// weighed and the Scheduler takes it, sent at once or from a batch; at a
// 64 KiB inline setting, the request carrying a 64 KiB order to its Agent
// too. Encoded by json.Marshal (each <, >, & six bytes) the reply was 158 KB,
// over the Scheduler's limit: refused to its DLQ on every step.
func TestAnOrderAndAResultOfXMLTravelAsTheyWereWeighed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := kept.New(kept.Payloads(nil, "", 0), nil)
	o, err := store.Offload(ctx, "o-1", "order", kept.Unsealed(xml(30_000), nil))
	require.NoError(t, err)
	r, err := store.Offload(ctx, "o-1", "results/s-r1", kept.Unsealed(xml(30_000), nil))
	require.NoError(t, err)
	order, result := o.JSON(), r.JSON()
	require.Equal(t, xml(30_000), []byte(result), "kept inline, as it is")
	reply := message.AgentReply{Kind: message.KindReply, OrderID: "o-1", StepName: "pick", Attempt: 1, OK: true,
		Result: result, Payload: order, Recorded: true, State: string(workflow.Pending), Ready: []message.Start{{Step: 1}}}

	w := &wire{}
	s := queue.NewSender(w)
	require.NoError(t, s.SendJSON(ctx, "q", reply, 0))
	buf := s.NewBuffer()
	require.NoError(t, s.SendJSON(queue.WithBuffer(ctx, buf, "r-1"), "q", reply, 0))
	failed, err := buf.Flush(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, failed)
	require.Len(t, w.bodies, 2)
	for _, b := range w.bodies {
		t.Logf("a reply with a 30 KB order and a 30 KB result of XML: %d bytes", len(b))
		require.LessOrEqual(t, len(b), 2*kept.DefaultInline+message.MaxEnvelopeBytes)
		got, err := message.DecodeSchedulerMessage(b)
		require.NoError(t, err)
		require.Equal(t, string(result), string(got.(message.AgentReply).Result))
	}

	v, err := kept.New(kept.Payloads(nil, "", kept.MaxInline), nil).Offload(ctx, "o-1", "order", kept.Unsealed(xml(kept.MaxInline), nil))
	require.NoError(t, err)
	big := v.JSON()
	req := message.AgentRequest{OrderID: "o-1", StepName: "pick", Payload: big}
	require.NoError(t, s.SendJSON(ctx, "q", req, 0))
	got, err := message.DecodeAgentRequest(w.bodies[2])
	require.NoError(t, err, "%d bytes", len(w.bodies[2]))
	require.Equal(t, string(big), string(got.Payload))
}

// A message its reader would refuse for its size is not sent: the send is
// an error that names the limit (it was sent, and refused to the reader's
// DLQ: an alarm, and the order's next step waited for its pickup timeout).
func TestAMessageOverItsReadersLimitIsNotSent(t *testing.T) {
	t.Parallel()
	w := &wire{}
	s := queue.NewSender(w)
	huge := json.RawMessage(`"` + strings.Repeat("x", message.MaxWorkBytes) + `"`)
	reply := message.AgentReply{Kind: message.KindReply, OrderID: "o-1", StepName: "s", Attempt: 1, OK: true, Result: huge}
	err := s.SendJSON(context.Background(), "q", reply, 0)
	require.ErrorIs(t, err, message.ErrTooLarge)
	require.ErrorContains(t, err, fmt.Sprintf("over the %d-byte limit", message.MaxWorkBytes))
	buf := s.NewBuffer()
	require.ErrorIs(t, s.SendJSON(queue.WithBuffer(context.Background(), buf, "r-1"), "q", reply, 0), message.ErrTooLarge)
	require.Zero(t, buf.Len())
	require.Empty(t, w.bodies, "nothing sent")
}

// A status at its largest (a result inline at MaxInline full of <, >, &;
// an error of control bytes as long as a service's answer may be) reaches its reader, which takes it: its error is cut to
// MaxErrorBytes (it was not, and a long one made the status too large to
// read).
func TestAStatusAtItsLargestIsTaken(t *testing.T) {
	t.Parallel()
	w := &wire{}
	n := notify.New(queue.NewSender(w), notify.Stored{}, metrics.New(io.Discard, "scheduler"), slog.New(slog.DiscardHandler))
	result := json.RawMessage(xml(kept.MaxInline))
	n.Post(context.Background(), notify.Event{OrderID: "o-1", ReplyQueue: "q", Round: 1, Event: workflow.EventStepDone,
		Step: "pick", State: workflow.Pending, Error: strings.Repeat("\x01é<", 100<<10), Result: result, At: time.Now()})
	require.Len(t, w.bodies, 1)
	st, err := message.DecodeStatus(w.bodies[0])
	require.NoError(t, err)
	require.Equal(t, string(result), string(st.Result))
	require.LessOrEqual(t, len(st.Error), message.MaxErrorBytes)
}

// A rejected message's reason is escaped as an attribute can carry it and
// cut on a character's boundary at MaxRejectReasonBytes (it was cut in the
// middle of a character, and sent with control bytes SQS refuses).
func TestARejectReasonIsEscapedAndCutOnACharacter(t *testing.T) {
	t.Parallel()
	w := &wire{}
	s := queue.NewSender(w)
	for _, reason := range []string{
		strings.Repeat("x", queue.MaxRejectReasonBytes-1) + "é",
		"bad JSON: \x01\x1f\xff\uffff" + strings.Repeat("é", 2000),
	} {
		require.NoError(t, s.Reject(context.Background(), "dlq", "body", "src", reason))
	}
	require.Len(t, w.why, 2)
	for _, why := range w.why {
		require.LessOrEqual(t, len(why), queue.MaxRejectReasonBytes)
		require.True(t, utf8.ValidString(why), why)
		require.Equal(t, why, queue.RejectReasonText(why), "nothing SQS refuses")
	}
	require.True(t, strings.HasPrefix(w.why[1], `bad JSON: \u0001\u001f\xff\uffffé`), w.why[1])
}
