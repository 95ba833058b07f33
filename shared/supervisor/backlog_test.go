package supervisor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// depthsOf answers each queue with its depth (none: empty).
type depthsOf map[string]queue.Depth

func (d depthsOf) SendJSON(context.Context, string, any, time.Duration) error { return nil }
func (d depthsOf) Depth(_ context.Context, u string) (queue.Depth, error)     { return d[u], nil }

// A ready step's wait is explained by a backlog in any queue its start may
// wait in: its agent's request queue (a re-sent request goes there too), or
// the response queue of the agent whose outcome made it ready; a wait's or a
// timer's start waits in the scheduler queue. A claimed step's is never:
// its Agent records the outcome before replying, so a busy response queue
// holds no outcome of it.
func TestABacklogExplainsOnlyAReadyStepsWait(t *testing.T) {
	t.Parallel()
	s := New(Config{BacklogDepth: 10, SchedulerQueueURL: "q/scheduler", AgentQueues: map[string]AgentQueues{
		"a": {Requests: "q/a-requests", Responses: "q/a-responses"},
		"b": {Requests: "q/b-requests", Responses: "q/b-responses"}}}, Deps{})
	ready := statestore.Step{Rec: workflow.Rec{Action: workflow.Action{Agent: "b"}, State: workflow.Pending}, Wait: statestore.Wait{ReadiedBy: "a"}}
	first := statestore.Step{Rec: workflow.Rec{Action: workflow.Action{Agent: "a"}, State: workflow.Pending}} // Submission started it
	claimed := statestore.Step{Rec: workflow.Rec{Action: workflow.Action{Agent: "b"}, State: workflow.Processing}}
	deep := queue.Depth{Visible: 10}
	for _, c := range []struct {
		name      string
		st        statestore.Step
		q         depthsOf
		explained bool
	}{
		{"ready, every queue below the depth", ready, depthsOf{"q/a-responses": {Visible: 9, InFlight: 50}}, false},
		{"ready, the scheduler queue deep: no start of its waits there", ready, depthsOf{"q/scheduler": deep}, false},
		{"a timer ready, the scheduler queue deep", statestore.Step{Rec: workflow.Rec{Kind: workflow.KindTimer, State: workflow.Pending}},
			depthsOf{"q/scheduler": deep}, true},
		{"ready, its request queue deep", ready, depthsOf{"q/b-requests": deep}, true},
		{"ready, the readying agent's replies deep", ready, depthsOf{"q/a-responses": deep}, true},
		{"ready, another agent's replies deep", ready, depthsOf{"q/b-responses": deep}, false},
		{"first step, no reply carries it", first, depthsOf{"q/a-responses": deep}, false},
		{"claimed, every queue deep", claimed, depthsOf{"q/scheduler": deep, "q/b-requests": deep, "q/b-responses": deep,
			"q/a-responses": deep}, false},
	} {
		why, ends := s.backlog(context.Background(), &depths{queues: c.q}, c.st, s.startQueues(c.st)...)
		require.Equal(t, c.explained, why != "", "%s: %q", c.name, why)
		require.Zero(t, ends, "%s: a queue's backlog does not end by itself", c.name)
	}
}

// controls answers each agent's flow control (none: running).
type controls map[string]flow.Control

func (c controls) Control(_ context.Context, agent string) (flow.Control, error) {
	return c[agent], nil
}

// Delayed messages explain a ready step's wait only on its own agent's
// request queue and only while that agent holds its calls (paused, or
// slowed by its service): its Agent sends such a request again delayed and
// writes nothing. Any other delayed message (another order's retry after
// its back-off) never holds a lost message's re-send back: in a chaos run, a
// lost message waited minutes behind other orders' retries.
func TestOnlyAnAgentThatHoldsItsCallsExplainsAWaitByDelayedMessages(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ready := statestore.Step{Rec: workflow.Rec{Action: workflow.Action{Agent: "b"}, State: workflow.Pending}, Wait: statestore.Wait{ReadiedBy: "a"}}
	delayed := depthsOf{"q/b-requests": {Delayed: 3}}
	for _, c := range []struct {
		name      string
		q         depthsOf
		flow      FlowControl
		explained bool
		ends      time.Duration // how soon the hold may end (the next look's bound)
	}{
		{"delayed requests, its agent running (others' retries)", delayed, controls{}, false, 0},
		{"delayed requests, no flow control read", delayed, nil, false, 0},
		{"delayed requests, its agent paused", delayed, controls{"b": {Paused: true}}, true, flow.PausedWait},
		{"delayed requests, its agent slowed until later", delayed, controls{"b": {SlowUntil: now.Add(time.Minute)}}, true,
			time.Minute + time.Second},
		{"delayed requests, its agent's slow-down over", delayed, controls{"b": {SlowUntil: now.Add(-time.Second)}}, false, 0},
		{"delayed requests, another agent paused", delayed, controls{"a": {Paused: true}}, false, 0},
		{"delayed replies of the readying agent, it paused", depthsOf{"q/a-responses": {Delayed: 3}}, controls{"a": {Paused: true}}, false, 0},
		{"its agent paused, nothing delayed", depthsOf{}, controls{"b": {Paused: true}}, false, 0},
		{"its agent paused, its request queue deep too", depthsOf{"q/b-requests": {Visible: 10, Delayed: 3}},
			controls{"b": {Paused: true}}, true, 0},
	} {
		s := New(Config{BacklogDepth: 10, SchedulerQueueURL: "q/scheduler", AgentQueues: map[string]AgentQueues{
			"a": {Requests: "q/a-requests", Responses: "q/a-responses"},
			"b": {Requests: "q/b-requests", Responses: "q/b-responses"}}}, Deps{Flow: c.flow})
		s.Now = func() time.Time { return now }
		why, ends := s.backlog(context.Background(), &depths{queues: c.q}, ready, s.startQueues(ready)...)
		require.Equal(t, c.explained, why != "", "%s: %q", c.name, why)
		require.Equal(t, c.ends, ends, c.name)
	}
}
