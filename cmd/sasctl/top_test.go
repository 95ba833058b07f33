package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/workflow"
)

// sasctl top prints each workflow version's orders started and ended by
// state, its failure and compensation rates and its durations, over the
// last hour and day, and its steps' durations; its JSON is the schema's.
func TestTopShowsEachWorkflowsHealth(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	p.sim.SetFaults("shipping", remotesim.Faults{PermanentOrders: []string{"o-top-fail"}})
	ids := []string{"o-top-1", "o-top-2", "o-top-fail"}
	for _, id := range ids {
		code, _, errs := p.ctl(orderJSON(id), "submit", "-")
		require.Zero(t, code, errs)
	}
	p.waitEnded(ids...)

	code, out, errs := p.ctl("", "top", "--once")
	require.Zero(t, code, errs)
	for _, window := range []string{"hour", "day"} {
		require.Regexp(t, `order\s+\S+\s+`+window+`\s+3\s+2\s+1\s+0\s+0\s+33\.3%\s+33\.3%\s+p50 ≤ \S+, p95 ≤ \S+, p99 ≤ \S+\s+0\n`, out)
	}
	require.Regexp(t, `order\s+\S+\s+charge-payment\s+3\s+p50 ≤`, out)
	require.Regexp(t, `order\s+\S+\s+create-shipment\s+2\s+p50 ≤`, out, "the refused step is not done")

	var v topView
	p.json("top", &v, "top", "--once")
	require.Len(t, v.Workflows, 1)
	h := v.Workflows[0]
	require.Equal(t, "order", h.Workflow)
	require.Equal(t, map[workflow.State]int64{workflow.Processed: 2, workflow.Failed: 1}, h.Day.Ended)
	require.InDelta(t, 1.0/3, h.Hour.FailureRate, 1e-9)
	require.EqualValues(t, 3, h.Hour.Order.Count)
	require.Zero(t, h.InFlight)
}
