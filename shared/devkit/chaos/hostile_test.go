package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/hostile"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/devkit/runner"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// hostileFlow is two steps of one agent, the first with an undo, whose
// service answers with what encoders change: JSON (its agent "json") or
// XML that is not JSON (its agent "text"); twenty seconds a step, one
// failure allowed (a step that times out once fails).
const hostileFlow = `
name: NAME
resultLimit: LIMIT
deadline: 1h
pickupTimeout: 30s
defaults:
  timeout: 20s
  maxFailures: 1
  retryBackoff: 500ms
agents:
  AGENT:
    endpoint: ${SAS_REMOTE_BASE_URL}/v1/services/AGENT
    timeout: 20s
steps:
  - name: scan
    agent: AGENT
    undo:
      name: unscan
  - name: file
    agent: AGENT
`

func hostileWorkflow(t *testing.T, name, agent, limit string) workflow.Definition {
	t.Helper()
	file := strings.NewReplacer("NAME", name, "AGENT", agent, "LIMIT", limit).Replace(hostileFlow)
	d, err := workflow.ParseFile(name+".yaml", []byte(file), workflow.Options{})
	require.NoError(t, err)
	return d
}

// hostileCase is an order whose body, as sent, is body bytes (0: small),
// and whose service answers with answer bytes as kept: its JSON, or its
// XML as encoding/json quotes it.
type hostileCase struct {
	id, workflow string
	body, answer int
}

// Orders full of <, >, & and control characters, answered with JSON of
// them or with XML of raw control bytes and invalid UTF-8, each at a limit
// on the bytes that travel: the inline limit (an order and a result kept
// inline on their raw size, then carried by one message), one byte over
// it, SQS's limit, a result limit. Each ends Processed with every result
// read back as its service answered it (an answer that is not JSON as the
// string it quotes, each byte of invalid UTF-8 a U+FFFD), no message is
// refused to a DLQ, no send refused, and every message delivered is
// within its queue's limit (an order's or an event's SQS's 256 KiB, a
// work message message.MaxWorkBytes).
func TestHostileOrdersEndProcessedWithTheirAnswersWhole(t *testing.T) {
	jsonFlow, textFlow := hostileWorkflow(t, "json", "json", "1MB"), hostileWorkflow(t, "text", "text", "1MB")
	cases := []hostileCase{
		{"h-json-inline", "json", payload.DefaultInline, payload.DefaultInline},
		{"h-json-over-inline", "json", payload.DefaultInline + 1, payload.DefaultInline + 1},
		{"h-json-sqs", "json", offload.MaxMessageBytes + 1, offload.MaxMessageBytes + 1},
		{"h-text-inline", "text", payload.DefaultInline, payload.DefaultInline},
		{"h-text-over-inline", "text", 0, payload.DefaultInline + 1},
		{"h-text-at-limit", "text", offload.MaxMessageBytes, textFlow.Limit()},
	}
	h := startHostile(t, cases, jsonFlow, textFlow)
	tasks := h.run(cases, 3*time.Minute)
	for _, c := range cases {
		require.Equal(t, workflow.Processed, tasks[c.id].State, "%s: %s", c.id, tasks[c.id].LastError)
		h.requireAnswersKept(c.id)
	}
	t.Logf("the largest message delivered, by function: %v", h.most)
	h.requireNothingRefused()
}

// An answer that is not JSON, under its workflow's result limit but whose
// quoted form is larger (about 15 MB of control bytes, invalid UTF-8 and
// markup under a 16 MB limit: 20 MB once quoted, as the product quotes it,
// <, > and & as they are), is never left to time out: its step ends at its
// first attempt, kept whole or failed for good for its size, and nothing
// is refused to a DLQ.
func TestAnAnswerLargerOnceQuotedIsNeverLeftToTimeOut(t *testing.T) {
	cases := []hostileCase{{"h-text-over-stored", "over", 0, 20 << 20}}
	h := startHostile(t, cases, hostileWorkflow(t, "over", "text", "16MB"))
	tasks := h.run(cases, 3*time.Minute)
	id := cases[0].id
	_, recs, err := h.stack.Store.Load(context.Background(), id)
	require.NoError(t, err)
	scan := recs[0]
	require.Equal(t, "scan", scan.Name)
	raw, _ := h.sim.Answer(h.effect(id, "scan"))
	require.Less(t, len(raw), workflow.MaxResultLimit, "its answer is under the result limit as sent")
	require.Greater(t, hostile.MarshalLen(raw), workflow.MaxResultLimit, "and over it once quoted")
	require.Zero(t, scan.FailureCount, "%s's scan timed out (recovered %d times, %s): its answer of %d bytes was not kept",
		id, scan.FailureCount, scan.LastError, len(raw))
	t.Logf("%s ended %s; its scan %s after %d attempts: %s", id, tasks[id].State, scan.State, scan.Attempt, scan.LastError)
	if tasks[id].State == workflow.Processed {
		h.requireAnswersKept(id)
	} else {
		require.Contains(t, scan.LastError, "result limit", "failed for its size")
	}
	h.requireNothingRefused()
}

// hostileRun is a local stack whose services answer hostile, with the
// largest message each function was delivered.
type hostileRun struct {
	t     *testing.T
	stack *localrun.Stack
	sim   *remotesim.Simulator
	logs  *emulatortest.Logs
	mu    sync.Mutex
	most  map[string]int // the largest message delivered, by function
}

func startHostile(t *testing.T, cases []hostileCase, defs ...workflow.Definition) *hostileRun {
	t.Helper()
	sim := remotesim.New(48)
	sizes := func(wf string) map[string]int {
		out := map[string]int{}
		for _, c := range cases {
			if c.workflow == wf {
				out[c.id] = c.answer
			}
		}
		return out
	}
	sim.SetFaults("json", remotesim.Faults{Hostile: 1, OrderResultBytes: sizes("json")})
	sim.SetFaults("text", remotesim.Faults{NotJSON: 1, OrderResultBytes: merge(sizes("text"), sizes("over"))})
	srv, err := sim.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	h := &hostileRun{t: t, sim: sim, logs: &emulatortest.Logs{}, most: map[string]int{}}
	stack, err := localrun.New(context.Background(), localrun.Options{
		Endpoint: endpoint, DynamoDBEndpoint: dynamodbEndpoint, Prefix: fmt.Sprintf("hostile%d", time.Now().UnixNano()%1e6),
		Workflows: workflow.MustSet(defs...), RemoteURL: srv.URL, VisibilityTimeout: 5 * time.Second,
		SupervisorEvery: 500 * time.Millisecond, Faults: h.measure,
		Log: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	require.NoError(t, err)
	h.stack = stack
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("handler logs:\n%s", h.logs.Tail(30_000))
		}
	})
	return h
}

func merge(a, b map[string]int) map[string]int {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// measure notes each delivery's size, body and attributes, by function.
func (h *hostileRun) measure(function string, m types.Message) runner.Action {
	n := len(aws.ToString(m.Body))
	for name, a := range m.MessageAttributes {
		n += len(name) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.most[function] = max(h.most[function], n)
	return runner.Deliver
}

// run sends the cases' orders and waits for them to end.
func (h *hostileRun) run(cases []hostileCase, within time.Duration) map[string]statestore.Task {
	h.t.Helper()
	var ids, bodies []string
	for _, c := range cases {
		ids = append(ids, c.id)
		bodies = append(bodies, hostileOrder(c))
	}
	defer h.stack.Start(context.Background())()
	require.NoError(h.t, h.stack.SendOrders(context.Background(), bodies...))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	tasks, err := h.stack.WaitEnded(ctx, ids, 200*time.Millisecond, nil)
	require.NoError(h.t, err, "the orders did not all end")
	return tasks
}

// hostileOrder is c's order: its documents hostile text (raw <, > and &,
// control characters as \u escapes) making its body c.body bytes as sent.
func hostileOrder(c hostileCase) string {
	head := fmt.Sprintf(`{"orderId":%q,"workflow":%q,"customerId":"c-<&>","items":[]`, c.id, c.workflow)
	const member = `,"documents":`
	n := max(c.body-len(head)-len(member)-1, 64)
	return head + member + hostile.Quote(hostile.TextQuoted(uint64(len(c.id)), n)) + "}"
}

// effect is the ledger's effect of order id's action.
func (h *hostileRun) effect(id, action string) remotesim.Effect {
	h.t.Helper()
	for _, e := range h.sim.Ledger() {
		if e.OrderID == id && e.Action == action {
			return e
		}
	}
	h.t.Fatalf("%s's %s was never applied", id, action)
	return remotesim.Effect{}
}

// requireAnswersKept reads back each of order id's results and compares it
// with what its service answered: the same bytes if it answered JSON; the
// string it quotes if not, each byte of invalid UTF-8 a U+FFFD.
func (h *hostileRun) requireAnswersKept(id string) {
	h.t.Helper()
	ctx := context.Background()
	task, _, err := h.stack.Store.Load(ctx, id)
	require.NoError(h.t, err)
	results, err := h.stack.Store.Results(ctx, id, task.Round)
	require.NoError(h.t, err)
	require.Len(h.t, results, 2, "%s: a result of each step", id)
	for _, r := range results {
		got, err := h.stack.Deployment.Kept().Open(ctx, id, kept.Stored(r.JSON))
		require.NoError(h.t, err)
		sent, contentType := h.sim.Answer(h.effect(id, r.Name))
		if contentType == "application/json" {
			require.True(h.t, string(sent) == string(got), "%s's %s: %d bytes answered, %d kept", id, r.Name, len(sent), len(got))
			continue
		}
		var text string
		require.NoError(h.t, json.Unmarshal(got, &text), "%s's %s: an answer not JSON is kept as a string", id, r.Name)
		require.True(h.t, text == asText(sent), "%s's %s: %d bytes answered, a string of %d kept", id, r.Name, len(sent), len(text))
	}
}

// asText is b as a string can hold it: each byte of invalid UTF-8 U+FFFD.
func asText(b []byte) string {
	var s strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		s.WriteRune(r) // utf8.RuneError is U+FFFD
		b = b[size:]
	}
	return s.String()
}

// requireNothingRefused: no message in any DLQ, no send refused by SQS,
// and every message delivered within its queue's limit.
func (h *hostileRun) requireNothingRefused() {
	h.t.Helper()
	q := queue.NewSender(h.stack.Deployment.Clients.SQS)
	for _, tq := range h.stack.Topology().Queues() {
		d, err := q.Depth(context.Background(), h.stack.QueueURL(tq.DLQName))
		require.NoError(h.t, err)
		require.Zero(h.t, d.Visible+d.InFlight, "messages refused to %s", tq.DLQName)
	}
	for _, refusal := range []string{"Message must be shorter than", "Invalid characters found"} {
		require.NotContains(h.t, h.logs.String(), refusal, "a send SQS refused")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for function, n := range h.most {
		limit := message.MaxWorkBytes // a scheduler's or an agent's queue: the product's own messages
		if function == "submission" {
			limit = offload.MaxMessageBytes // the orders and events queues: SQS's
		}
		require.LessOrEqual(h.t, n, limit, "the largest message %s was delivered", function)
	}
}
