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

// sasctl capacity says what rate each rate-limited agent can be given: the
// least of its limit, what its instances call at, and what its leases hand
// out at the store's write latency, with the writes they take.
func TestCapacitySaysWhatRateAnAgentCanBeGiven(t *testing.T) {
	t.Parallel()
	wf := filepath.Join(t.TempDir(), "rated.yaml")
	require.NoError(t, os.WriteFile(wf, []byte("name: rated\nagents: {svc: {endpoint: 'https://svc.example.com', rateLimit: 2000/s}}\n"+
		"steps: [{name: s, agent: svc, timeout: 10s}]\n"), 0o644))
	code, out, stderr := sasctl(t, "capacity", "--rate", "10", "--workflows", wf)
	require.Zero(t, code, stderr)
	require.Contains(t, out, "agent svc, rateLimit 2000/s (at most 2000 calls in any second): it can be given 2,000 calls a second; "+
		"bound by its rate limit\n  its 20 instances call at up to 2,988 a second; at a 10ms write its leases hand out up to 40,000 turns "+
		"a second (up to 400 turns a lease; one turn a write: 100)\n  leases of 29 turns, 69.0 a second: 69.0 to 1,379 conditional writes")

	code, out, stderr = sasctl(t, "capacity", "--rate", "10", "--workflows", wf, "--store-latency", "300ms")
	require.Zero(t, code, stderr)
	require.Contains(t, out, "it can be given 1,333 calls a second; bound by the store's write latency")
	code, out, stderr = sasctl(t, "capacity", "--rate", "10", "--workflows", wf, "--service-latency", "1s", "-o", "json")
	require.Zero(t, code, stderr)
	var res []capacityResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res[0].Rates, 1)
	require.InDelta(t, 187.5, res[0].Rates[0].Given, 0.1, "20 instances of 10 calls in 1.067 s")

	code, _, stderr = sasctl(t, "capacity", "--rate", "10", "--workflows", wf, "--store-latency", "0s")
	require.Equal(t, 2, code, stderr)
}

// docs/capacity.md's agent rates are what the command it names prints for
// the workflow file it shows.
func TestTheCapacityDocsAgentRatesAreTheCommandsOutput(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/capacity.md")
	require.NoError(t, err)
	doc := string(b)
	_, rest, ok := strings.Cut(doc, "With this `rated.yaml`:\n\n```yaml\n")
	require.True(t, ok, "the example's workflow file")
	yaml, _, _ := strings.Cut(rest, "```")
	wf := filepath.Join(t.TempDir(), "rated.yaml")
	require.NoError(t, os.WriteFile(wf, []byte(yaml), 0o644))
	code, out, stderr := sasctl(t, "capacity", "--rate", "100", "--workflows", wf, "--service-latency", "payment=50ms,ocr=2s")
	require.Zero(t, code, stderr)
	var rates []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "agent ") || strings.HasPrefix(l, "  its ") || strings.HasPrefix(l, "  leases ") {
			rates = append(rates, l)
		}
	}
	require.Len(t, rates, 6)
	require.Contains(t, doc, "```\n"+strings.Join(rates, "\n")+"\n```")
}
