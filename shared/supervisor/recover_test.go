package supervisor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// A step given up on at its threshold says which attempt ran out of time,
// and where what its service last answered is: its Agent's line (an
// attempt out of time writes nothing to the record).
func TestAGiveUpPointsToTheServicesLastAnswer(t *testing.T) {
	t.Parallel()
	completeBy := time.Date(2026, 1, 1, 9, 0, 20, 0, time.UTC)
	st := statestore.Step{Rec: workflow.Rec{State: workflow.Processing, Attempt: 3},
		OrderOf: statestore.OrderOf{OrderID: "o-1"},
		AtWork:  statestore.AtWork{LockedBy: "agent-payment/1", CompleteBy: completeBy}}
	st.MaxFailures = 3
	cause, reason := whyGiveUp(st, workflow.Found{State: workflow.Processing}, completeBy.Add(time.Second))
	require.Equal(t, workflow.TimedOut, cause)
	require.Equal(t, `failure threshold 3 reached: attempt 3 (agent-payment/1) not completed by 2026-01-01T09:00:20Z; `+
		`its service's last answer, if one came, is in its Agent's log line "attempt abandoned; no reply sent" (order_id o-1, attempt 3)`, reason)

	// Its Agent ended it, noting what the service last answered: the
	// reason (the alert's, status's) says it.
	st.Incidents = []statestore.Event{{What: "attempt 2 abandoned by its agent: an older one"},
		{What: "attempt 3 abandoned by its agent: CompleteBy passed; its service last answered: payment answered HTTP 503 (transient): down"}}
	_, reason = whyGiveUp(st, workflow.Found{State: workflow.Processing}, completeBy.Add(time.Second))
	require.Equal(t, "failure threshold 3 reached: attempt 3 (agent-payment/1) not completed by 2026-01-01T09:00:20Z: "+
		"CompleteBy passed; its service last answered: payment answered HTTP 503 (transient): down", reason)

	st.Async, st.Incidents = true, nil
	_, reason = whyGiveUp(st, workflow.Found{State: workflow.Processing}, completeBy.Add(time.Second))
	require.Equal(t, "failure threshold 3 reached: attempt 3 (agent-payment/1): no callback by 2026-01-01T09:00:20Z", reason)
}

// A step its order's deadline passed while it waited, given back before
// its call (its agent's rate, a key's line, a function with no data key),
// says for what it waited: the alert names the cause, not only the time.
func TestADeadlineGiveUpSaysWhatTheStepWaitedFor(t *testing.T) {
	t.Parallel()
	ready := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	st := statestore.Step{Rec: workflow.Rec{State: workflow.Pending},
		OrderOf: statestore.OrderOf{OrderID: "o-1", Deadline: ready.Add(time.Hour)},
		Wait:    statestore.Wait{ReadyAt: ready, FlowWhy: "not called: sealed data of o-1: this function has no data key (dataKey) to open it"}}
	cause, reason := whyGiveUp(st, workflow.Found{State: workflow.Pending, PastDeadline: true}, ready.Add(2*time.Hour))
	require.Equal(t, workflow.Expired, cause)
	require.Equal(t, "order deadline 2026-01-01T10:00:00Z passed: not claimed since it was ready at 2026-01-01T09:00:00Z; "+
		"it waited: not called: sealed data of o-1: this function has no data key (dataKey) to open it", reason)
}
