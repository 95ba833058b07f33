package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sasctl capacity prints each limit at the rate and the first to bind; the
// settings' flags move them; --output json has the same; a wrong command
// line is a usage error.
func TestCapacity(t *testing.T) {
	t.Parallel()
	code, out, stderr := sasctl(t, "capacity", "--rate", "1000", "--bench", "../../docs/bench.json")
	require.Zero(t, code, stderr)
	require.Contains(t, out, "workflow order at 1,000 orders a second (write units measured by sasctl bench)")
	require.Contains(t, out, "binds first: deadline index writes, each shard, at 2,000 orders a second; moved by context targetRate, or deadlineShards")

	code, out, stderr = sasctl(t, "capacity", "--rate", "10000", "--target-rate", "12000", "--submission-concurrency", "200",
		"--agent-concurrency", "150", "--table-writes", "200000", "--burst", "100000", "--for", "1s", "-o", "json")
	require.Zero(t, code, stderr)
	requireShape(t, "capacity", out)
	var res []capacityResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res, 1)
	require.True(t, res[0].Estimated, "no --bench: docs/cost.md's count")
	require.Equal(t, "submission concurrency, on the orders queue", res[0].Report.Binding.Name)
	require.InDelta(t, 21700, res[0].Report.Binding.Ceiling, 1e-6, "200 instances of 108.5 orders a second")
	require.NotNil(t, res[0].Burst)
	require.True(t, res[0].Burst.Drains)

	dir := t.TempDir()
	wf := filepath.Join(dir, "one.yaml")
	require.NoError(t, os.WriteFile(wf, []byte("name: one\nagents: {svc: {endpoint: 'https://svc.example.com', concurrency: 2}}\n"+
		"steps: [{name: s, agent: svc, timeout: 10s}]\n"), 0o644))
	code, out, stderr = sasctl(t, "capacity", "--rate", "10", "--workflows", wf, "--service-latency", "svc=1s")
	require.Zero(t, code, stderr)
	require.Contains(t, out, "binds first: agent-svc concurrency, on the svc requests queue, at 18.7 orders a second",
		"2 instances of batches of 10 calls, each batch 1 s of the service and 67 ms of the handler: 20 / 1.067 s")

	for _, args := range [][]string{{"capacity"}, {"capacity", "--rate", "1", "--target-rate", "10", "--deadline-shards", "4"},
		{"capacity", "--rate", "1", "--submission-concurrency", "1"}, {"capacity", "--rate", "1", "--service-latency", "soon"}} {
		code, _, stderr = sasctl(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, stderr)
	}
}

// docs/capacity.md's tables are what the commands it names print.
func TestTheCapacityDocIsTheCommandsOutput(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/capacity.md")
	require.NoError(t, err)
	for _, args := range [][]string{{"--rate", "1000"}, {"--rate", "10000", "--target-rate", "12000",
		"--submission-concurrency", "200", "--agent-concurrency", "150", "--table-writes", "200000", "--burst", "100000", "--for", "1s"}} {
		code, out, stderr := sasctl(t, append([]string{"capacity", "--bench", "../../docs/bench.json"}, args...)...)
		require.Zero(t, code, stderr)
		require.Contains(t, string(doc), "```\n"+strings.TrimRight(out, "\n")+"\n```", "sasctl capacity %v", args)
	}
}
