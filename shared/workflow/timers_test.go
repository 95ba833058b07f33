package workflow_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// An order whose timer, over the order alone, ends after its deadline is
// refused at Submission with the reason; one within, or one whose until
// reads what steps answer, is taken.
func TestATimerPastTheDeadlineIsRefused(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("deliver.yaml", []byte(`name: deliver
deadline: 24h
defaults: {timeout: 5s}
agents:
  a: {endpoint: "https://a.example.com"}
steps:
  - {name: reserve, agent: a}
  - {name: wait-for-slot, until: .order.deliverAfter}
  - {name: later, until: .results.reserve.at}
  - {name: ship, agent: a}
`), workflow.Options{})
	require.NoError(t, err)
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	order := func(after string) json.RawMessage {
		return json.RawMessage(`{"orderId":"o-1","deliverAfter":"` + after + `"}`)
	}
	require.NoError(t, d.TimersFit(order("2026-11-27T09:00:00Z"), at), "within the deadline")
	err = d.TimersFit(order("2026-11-28T09:00:00Z"), at)
	require.ErrorContains(t, err, "step wait-for-slot sleeps until 2026-11-28T09:00:00Z (its until: .order.deliverAfter), "+
		"after the order's deadline (24h0m0s from now, 2026-11-27T10:00:00Z): it would fail expired and be undone")
	require.NoError(t, d.TimersFit(order("2026-11-28T09:00:00Z"), at.Add(48*time.Hour)), "a resend later is taken again")
}
