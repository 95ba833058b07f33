package supervisor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// depthsOf answers every queue with one depth.
type depthsOf queue.Depth

func (d depthsOf) SendJSON(context.Context, string, any, time.Duration) error { return nil }
func (d depthsOf) Depth(context.Context, string) (queue.Depth, error)         { return queue.Depth(d), nil }

// An attempt past its CompleteBy whose agent's response queue has a message
// in a consumer's hands is held while that message may be its reply: within
// InFlightGrace of CompleteBy, or, once it was held for a visible backlog,
// within InFlightGrace of the look that found it due (the reply may have
// just left the backlog for a slow consumer). Otherwise it is judged.
func TestAReplyInAConsumersHandsHoldsTheJudgement(t *testing.T) {
	t.Parallel()
	grace := 5 * time.Second
	s := &Supervisor{cfg: Config{InFlightGrace: grace, BacklogDepth: 10,
		AgentQueues: map[string]AgentQueues{"a": {Requests: "q/a-requests", Responses: "q/a-responses"}}}}
	completeBy := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	claimed := statestore.Step{Agent: "a", State: workflow.Processing, CompleteBy: completeBy, DueAt: completeBy}
	held := claimed
	held.DueAt, held.Waits = completeBy.Add(12*time.Second), 3 // looked at again 12 s later
	inFlight, visible, empty := depthsOf{InFlight: 1}, depthsOf{Visible: 70}, depthsOf{}
	for _, c := range []struct {
		name string
		st   statestore.Step
		now  time.Time
		q    depthsOf
		held bool
	}{
		{"in flight, just overdue", claimed, completeBy.Add(time.Second), inFlight, true},
		{"in flight, overdue past the grace", claimed, completeBy.Add(10 * time.Second), inFlight, false},
		{"held before, in flight at the next look", held, held.DueAt.Add(500 * time.Millisecond), inFlight, true},
		{"held before, in flight long after the look", held, held.DueAt.Add(10 * time.Second), inFlight, false},
		{"held before, the queue empty", held, held.DueAt.Add(500 * time.Millisecond), empty, false},
		{"a visible backlog", claimed, completeBy.Add(time.Hour), visible, true},
	} {
		why := s.backlog(context.Background(), c.st, c.now, &depths{queues: c.q})
		require.Equal(t, c.held, why != "", "%s: %q", c.name, why)
	}
}
