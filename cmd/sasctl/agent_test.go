package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// An agent paused for its provider's maintenance takes no call: its orders
// wait at its step, none fails and no failure is counted; resumed, they
// complete.
func TestAPausedAgentsOrdersWaitAndGoOnWhenResumed(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	var f operator.AgentFlow
	p.json("agent", &f, "agent pause", "payment")
	require.True(t, f.Paused)
	require.True(t, f.Changed)
	code, out, _ := p.ctl("", "agent pause", "payment")
	require.Zero(t, code)
	require.Contains(t, out, "agent payment was paused already")
	code, _, errs := p.ctl("", "agent pause", "nosuch")
	require.Equal(t, 1, code)
	require.Contains(t, errs, `no agent "nosuch" in this deployment`)

	for _, id := range []string{"o-p1", "o-p2"} {
		code, _, _ := p.ctl(orderJSON(id), "submit", "-")
		require.Zero(t, code)
	}
	require.Eventually(t, func() bool { return p.stack.Tally.Sum(metrics.FlowWaits) >= 2 }, 60*time.Second, 100*time.Millisecond,
		"the charges wait")
	for _, id := range []string{"o-p1", "o-p2"} {
		task, recs, err := p.stack.Store.Load(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, workflow.Pending, task.State)
		require.Equal(t, workflow.Processed, recs[0].State, "the reservation ran")
		require.Equal(t, workflow.Pending, recs[1].State, "the charge waits")
		require.Zero(t, recs[1].Attempt, "never claimed")
		require.Zero(t, recs[1].FailureCount)
	}
	code, out, _ = p.ctl("", "status", "o-p1")
	require.Zero(t, code)
	require.Contains(t, out, "charge-payment waits for its agent's flow control (agent payment is paused (by", "waiting shown as waiting")
	require.NotContains(t, out, "last error")
	code, out, _ = p.ctl("", "agent show", "payment")
	require.Zero(t, code)
	require.Contains(t, out, "agent payment: paused by")
	code, out, _ = p.ctl("", "watch", "--once")
	require.Zero(t, code)
	require.Contains(t, out, "| agent payment paused")
	var snap snapshot
	p.json("watch", &snap, "watch", "--once")
	require.Len(t, snap.Agents, 1)
	require.Equal(t, "payment", snap.Agents[0].Agent)
	require.True(t, snap.Agents[0].Paused)

	code, out, _ = p.ctl("", "agent resume", "payment")
	require.Zero(t, code)
	require.Contains(t, out, "agent payment resumed")
	p.waitEnded("o-p1", "o-p2")
	for _, id := range []string{"o-p1", "o-p2"} {
		task, recs, err := p.stack.Store.Load(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, workflow.Processed, task.State)
		require.Zero(t, recs[1].FailureCount, "waiting was not failing")
	}
}
