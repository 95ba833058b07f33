package console_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// The agents page, as sasctl agent (operator.AgentFlow), shows a rate
// limit's schedule as the Agents keep it now (a run of turns taken in
// leases): the limit its calls took and the time its turns are booked up
// to. An agent of its own (no workflow calls it) keeps the pipeline's
// orders out of its queue.
func TestTheAgentsPageShowsARateLimitsSchedule(t *testing.T) {
	p := thePipeline(t)
	topo := p.stack.Topology()
	topo.Agents = append(slices.Clone(topo.Agents), "metered")
	c, err := awsclient.Load(t.Context(), awsclient.Options{Endpoint: motoEndpoint, DynamoDBEndpoint: dynamodbEndpoint, Emulated: true})
	require.NoError(t, err)
	op := operator.New(c, topo)
	limit := workflow.Rate{Calls: 10, Per: time.Second}
	g := &flow.Gate{Store: op.Flow, Sleep: func(context.Context, time.Duration) error { return nil }}
	now := time.Now().UTC()
	last := now
	for range 50 { // 5 s of turns, each asked for at the one before, in leases of up to 2 (200 ms)
		v, err := g.Turn(t.Context(), "metered", limit, time.Time{}, last)
		require.NoError(t, err)
		require.True(t, v.Turned)
		last = v.At
	}
	require.Equal(t, now.Add(4900*time.Millisecond), last)
	f, err := op.AgentFlow(t.Context(), "metered")
	require.NoError(t, err)
	require.Equal(t, "10/s", f.RateLimit)
	require.False(t, f.BookedUntil.Before(last.Add(limit.Span(1))), "booked past its last turn: %s", f.BookedUntil)
	require.False(t, f.BookedUntil.After(last.Add(limit.Span(2))), "a lease at most past it: %s (last %s)", f.BookedUntil, last)

	base := serve(t, &pipeline{stack: p.stack, sim: p.sim, op: op}, nil)
	_, body := get(t, base+"/agents")
	require.Contains(t, body, `data-agent="metered"`)
	require.Contains(t, body, "<td>10/s</td>")
	require.Contains(t, body, "calls queue for its rate limit: turns booked until")
}
