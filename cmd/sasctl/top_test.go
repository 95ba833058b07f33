package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/workflow"
)

// sasctl top prints each workflow version's orders started and ended by
// state, its failure and compensation rates and its durations, over the
// last hour and day, and its steps' durations, and its orders in flight by
// what they wait for (an approval order: its event, not at work); its JSON
// is the schema's.
func TestTopShowsEachWorkflowsHealth(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	p.sim.SetFaults("shipping", remotesim.Faults{PermanentOrders: []string{"o-top-fail"}})
	ids := []string{"o-top-1", "o-top-2", "o-top-fail"}
	for _, id := range ids {
		code, _, errs := p.ctl(orderJSON(id), "submit", "-")
		require.Zero(t, code, errs)
	}
	code, _, errs := p.ctl(approvalOrder("o-top-wait"), "submit", "-")
	require.Zero(t, code, errs)
	p.waitEnded(ids...)
	p.parked("o-top-wait", 1) // await-approval, armed

	code, out, errs := p.ctl("", "top", "--once")
	require.Zero(t, code, errs)
	require.Regexp(t, `approval\s+\S+\s+hour\s+1\s+0\s+0\s+0\s+0\s+0\.0%\s+0\.0%\s+p50 -, p95 -, p99 -\s+1 \(event: approved 1\)\n`, out)
	for _, window := range []string{"hour", "day"} {
		require.Regexp(t, `order\s+\S+\s+`+window+`\s+3\s+2\s+1\s+0\s+0\s+33\.3%\s+33\.3%\s+p50 ≤ \S+, p95 ≤ \S+, p99 ≤ \S+\s+0\n`, out)
	}
	require.Regexp(t, `order\s+\S+\s+charge-payment\s+3\s+p50 ≤`, out)
	require.Regexp(t, `order\s+\S+\s+create-shipment\s+2\s+p50 ≤`, out, "the refused step is not done")

	var v topView
	p.json("top", &v, "top", "--once")
	require.Len(t, v.Workflows, 2)
	require.Equal(t, "approval", v.Workflows[0].Workflow)
	require.Equal(t, 1, v.Workflows[0].InFlight)
	require.Equal(t, map[string]int{"event: approved": 1}, v.Workflows[0].Waiting, "waiting for its event, not at work")
	h := v.Workflows[1]
	require.Equal(t, "order", h.Workflow)
	require.Equal(t, map[workflow.State]int64{workflow.Processed: 2, workflow.Failed: 1}, h.Day.Ended)
	require.InDelta(t, 1.0/3, h.Hour.FailureRate, 1e-9)
	require.EqualValues(t, 3, h.Hour.Order.Count)
	require.Zero(t, h.InFlight)
}
