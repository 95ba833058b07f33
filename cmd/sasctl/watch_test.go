package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// An agent with keys in use is on watch's line (how many keys, how many
// calls wait in their lines and the longest wait) and in its JSON, and
// agent show's JSON lists its keys, holders and line, as the schema says.
func TestWatchShowsAnAgentsKeysInUseAndTheirLines(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	s := keyline.NewStore(p.stack.Deployment.Clients.DynamoDB, p.stack.Topology().StateTable())
	ctx, now, ref := context.Background(), time.Now(), workflow.Ref{}
	for i, key := range []string{"c-1", "c-2", "c-3"} {
		got, err := s.Hold(ctx, "shipping", key, 1, keyline.Holder("o-h"+key, ref, 1, 1), now.Add(time.Hour), now)
		require.NoError(t, err)
		require.True(t, got.Held)
		for j := range i * 2 { // c-2: 2 waiting, c-3: 4
			w := keyline.Waiter{ID: keyline.WaiterID("o-w"+key+string(rune('a'+j)), ref, 1), Request: json.RawMessage(`{}`)}
			_, err := s.Wait(ctx, "shipping", key, 1, w, now.Add(time.Duration(j-12)*time.Second))
			require.NoError(t, err)
		}
	}

	code, out, errs := p.ctl("", "watch", "--once")
	require.Zero(t, code, errs)
	m := regexp.MustCompile(`\| agent shipping: 3 keys in use, 6 calls waiting in line \(longest (\d+)s\)`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	longest, _ := strconv.Atoi(m[1])
	require.GreaterOrEqual(t, longest, 12, "the first in line has waited 12 s and more (as long as the test took since)")
	require.LessOrEqual(t, time.Duration(longest)*time.Second, 13*time.Second+time.Since(now))
	var snap snapshot
	p.json("watch", &snap, "watch", "--once")
	require.Len(t, snap.Agents, 1)
	require.Equal(t, 3, snap.Agents[0].KeysInUse)
	require.Equal(t, 6, snap.Agents[0].KeyWaiters)

	code, out, errs = p.ctl("", "agent show", "shipping")
	require.Zero(t, code, errs)
	require.Contains(t, out, "agent shipping: 3 keys in use, 6 calls waiting in line")
	var f operator.AgentFlow
	p.json("agent", &f, "agent show", "shipping")
	require.Len(t, f.Keys, 3)
	c3 := f.Keys[0]
	require.Equal(t, "c-3", c3.Key, "the busiest first")
	require.Equal(t, 1, c3.InFlight)
	require.Equal(t, "o-hc-3", c3.Holders[0].OrderID)
	require.Len(t, c3.Waiters, 4)
	require.Equal(t, "o-wc-3b", c3.Waiters[1].OrderID)
	require.Equal(t, 2, c3.Waiters[1].Position)
}
