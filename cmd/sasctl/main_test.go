package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func sasctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageAndUnknownCommand(t *testing.T) {
	code, _, stderr := sasctl(t)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "usage: sasctl")
	code, _, stderr = sasctl(t, "launch")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unknown command "launch"`)
	code, stdout, _ := sasctl(t, "help")
	require.Zero(t, code)
	require.Contains(t, stdout, "demo")
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for args, want := range map[string][]string{
		"--orders must be 1..100000":                            {"demo", "--orders", "0"},
		"shares between 0 and 1":                                {"demo", "--transient", "1.5"},
		"max failures must not be negative":                     {"demo", "--max-failures", "-1"},
		"flag provided but not defined":                         {"demo", "--bogus"},
		"--batch-window 1.5s is not whole seconds from 0 to 5m": {"demo", "--batch-window", "1500ms"},
	} {
		code, _, stderr := sasctl(t, want...)
		require.Equal(t, 2, code, args)
		require.Contains(t, stderr, args)
	}
	code, _, stderr := sasctl(t, "demo", "-h")
	require.Zero(t, code)
	require.Contains(t, stderr, "-step-timeout")
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for want, args := range map[string][]string{
		`batch size "11": want a whole number from 1 to 10`:                    {"bench", "--batch-sizes", "5,11"},
		"sasctl bench: --batch-window 500ms is not whole seconds from 0 to 5m": {"bench", "--batch-window", "500ms"},
		"--orders must be at least 1":                                          {"bench", "--orders", "0"},
	} {
		code, _, stderr := sasctl(t, args...)
		require.Equal(t, 2, code, want)
		require.Contains(t, stderr, want)
	}
}

func TestChaosRejectsBadFlags(t *testing.T) {
	for want, args := range map[string][]string{
		`"scheduler" is not function=duration`:         {"chaos", "--throttle", "scheduler"},
		`"agent-payment=-1s" is not function=duration`: {"chaos", "--throttle", "scheduler=20ms,agent-payment=-1s"},
		"--batch-window 1.5s is not whole seconds":     {"chaos", "--batch-window", "1500ms"},
		"--orders must be at least 1":                  {"chaos", "--orders", "0"},
		"order deadline must not be negative":          {"chaos", "--order-deadline", "-1h"},
	} {
		code, _, stderr := sasctl(t, args...)
		require.Equal(t, 2, code, want)
		require.Contains(t, stderr, want)
	}
}

func TestDemoSaysWhatToInstallWithoutMoto(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("PATH", t.TempDir())
	code, _, stderr := sasctl(t, "demo", "--orders", "1", "--run-dir", t.TempDir())
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "moto_server not found")
	require.Contains(t, stderr, "pip install 'moto[server]'")
	require.Contains(t, stderr, "AWS_ENDPOINT_URL")
}

func TestDemoRunsABatchToTheEnd(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "")
	code, stdout, stderr := sasctl(t, "demo", "--orders", "12", "--malformed", "3", "--transient", "0.2",
		"--stall", "0", "--permanent", "0", "--run-dir", t.TempDir(), "--workflows", "../../shared/workflow/examples/order.yaml")
	require.Zero(t, code, stderr)
	require.Regexp(t, `workflow order v[0-9a-f]{8} \(\.\./\.\./shared/workflow/examples/order\.yaml\): 3 steps`, stdout)
	require.Contains(t, stdout, "moto_server started on http://127.0.0.1:")
	require.Regexp(t, regexp.MustCompile(`Processed\s+12`), stdout)
	require.Regexp(t, regexp.MustCompile(`Lost\s+0\s+none lost`), stdout)
	require.Regexp(t, regexp.MustCompile(`Malformed rejected\s+3`), stdout)
	require.Regexp(t, regexp.MustCompile(`Remote effects\s+36\s+0 of them undo actions; 0 applied twice`), stdout)
	require.Contains(t, stdout, "12/12 ended")
}

// A broken workflow file stops the demo before anything starts, with the
// file's problems, each at its line.
func TestDemoRefusesABrokenWorkflowFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.yaml")
	require.NoError(t, os.WriteFile(path, []byte("name: broken\nsteps:\n  - name: a\n    agent: nobody\n"), 0o600))
	code, stdout, stderr := sasctl(t, "demo", "--run-dir", t.TempDir(), "--workflows", path)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, path+":4: steps[0].agent: ")
	require.NotContains(t, stdout, "started", "nothing started")
}

// A pickup timeout shorter than three batching windows would have every
// ready step judged lost while it sits in a window: the demo refuses it
// before anything starts.
func TestDemoRefusesAPickupTimeoutShorterThanTheBatchingWindows(t *testing.T) {
	code, stdout, stderr := sasctl(t, "demo", "--run-dir", t.TempDir(), "--batch-window", "3s", "--pickup-timeout", "2s")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `workflow "order": pickup timeout 2s is shorter than 3 batching windows of 3s (9s)`)
	require.Contains(t, stderr, "(--pickup-timeout, --batch-window)")
	require.NotContains(t, stdout, "started", "nothing started")
}

// A workflow that waits for an event runs to its end in the demo: the demo
// approves each order once it parked at its wait, and the charge takes the
// approved amount.
func TestDemoRunsAWorkflowThatWaitsForApproval(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "")
	code, stdout, stderr := sasctl(t, "demo", "--orders", "6", "--malformed", "0", "--transient", "0.2",
		"--stall", "0", "--permanent", "0", "--run-dir", t.TempDir(), "--workflows", "../../shared/workflow/examples/approval.yaml")
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "the demo sends each parked order its event")
	require.Regexp(t, regexp.MustCompile(`Processed\s+6`), stdout)
	require.Regexp(t, regexp.MustCompile(`Remote effects\s+12\s+0 of them undo actions; 0 applied twice`), stdout)
}
