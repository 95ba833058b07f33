package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// sent records what the agent sent (its SQS side is covered by the
// integration tests; here the subject is the retry and deadline logic).
type sent struct {
	mu       sync.Mutex
	replies  []message.AgentReply
	rejected []string
	later    []time.Duration // the delays of requests sent again to wait
}

func (s *sent) SendJSON(_ context.Context, _ string, v any, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, again := v.(message.AgentRequest); again {
		s.later = append(s.later, d)
		return nil
	}
	s.replies = append(s.replies, v.(message.AgentReply))
	return nil
}

func (s *sent) Reject(_ context.Context, _, body, _, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejected = append(s.rejected, reason)
	return nil
}

// claims stands in for the state store's claim (its conditional write is
// tested against both DynamoDB engines by storetest): each request gets
// attempt 3 of its step, CompleteBy timeout after the claim, unless refused.
type claims struct {
	agent.Store // what the tests do not reach: nil
	timeout     time.Duration
	readyAgo    time.Duration // how long the step had been ready when claimed
	refuse      map[string]error
	reads       atomic.Int32 // orders read: for requests that carry none
	claimed     atomic.Int32 // claims made
	// Outcomes: stale makes every record refused as not current; recorded
	// lists the completions and failures written.
	stale    bool
	failing  atomic.Int32 // records to fail first, as the store does for a moment
	puts     atomic.Int32 // results stored
	mu       sync.Mutex
	recorded []string
	ended    []string // the attempts ended early, with why
}

func (c *claims) Abandon(_ context.Context, st statestore.Step, reason string, _ time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = append(c.ended, fmt.Sprintf("%s attempt %d: %s", st.OrderID, st.Attempt, reason))
	return nil
}

func (c *claims) record(what string) (workflow.State, error) {
	if c.stale {
		return "", statestore.ErrStale
	}
	if c.failing.Add(-1) >= 0 {
		return "", &smithy.GenericAPIError{Code: "ThrottlingException", Message: "throttled"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recorded = append(c.recorded, what)
	return workflow.Pending, nil
}

// recorder stands in for outcome.Recorder (its rules are tested in
// workflow, its writes by storetest on both engines): it records into its
// claims.
type recorder struct{ c *claims }

func (r recorder) Record(_ context.Context, _ workflow.Definition, a outcome.Attempt) (outcome.Recorded, error) {
	c := r.c
	if c.stale {
		return outcome.Recorded{Stale: true}, nil
	}
	what := fmt.Sprintf("complete %s attempt %d", a.OrderID, a.Attempt)
	if a.Refusal != "" {
		what = fmt.Sprintf("fail %s attempt %d: %s", a.OrderID, a.Attempt, a.Refusal)
	}
	st, err := c.record(what)
	return outcome.Recorded{State: st, Round: 1, Ready: []workflow.Ref{{Index: a.Ref.Index + 1}}}, err
}

func (c *claims) Inputs(_ context.Context, st statestore.Step, order kept.Value) (kept.Inputs, error) {
	return kept.Inputs{OrderID: st.OrderID, Order: order}, nil
}

func (c *claims) PutResult(context.Context, statestore.Result) error {
	if c.stale {
		return statestore.ErrStale
	}
	c.puts.Add(1)
	return nil
}

func (c *claims) Definition(context.Context, string) (workflow.Definition, error) {
	return workflow.Definition{}, statestore.ErrNotFound
}

func (c *claims) Claim(_ context.Context, cl statestore.Claim) (statestore.Step, error) {
	c.claimed.Add(1)
	if err := c.refuse[cl.OrderID]; err != nil {
		return statestore.Step{}, err
	}
	return statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: cl.Ref.Index, Undo: cl.Ref.Undo},
		Action: workflow.Action{Name: "reserve", Agent: cl.Agent}, Attempt: 3, State: workflow.Processing},
		OrderOf: statestore.OrderOf{OrderID: cl.OrderID, Workflow: "order"},
		AtWork:  statestore.AtWork{Round: 1, LockedBy: cl.Owner, ClaimedAt: cl.Now, CompleteBy: cl.Now.Add(c.timeout)},
		Wait:    statestore.Wait{ReadyAt: cl.Now.Add(-c.readyAgo)}}, nil
}

func (c *claims) Accept(context.Context, statestore.Step, time.Time) error { return nil }

func (c *claims) Order(_ context.Context, orderID string) (string, error) {
	c.reads.Add(1)
	return `{"orderId":"` + orderID + `","from":"orders table"}`, nil
}

type fixture struct {
	url    string // the simulator's
	h      *agent.Handler
	sim    *remotesim.Simulator
	out    *sent
	claims *claims
	tally  *metrics.Tally
}

func newFixture(t *testing.T, f remotesim.Faults) *fixture {
	return newFixtureOf(t, f, workflow.Orders(workflow.Settings{}))
}

// newFixtureOf is a fixture whose agent runs workflow d.
func newFixtureOf(t *testing.T, f remotesim.Faults, d workflow.Definition) *fixture {
	sim := remotesim.New(7)
	sim.SetFaults("", f)
	srv, err := sim.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	out, tally := &sent{}, metrics.NewTally()
	c := &claims{timeout: 10 * time.Second, refuse: map[string]error{}}
	fx := &fixture{url: srv.URL, sim: sim, out: out, claims: c, tally: tally}
	fx.h = fx.handler(d, &resilience.Breaker{Threshold: 100, Cooldown: time.Second})
	return fx
}

// handler is an Agent of workflow d on the fixture's service, claims and
// queues, with breaker b.
func (f *fixture) handler(d workflow.Definition, b *resilience.Breaker) *agent.Handler {
	return agent.New(agent.Config{Workflows: workflow.MustSet(d), Name: "inventory", InstanceID: "agent-inventory/test",
		Backoff: resilience.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond}, CallTimeout: time.Second},
		agent.Deps{Remote: &agent.HTTPRemote{Endpoint: f.url + "/v1/services/inventory", Service: "inventory", Client: http.DefaultClient},
			Breaker: b, Store: f.claims, Outcomes: recorder{f.claims}, Send: f.out,
			Metrics: metrics.New(f.tally, "agent"), Log: slog.New(slog.DiscardHandler)})
}

// with is an Agent of workflow d on remote and store (the fixture's
// recorder and queues), its payload budget b (nil: none).
func (f *fixture) with(d workflow.Definition, remote agent.Remote, store agent.Store, b *kept.Budget) *agent.Handler {
	return agent.New(agent.Config{Workflows: workflow.MustSet(d), Name: "inventory", InstanceID: "agent-inventory/test", CallTimeout: 10 * time.Second},
		agent.Deps{Remote: remote, Breaker: &resilience.Breaker{Threshold: 100, Cooldown: time.Second}, Store: store,
			Outcomes: recorder{f.claims}, Send: f.out, Metrics: metrics.New(f.tally, "agent"), Log: slog.New(slog.DiscardHandler), Budget: b})
}

// calling is an Agent of d whose service is srv, over HTTP.
func (f *fixture) calling(d workflow.Definition, srv *httptest.Server) *agent.Handler {
	return f.with(d, &agent.HTTPRemote{Endpoint: srv.URL, Service: "inventory", Client: srv.Client()}, f.claims, nil)
}

// request asks for step 0 of the order, carrying the order.
func request(orderID string) events.SQSEvent {
	b, _ := json.Marshal(message.AgentRequest{OrderID: orderID, Step: 0, StepName: "reserve",
		Payload: json.RawMessage(`{"orderId":"` + orderID + `"}`)})
	return events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-" + orderID, Body: string(b)}}}
}

func TestAgentRetriesTransientFaultsThenReplies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{TransientRate: 0.6})
	resp, err := f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Len(t, f.out.replies, 1)
	r := f.out.replies[0]
	require.True(t, r.OK)
	require.Equal(t, 3, r.Attempt, "the reply carries the attempt it answers")
	require.EqualValues(t, f.sim.Stats().Transient, f.tally.Sum(metrics.AgentRetries))
	require.Len(t, f.sim.Ledger(), 1)
	require.Equal(t, "o-1/reserve", f.sim.Ledger()[0].Key)
}

// The Agent records the outcome, and with it the order's next move, before
// it replies: the reply says what was made ready, for the Scheduler to start.
func TestAgentRecordsTheOutcomeBeforeItReplies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	_, err := f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Equal(t, []string{"complete o-1 attempt 3"}, f.claims.recorded)
	require.Len(t, f.out.replies, 1)
	r := f.out.replies[0]
	require.True(t, r.Recorded)
	require.Equal(t, "Pending", r.State)
	require.Equal(t, []message.Start{{Step: 1}}, r.Ready, "the next step, for the Scheduler to start")
}

// An attempt that is no longer current (the Supervisor recovered it and
// another was claimed) records nothing and replies nothing: fencing.
func TestAgentRepliesNothingForAnAttemptNoLongerCurrent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	f.claims.stale = true
	resp, err := f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Empty(t, f.out.replies)
	require.EqualValues(t, 1, f.tally.Sum(metrics.StaleReplies))
	require.Len(t, f.sim.Ledger(), 1, "the service was called: its idempotency key keeps a repeat from applying twice")
}

func TestAgentReadsTheOrderWhenTheRequestCarriesNone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	b, _ := json.Marshal(message.AgentRequest{OrderID: "o-9", Step: 0, StepName: "reserve"}) // as the Supervisor re-sends it
	_, err := f.h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: string(b)}}})
	require.NoError(t, err)
	require.EqualValues(t, 1, f.claims.reads.Load())
	require.Len(t, f.out.replies, 1)
	require.JSONEq(t, `{"orderId":"o-9","from":"orders table"}`, string(f.out.replies[0].Payload),
		"the reply carries the order on, for the next request")
	_, err = f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.EqualValues(t, 1, f.claims.reads.Load(), "a request with the order needs no read")
}

func TestAgentRepliesPermanentFaultAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{PermanentOrders: []string{"o-1"}})
	_, err := f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Len(t, f.out.replies, 1)
	require.False(t, f.out.replies[0].OK)
	require.Contains(t, f.out.replies[0].Error, "HTTP 422")
	require.Equal(t, 1, f.sim.Stats().Calls, "not retried")
	require.Len(t, f.claims.recorded, 1)
	require.Contains(t, f.claims.recorded[0], "fail o-1 attempt 3: ", "recorded as a refusal before the reply")
}

// A refusal the store fails to record for a moment is recorded on a try
// again, its service called once: left to SQS, the attempt would run out
// as one that may have run. One the store fails every time is left to it.
func TestAnOutcomeTheStoreFailsToRecordIsTriedAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{PermanentOrders: []string{"o-1", "o-2"}})
	f.claims.failing.Store(2)
	_, err := f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Equal(t, 1, f.sim.Stats().Calls, "called once")
	require.Len(t, f.claims.recorded, 1)
	require.Contains(t, f.claims.recorded[0], "fail o-1 attempt 3: ", "recorded on the third try")
	require.Len(t, f.out.replies, 1)

	// A result stored once: a try again records the outcome, not the
	// result again.
	f.claims.failing.Store(2)
	_, err = f.h.Handle(context.Background(), request("o-3"))
	require.NoError(t, err)
	require.Len(t, f.claims.recorded, 2)
	require.Contains(t, f.claims.recorded[1], "complete o-3 attempt 3")
	require.Equal(t, int32(1), f.claims.puts.Load(), "its result stored once")

	f.claims.failing.Store(100)
	resp, err := f.h.Handle(context.Background(), request("o-2"))
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 1, "after its tries, left to SQS")
	require.Equal(t, int32(100-5), f.claims.failing.Load(), "tried five times")
	require.Len(t, f.claims.recorded, 2, "nothing more recorded")
}

// An answer over the largest result limit is oversized, even when the
// workflow allows the largest: the remote reads one byte past it, so an
// answer is never cut to a size that passes (broken JSON kept as done). A
// deployment without a payload bucket keeps an answer up to the inline
// maximum, and refuses a larger one, naming the setting.
func TestAnAnswerOverTheLargestLimitIsOversized(t *testing.T) {
	t.Parallel()
	d := workflow.Orders(workflow.Settings{})
	d.ResultLimit = workflow.MaxResultLimit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 60 << 10
		switch key := r.Header.Get("Idempotency-Key"); {
		case strings.Contains(key, "o-big"):
			n = workflow.MaxResultLimit + 100<<10
		case strings.Contains(key, "o-mid"):
			n = 100 << 10
		}
		fmt.Fprintf(w, `{"pad":%q}`, strings.Repeat("x", n))
	}))
	t.Cleanup(srv.Close)
	f := newFixtureOf(t, remotesim.Faults{}, d)
	h := f.calling(d, srv)
	_, err := h.Handle(context.Background(), request("o-big"))
	require.NoError(t, err)
	require.Len(t, f.claims.recorded, 1)
	require.Contains(t, f.claims.recorded[0], "fail o-big attempt 3: inventory answered more than 16777216 bytes, over workflow order's 16777216-byte result limit")

	_, err = h.Handle(context.Background(), request("o-mid"))
	require.NoError(t, err)
	require.Contains(t, f.claims.recorded[1], "fail o-mid attempt 3: inventory answered 102410 bytes, over the 65536 a deployment without a payload bucket keeps (payloadBucket)")

	_, err = h.Handle(context.Background(), request("o-2"))
	require.NoError(t, err)
	require.Equal(t, "complete o-2 attempt 3", f.claims.recorded[2], "an answer under the limit is kept")
}

// An answer is read up to its workflow's result limit and a byte, and no
// further: a service that answers 4 MB where its workflow keeps 4 KB is
// refused without the Agent holding the 4 MB (ten such calls at once would
// take a 128 MB Agent past its memory).
func TestAnAnswerIsReadNoFurtherThanItsWorkflowsLimit(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(`"` + strings.Repeat("x", 64<<10-2) + `"`)
		for range 64 { // 4 MB, as long as the Agent reads it
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	f := newFixture(t, remotesim.Faults{})
	d := workflow.Orders(workflow.Settings{})
	h := f.calling(d, srv)
	_, err := h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Len(t, f.claims.recorded, 1)
	require.Contains(t, f.claims.recorded[0], fmt.Sprintf("fail o-1 attempt 3: inventory answered more than %d bytes, over workflow order's %d-byte result limit",
		workflow.DefaultResultLimit, workflow.DefaultResultLimit))
}

func TestAgentSendsNothingPastCompleteBy(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{StallFirst: 1000})
	f.claims.timeout = 300 * time.Millisecond
	start := time.Now()
	resp, err := f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures, "done with the message: the supervisor takes over")
	require.Empty(t, f.out.replies, "not even an error")
	require.Empty(t, f.claims.recorded, "nothing recorded: the Supervisor recovers the attempt")
	require.Less(t, time.Since(start), 5*time.Second, "bounded by CompleteBy")
	require.EqualValues(t, 1, f.tally.Sum(metrics.AgentDeadlineExpired))
	require.Len(t, f.claims.ended, 1, "its service answered (its call timed out): the attempt ends now, saying so")
	require.Contains(t, f.claims.ended[0], "its service last answered: ")
}

// A try cut short by its attempt's own deadline (the attempt's time taken
// by its rate turn or its line, the service silent so far) tells nothing of
// the service: it does not count toward opening the breaker, or an instance
// whose calls wait long for their turns opens it on its own; a try given a
// whole call timeout that the service lets pass counts.
func TestATryCutByItsAttemptsDeadlineDoesNotOpenTheBreaker(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{StallFirst: 1000}) // the service never answers
	b := &resilience.Breaker{Threshold: 1, Cooldown: time.Hour}
	h := f.handler(workflow.Orders(workflow.Settings{}), b)
	f.claims.timeout = 300 * time.Millisecond // less than a call timeout (1 s)
	_, err := h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Equal(t, resilience.Closed, b.State(), "its own deadline, not the service, ended the try")
	f.claims.timeout = 1500 * time.Millisecond
	_, err = h.Handle(context.Background(), request("o-2"))
	require.NoError(t, err)
	require.Equal(t, resilience.Open, b.State(), "a whole call timeout without an answer is the service's")
}

// A request that finds its instance's breaker open waits before its claim:
// sent again for when the breaker may let a call through, with nothing
// claimed (no attempt, no write), so no key's slot or rate turn is taken
// for a call that cannot be made.
func TestARequestWaitsOutAnOpenBreakerBeforeItsClaim(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	b := &resilience.Breaker{Threshold: 1, Cooldown: time.Hour}
	require.NoError(t, b.Allow())
	b.Record(true) // open for an hour
	h := f.handler(workflow.Orders(workflow.Settings{}), b)
	resp, err := h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Zero(t, f.claims.claimed.Load(), "nothing claimed")
	require.Zero(t, f.sim.Stats().Calls)
	require.Empty(t, f.out.replies)
	require.Len(t, f.out.later, 1, "its request sent again")
	require.Equal(t, agent.MaxDelay, f.out.later[0], "for when the breaker may let a call through (at most SQS's longest delay)")
}

func TestAgentRunsNothingItCannotClaim(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	f.claims.refuse["o-1"] = statestore.ErrNotClaimable
	resp, err := f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures, "a duplicate or late request is done with")
	require.Empty(t, f.out.replies)
	require.Zero(t, f.sim.Stats().Calls, "the remote is not called")
	require.EqualValues(t, 1, f.tally.Sum(metrics.NothingToClaim))
}

func TestAgentRejectsARequestForAnotherAgent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	f.claims.refuse["o-1"] = fmt.Errorf("o-1/STEP#000 is \"payment\"'s: %w", statestore.ErrWrongAgent)
	_, err := f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Len(t, f.out.rejected, 1, "to the DLQ, with the reason: a routing error is an operator's")
	require.Contains(t, f.out.rejected[0], "another agent")
	require.Zero(t, f.sim.Stats().Calls)
}

func TestAgentRetriesWhenTheClaimCannotBeWritten(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	f.claims.refuse["o-1"] = errors.New("throttled")
	resp, err := f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 1, "SQS delivers it again")
	require.Zero(t, f.sim.Stats().Calls)
}

func TestAgentReportsTheQueueWaitOfWhatItClaims(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	f.claims.readyAgo = 4 * time.Second
	_, err := f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.EqualValues(t, 4000, f.tally.Sum(metrics.QueueWait), "ready to claimed, in milliseconds")
	lines := f.tally.Lines(metrics.QueueWait)
	require.Len(t, lines, 1, "one document for the invocation")
	require.Contains(t, lines[0], metrics.StepsClaimed, "with the invocation's other metrics")
}

func TestAgentWaitsOutAnOpenBreaker(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{Outages: []remotesim.Window{{From: time.Now(), To: time.Now().Add(300 * time.Millisecond)}}})
	_, err := f.h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Len(t, f.out.replies, 1)
	require.True(t, f.out.replies[0].OK, "succeeds once the outage ends")
}

func TestAgentRejectsAMalformedRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	ev := request("o-1")
	ev.Records = append(ev.Records, events.SQSMessage{MessageId: "bad", Body: `{"orderId":"o-2"}`})
	resp, err := f.h.Handle(context.Background(), ev)
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Len(t, f.out.rejected, 1)
	require.Contains(t, f.out.rejected[0], "stepName")
	require.Len(t, f.out.replies, 1, "the good request in the batch was served")
	require.EqualValues(t, 1, f.tally.Sum(metrics.MalformedMessages))
}

// answers is a service that answers every call with the same bytes.
type answers []byte

func (a answers) Apply(context.Context, string, string, []byte) ([]byte, error) { return a, nil }

// A service's answer with a member twice would make the reply carrying it
// refused by the Scheduler (one meaning per message): it is kept as text.
func TestAgentKeepsAnAnswerWithTwoMeaningsAsText(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	h := agent.New(agent.Config{Workflows: workflow.MustSet(workflow.Orders(workflow.Settings{})), Name: "inventory", InstanceID: "agent-inventory/test"},
		agent.Deps{Remote: answers(`{"id":"ch_1","id":"ch_2"}`), Breaker: &resilience.Breaker{Threshold: 100, Cooldown: time.Second},
			Store: f.claims, Outcomes: recorder{f.claims}, Send: f.out, Metrics: metrics.New(f.tally, "agent"), Log: slog.New(slog.DiscardHandler)})
	_, err := h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Len(t, f.out.replies, 1)
	require.JSONEq(t, `"{\"id\":\"ch_1\",\"id\":\"ch_2\"}"`, string(f.out.replies[0].Result))
	b, err := json.Marshal(f.out.replies[0])
	require.NoError(t, err)
	_, err = message.DecodeSchedulerMessage(string(b))
	require.NoError(t, err, "the Scheduler takes the reply")
}

// abandons records the attempts an Agent ended early.
type abandons struct {
	*claims
	mu    sync.Mutex
	ended []string
}

func (a *abandons) Abandon(_ context.Context, st statestore.Step, reason string, _ time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ended = append(a.ended, fmt.Sprintf("%s attempt %d: %s", st.OrderID, st.Attempt, reason))
	return nil
}

// An input expression that runs out of time calls nothing and records
// nothing: the attempt is ended for the Supervisor to recover and try again
// (a starved CPU is no fault of the step). One that fails is refused at once.
func TestAnInputOutOfTimeIsTriedAgainAndAFailingOneRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	d := workflow.Orders(workflow.Settings{})
	d.Steps[0].Input = `if .order.orderId == "o-loop" then (def f: f; f) else error("no \(.order.orderId)") end`
	store := &abandons{claims: f.claims}
	h := agent.New(agent.Config{Workflows: workflow.MustSet(d), Name: "inventory", InstanceID: "agent-inventory/test"},
		agent.Deps{Remote: &agent.HTTPRemote{Endpoint: f.url + "/v1/services/inventory", Service: "inventory", Client: http.DefaultClient},
			Breaker: &resilience.Breaker{Threshold: 100, Cooldown: time.Second}, Store: store, Outcomes: recorder{f.claims}, Send: f.out,
			Metrics: metrics.New(f.tally, "agent"), Log: slog.New(slog.DiscardHandler)})
	resp, err := h.Handle(context.Background(), request("o-loop"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Empty(t, f.claims.recorded, "nothing recorded")
	// Out of time, or stopped by what the process allocated meanwhile
	// (the other tests of this package run beside it): tried again.
	require.Len(t, store.ended, 1)
	require.Regexp(t, `^o-loop attempt 3: reserve-inventory's input: (the expression ran out of time \(1s\)|it \(or its process meanwhile\) allocated over [0-9]+ MB: tried again)$`,
		store.ended[0])
	require.Zero(t, f.sim.Stats().Calls, "its service was not called")

	_, err = h.Handle(context.Background(), request("o-bad"))
	require.NoError(t, err)
	require.Equal(t, []string{"fail o-bad attempt 3: reserve-inventory's input: error: no o-bad"}, f.claims.recorded, "refused")
	require.Zero(t, f.sim.Stats().Calls)
}

// An async step whose service never takes the call before the Agent's run
// ends: no callback can come, so the Agent ends the attempt at once rather
// than leaving it to hold the step for the whole async wait.
func TestAgentAbandonsAnAsyncAttemptItsServiceNeverAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{TransientRate: 1})
	f.claims.timeout = time.Hour // the async wait: its CompleteBy is far
	async := workflow.Orders(workflow.Settings{})
	async.Steps[0].Async = true
	store := &abandons{claims: f.claims}
	h := agent.New(agent.Config{Workflows: workflow.MustSet(async), Name: "inventory", InstanceID: "agent-inventory/test",
		Backoff: resilience.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond}, CallTimeout: time.Second,
		Margin: 50 * time.Millisecond},
		agent.Deps{Remote: &agent.HTTPRemote{Endpoint: f.url + "/v1/services/inventory", Service: "inventory", Client: http.DefaultClient},
			Breaker: &resilience.Breaker{Threshold: 100, Cooldown: time.Second}, Store: store, Outcomes: recorder{f.claims}, Send: f.out,
			Metrics: metrics.New(f.tally, "agent"), Log: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond) // the function's own time
	defer cancel()
	resp, err := h.Handle(ctx, request("o-1"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Empty(t, f.out.replies, "nothing recorded, nothing replied")
	require.Len(t, store.ended, 1)
	require.Contains(t, store.ended[0], "o-1 attempt 3: its service did not accept the call")
}

// An attempt whose service answered only transient faults until its
// CompleteBy writes nothing (the Supervisor recovers it), and its
// "attempt abandoned" line says what the service last answered: the
// Supervisor's give-up reason points to that line.
func TestAnAttemptOutOfTimeLogsItsServicesLastAnswer(t *testing.T) {
	t.Parallel()
	d := workflow.Orders(workflow.Settings{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	f, log := outOfTime(t, d, srv)
	require.Empty(t, f.claims.recorded, "nothing written: the Supervisor recovers the attempt")
	require.Contains(t, log.String(), `msg="attempt abandoned; no reply sent" order_id=o-1 attempt=3`)
	require.Contains(t, log.String(), "CompleteBy passed; its service last answered: inventory answered HTTP 503 (transient): down for maintenance")
}

// A try cut short by its own time (a slow answer, a starved machine) does
// not hide what the service answered before it: the attempt's line says
// the 503, not the timeout.
func TestATryOutOfTimeKeepsTheServicesLastAnswer(t *testing.T) {
	t.Parallel()
	d := workflow.Orders(workflow.Settings{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body) // read whole, the server sees the caller go away
		select {                           // then no answer in time
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	_, log := outOfTime(t, d, srv)
	require.GreaterOrEqual(t, calls.Load(), int32(2), "a second try, cut short")
	require.Contains(t, log.String(), "CompleteBy passed; its service last answered: inventory answered HTTP 503 (transient): down for maintenance")
}

// outOfTime runs one request of order o-1 of d through an inventory Agent
// calling srv, its claims' CompleteBy 300 ms out: the fixture and the
// Agent's log.
func outOfTime(t *testing.T, d workflow.Definition, srv *httptest.Server) (*fixture, *bytes.Buffer) {
	t.Helper()
	f := newFixtureOf(t, remotesim.Faults{}, d)
	f.claims.timeout = 300 * time.Millisecond
	var log bytes.Buffer
	h := agent.New(agent.Config{Workflows: workflow.MustSet(d), Name: "inventory", InstanceID: "agent-inventory/test"},
		agent.Deps{Remote: &agent.HTTPRemote{Endpoint: srv.URL, Service: "inventory", Client: srv.Client()},
			Breaker: &resilience.Breaker{Threshold: 100, Cooldown: time.Second}, Store: f.claims, Outcomes: recorder{f.claims}, Send: f.out,
			Metrics: metrics.New(f.tally, "agent"), Log: slog.New(slog.NewTextHandler(&log, nil))})
	_, err := h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	return f, &log
}

// heavyDoc is a store whose step's document weighs 40 MB: its order and a
// result kept in the payload bucket, which the Agent's boundary reserves
// of its budget before it would read it back.
type heavyDoc struct{ *claims }

func (heavyDoc) Inputs(_ context.Context, st statestore.Step, order kept.Value) (kept.Inputs, error) {
	check := payload.Check(payload.Ref{Bucket: "b", Key: payload.OrderPrefix(st.OrderID) + "results/s0-r1/00",
		Bytes: 40<<20 - int(order.Weight()), SHA256: "00"}, nil)
	return kept.Inputs{OrderID: st.OrderID, Order: order, Results: []kept.Part{{Name: "s0", Value: kept.Stored(check)}}}, nil
}

// A step whose document weighs more than its Agent reads for one call (a
// quarter of its memory, at least 33 MB) is refused for good with the
// reason, its service never called: read, it would take the function past
// its memory, and every try again the same.
func TestADocumentOverTheAgentsBudgetIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	store := heavyDoc{f.claims}
	h := f.with(workflow.Orders(workflow.Settings{}), &agent.HTTPRemote{Endpoint: f.url + "/v1/services/inventory", Service: "inventory",
		Client: http.DefaultClient}, store, kept.BudgetFor(128))
	resp, err := h.Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Len(t, f.claims.recorded, 1)
	require.Contains(t, f.claims.recorded[0], "fail o-1 attempt 3: reserve's input: its document (the order and the results before it) is 41943040 bytes, over the 34603008 its agent reads")
	require.Zero(t, f.sim.Stats().Calls, "its service never called")
}

// A service that answers with the product's own form (a claim check, sealed
// data) is refused: kept, it would be read back (or opened) for the next
// step as if the product had made it, another order's object perhaps.
func TestAnAnswerInTheProductsOwnFormIsRefused(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{
		`{"$sasPayload":{"bucket":"b","key":"orders/other/order/00","bytes":9,"sha256":"00"}}`,
		`{"$sasSealed":{"key":"a2V5","iv":"aXY=","data":"ZGF0YQ=="}}`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, answer) }))
		t.Cleanup(srv.Close)
		f := newFixture(t, remotesim.Faults{})
		d := workflow.Orders(workflow.Settings{})
		h := f.calling(d, srv)
		_, err := h.Handle(context.Background(), request("o-1"))
		require.NoError(t, err)
		require.Len(t, f.claims.recorded, 1)
		require.Contains(t, f.claims.recorded[0], "fail o-1 attempt 3: inventory answered with the product's own form", answer)
	}
}

// deniedDoc is a store whose step's document cannot be read: its reads
// answer err.
type deniedDoc struct {
	*claims
	err error
}

func (d deniedDoc) Inputs(context.Context, statestore.Step, kept.Value) (kept.Inputs, error) {
	return kept.Inputs{}, d.err
}

// A step whose input the function may not read (the bucket's or the key's
// permission missing, the key disabled) fails for good with the reason,
// which alerts its operator, its service never called: given back, it
// would come back for ever, nothing counted.
func TestAnInputThatCannotBeReadForGoodIsRefused(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"AccessDenied", "AccessDeniedException", "DisabledException", "KMSInvalidStateException"} {
		f := newFixture(t, remotesim.Faults{})
		store := deniedDoc{f.claims, fmt.Errorf("read the order: %w", &smithy.GenericAPIError{Code: code, Message: "no"})}
		h := f.with(workflow.Orders(workflow.Settings{}), &agent.HTTPRemote{Endpoint: f.url + "/v1/services/inventory", Service: "inventory",
			Client: http.DefaultClient}, store, nil)
		_, err := h.Handle(context.Background(), request("o-1"))
		require.NoError(t, err)
		require.Len(t, f.claims.recorded, 1, code)
		require.Contains(t, f.claims.recorded[0], "fail o-1 attempt 3: reserve's input: read the order: api error "+code, code)
		require.Zero(t, f.sim.Stats().Calls, code)
	}
}

// A refusal quotes at most message.MaxReasonQuote bytes of what its service
// answered: a 300 KB answer (a workflow that keeps 16 MB results reads it
// whole) would make a reply over what the Scheduler takes, and an alert
// over what SNS does.
func TestARefusalQuotesItsServicesAnswerWithinItsBound(t *testing.T) {
	t.Parallel()
	d := workflow.Orders(workflow.Settings{})
	d.ResultLimit = workflow.MaxResultLimit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"why":"declined","echo":%q}`, strings.Repeat(`"é`, 150<<10))
	}))
	t.Cleanup(srv.Close)
	f := newFixtureOf(t, remotesim.Faults{}, d)
	_, err := f.calling(d, srv).Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Len(t, f.out.replies, 1)
	reply := f.out.replies[0]
	require.False(t, reply.OK)
	require.Contains(t, reply.Error, `{"why":"declined"`, "the answer's start is quoted")
	require.LessOrEqual(t, len(reply.Error), agent.MaxRefusalBytes)
	require.True(t, strings.HasSuffix(reply.Error, "…") && utf8.ValidString(reply.Error), "cut on a character, and says so")
	b, err := json.Marshal(reply)
	require.NoError(t, err)
	_, err = message.DecodeSchedulerMessage(string(b))
	require.NoError(t, err, "the reply is one the Scheduler takes")
}

// What the service of a sealed order answers is the order's data: a
// transient answer, a refusal, a Retry-After's body are not quoted by the
// reasons the Agent logs, records and replies in clear (their length is).
func TestWhatASealedOrdersServiceAnswersIsNotQuoted(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-4111-1111"
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch calls.Add(1) {
		case 1:
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
		fmt.Fprintf(w, `{"echo":%q}`, secret)
	}))
	t.Cleanup(srv.Close)
	var logs bytes.Buffer
	sealer := seal.New(fixedKMS{}, "key")
	f := newFixture(t, remotesim.Faults{})
	d := workflow.Orders(workflow.Settings{})
	h := agent.New(agent.Config{Workflows: workflow.MustSet(d), Name: "inventory", InstanceID: "agent-inventory/test", CallTimeout: 10 * time.Second,
		Backoff: resilience.Backoff{Base: time.Millisecond, Max: time.Millisecond}},
		agent.Deps{Remote: &agent.HTTPRemote{Endpoint: srv.URL, Service: "inventory", Client: srv.Client()}, Kept: kept.New(nil, sealer),
			Breaker: &resilience.Breaker{Threshold: 100, Cooldown: time.Second}, Store: f.claims, Outcomes: recorder{f.claims}, Send: f.out,
			Metrics: metrics.New(f.tally, "agent"), Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	key, err := sealer.NewKey(context.Background(), "o-1")
	require.NoError(t, err)
	sealed, err := key.Seal([]byte(`{"orderId":"o-1"}`), map[string]string{"orderId": "o-1"})
	require.NoError(t, err)
	b, _ := json.Marshal(message.AgentRequest{OrderID: "o-1", Step: 0, StepName: "reserve", Payload: sealed})
	_, err = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: string(b)}}})
	require.NoError(t, err)
	require.EqualValues(t, 2, calls.Load(), "a transient answer, then a refusal")
	require.Len(t, f.out.replies, 1)
	require.Contains(t, f.out.replies[0].Error, "HTTP 422")
	require.Contains(t, f.out.replies[0].Error, "not quoted: the order's data is sealed")
	require.Contains(t, logs.String(), "HTTP 502 (transient): (27 bytes, not quoted", "the transient answer's log line")
	for _, where := range append([]string{logs.String(), f.out.replies[0].Error}, f.claims.recorded...) {
		require.NotContains(t, where, secret)
	}

	// Of an order not sealed, the answer is quoted.
	_, err = h.Handle(context.Background(), request("o-2"))
	require.NoError(t, err)
	require.Contains(t, f.out.replies[1].Error, secret)
}

// readCount is the fixture's store, counting the documents read.
type readCount struct {
	*claims
	n atomic.Int32
}

func (r *readCount) Inputs(ctx context.Context, st statestore.Step, order kept.Value) (kept.Inputs, error) {
	r.n.Add(1)
	return r.claims.Inputs(ctx, st, order)
}

// A function with no data key at all (its configuration lags its
// deployment's, which gained its key and sealData a moment ago) meets a
// sealed order: the attempt is not refused, and nothing is called, for an
// instance that has the key to run it; one whose key cannot open the order
// refuses it for good.
func TestAFunctionWithNoKeyGivesASealedOrderBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t, remotesim.Faults{})
	remote := &agent.HTTPRemote{Endpoint: f.url + "/v1/services/inventory", Service: "inventory", Client: http.DefaultClient}
	noKey := deniedDoc{f.claims, fmt.Errorf("read the order: %w", &seal.Error{OrderID: "o-1", Reason: "no key", NoKey: true})}
	resp, err := f.with(workflow.Orders(workflow.Settings{}), remote, noKey, nil).Handle(context.Background(), request("o-1"))
	require.NoError(t, err)
	require.Empty(t, f.claims.recorded, "not refused")
	require.Len(t, resp.BatchItemFailures, 1, "left to SQS to deliver again (the fixture's store takes no give-back)")
	require.Zero(t, f.sim.Stats().Calls)

	// A sealed order sent to an Agent with no sealer: known sealed from
	// its stored form, nothing is read (its objects may be 16 MB).
	sealed, _ := json.Marshal(message.AgentRequest{OrderID: "o-3", Step: 0, StepName: "reserve",
		Payload: json.RawMessage(`{"$sasSealed":{"key":"a2V5","iv":"aXY=","data":"ZGF0YQ=="}}`)})
	reads := &readCount{claims: f.claims}
	resp, err = f.with(workflow.Orders(workflow.Settings{}), remote, reads, nil).Handle(context.Background(),
		events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-3", Body: string(sealed)}}})
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 1)
	require.Zero(t, reads.n.Load(), "its document not read")
	require.Empty(t, f.claims.recorded)
	require.Zero(t, f.sim.Stats().Calls)

	altered := deniedDoc{f.claims, fmt.Errorf("read the order: %w", &seal.Error{OrderID: "o-2", Reason: "it does not open"})}
	_, err = f.with(workflow.Orders(workflow.Settings{}), remote, altered, nil).Handle(context.Background(), request("o-2"))
	require.NoError(t, err)
	require.Equal(t, []string{"fail o-2 attempt 3: reserve's input: read the order: sealed data of o-2: it does not open"}, f.claims.recorded)
	require.Zero(t, f.sim.Stats().Calls)
}
