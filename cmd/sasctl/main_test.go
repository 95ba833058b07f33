package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
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
	require.Contains(t, stderr, "Usage:\n  sasctl [flags]\n  sasctl [command]")
	require.Contains(t, stderr, "sasctl: name a command\nRun 'sasctl --help' for usage.\n")
	code, _, stderr = sasctl(t, "launch")
	require.Equal(t, 2, code)
	require.Equal(t, "sasctl: unknown command \"launch\"\nRun 'sasctl --help' for usage.\n", stderr)
	code, stdout, _ := sasctl(t, "help")
	require.Zero(t, code)
	for _, cmd := range []string{"demo", "dev", "status", "signal", "workflow", "completion", "version"} {
		require.Contains(t, stdout, "\n  "+cmd+" ")
	}
	require.Contains(t, stdout, "Exit codes: 0 done; 1 failed (one line on stderr says why); 2 usage")
}

// sasctl help CMD and CMD --help say the same: the command's flags, the
// deployment's only on the commands that take them.
func TestHelpOfACommand(t *testing.T) {
	code, help, _ := sasctl(t, "help", "status")
	require.Zero(t, code)
	code, flagHelp, _ := sasctl(t, "status", "--help")
	require.Zero(t, code)
	require.Equal(t, help, flagHelp)
	for _, want := range []string{"sasctl status ORDER [flags]", "--endpoint", "--prefix string", "($SAS_PREFIX) (default \"sas\")",
		"--agents", "-o, --output text|json"} {
		require.Contains(t, help, want)
	}
	_, help, _ = sasctl(t, "help", "workflow", "validate")
	require.Contains(t, help, "--function-timeout duration")
	require.NotContains(t, help, "--prefix", "a workflow file needs no deployment")
	_, help, _ = sasctl(t, "help", "demo")
	for _, flag := range []string{"--prefix", "--workflows", "--step-timeout", "--max-failures", "--retry-backoff",
		"--pickup-timeout", "--order-deadline", "--backlog-depth", "--supervisor-rate", "--census-every", "--batch-window-seconds"} {
		require.Contains(t, help, flag, "demo takes every setting of a local stack")
	}
	require.NotContains(t, help, "--endpoint")
	require.NotContains(t, help, "--output")
}

func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_sasctl", "zsh": "#compdef sasctl", "fish": "complete -c sasctl"} {
		code, stdout, stderr := sasctl(t, "completion", shell)
		require.Zero(t, code, stderr)
		require.Contains(t, stdout, want, shell)
	}
	code, stdout, _ := sasctl(t, "__complete", "list", "--state", "")
	require.Zero(t, code)
	require.Contains(t, stdout, "CompensationFailed\n", "list --state completes the states")
	code, stdout, _ = sasctl(t, "__complete", "status", "o-1", "--output", "")
	require.Zero(t, code)
	require.True(t, strings.HasPrefix(stdout, "text\njson\n"), stdout)
}

func TestVersionSaysTheModuleAndCommit(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.time", Value: "2026-11-24T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"}}}
	require.Equal(t, versionInfo{Version: "v1.4.0", Commit: "0123456789abcdef0123456789abcdef01234567",
		Time: "2026-11-24T10:00:00Z", Modified: true, Go: "go1.26.8"}, versionOf(bi, true))
	require.Equal(t, "(unknown)", versionOf(nil, false).Version)

	code, stdout, _ := sasctl(t, "version")
	require.Zero(t, code)
	require.Regexp(t, `^sasctl \S+.*, built with go1\.\d+`, stdout)
	code, stdout, _ = sasctl(t, "version", "-o", "json")
	require.Zero(t, code)
	requireShape(t, "version", stdout)
}

// Flags of a local stack come from the settings table, checked as it
// checks them; the others are checked before anything starts.
func TestDemoRejectsBadFlags(t *testing.T) {
	for want, args := range map[string][]string{
		"--orders must be 1..100000":                     {"demo", "--orders", "0"},
		"shares between 0 and 1":                         {"demo", "--transient", "1.5"},
		`"--max-failures" flag: must not be negative`:    {"demo", "--max-failures", "-1"},
		"unknown flag: --bogus":                          {"demo", "--bogus"},
		`"--batch-window-seconds" flag: a whole number`:  {"demo", "--batch-window-seconds", "1.5"},
		`"--prefix" flag: "my shop" is not 1-32 letters`: {"demo", "--prefix", "my shop"},
		"--queues sqs: want in-process, kind or moto":    {"demo", "--queues", "sqs"},
	} {
		code, _, stderr := sasctl(t, args...)
		require.Equal(t, 2, code, want)
		require.Contains(t, stderr, want)
	}
	code, stdout, _ := sasctl(t, "demo", "-h")
	require.Zero(t, code)
	require.Contains(t, stdout, "--step-timeout duration")
	require.Contains(t, stdout, `(default 3s)`)
	t.Setenv("SAS_STEP_TIMEOUT", "soon") // a setting's variable is its flag's default, checked as the flag is
	code, _, stderr := sasctl(t, "demo")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `sasctl demo: $SAS_STEP_TIMEOUT="soon": "soon" is not a duration like 30s, 5m or 24h`)
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for want, args := range map[string][]string{
		`batch size "11": want a whole number from 1 to 10`:          {"bench", "--batch-sizes", "5,11"},
		`invalid argument "500ms" for "--batch-window-seconds" flag`: {"bench", "--batch-window-seconds", "500ms"},
		"--orders must be at least 1":                                {"bench", "--orders", "0"},
		`result size "999999": want bytes from 0 to 262144`:          {"bench", "--result-bytes", "0,999999"},
		`unknown flag: --workflows`:                                  {"bench", "--workflows", "single"},
		"--queues sqs: want in-process, kind or moto":                {"bench", "--queues", "sqs"},
	} {
		code, _, stderr := sasctl(t, args...)
		require.Equal(t, 2, code, want)
		require.Contains(t, stderr, want)
	}
}

func TestChaosRejectsBadFlags(t *testing.T) {
	for want, args := range map[string][]string{
		`"scheduler" is not function=duration`:          {"chaos", "--throttle", "scheduler"},
		`"agent-payment=-1s" is not function=duration`:  {"chaos", "--throttle", "scheduler=20ms,agent-payment=-1s"},
		`"--batch-window-seconds" flag: a whole number`: {"chaos", "--batch-window-seconds", "301"},
		"--orders must be at least 1":                   {"chaos", "--orders", "0"},
		`"--order-deadline" flag: must not be negative`: {"chaos", "--order-deadline", "-1h"},
		`unknown flag: --prefix`:                        {"chaos", "--prefix", "x"},
		"--queues sqs: want in-process, kind or moto":   {"chaos", "--queues", "sqs"},
		"--migrate is a share from 0 to 1":              {"chaos", "--migrate", "1.5"},
		"--bulk is not negative":                        {"chaos", "--bulk", "-1"},
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
	require.Contains(t, stdout, "resources ready (tables sas-orders, sas-state;", "the one default prefix")
	require.Regexp(t, regexp.MustCompile(`Processed\s+12`), stdout)
	require.Regexp(t, regexp.MustCompile(`Lost\s+0\s+none lost`), stdout)
	require.Regexp(t, regexp.MustCompile(`Malformed rejected\s+3`), stdout)
	require.Regexp(t, regexp.MustCompile(`Remote effects\s+36\s+0 of them undo actions; 0 applied twice`), stdout)
	require.Contains(t, stdout, "12/12 ended")
}

// Given several workflows (make run's default: the order and the parallel
// examples), the demo's orders take turns over them, and each runs its own
// steps: three effects an order of the one, six of the other (its two
// reservations and authorization at once, the charge, one item packed, the
// shipment).
func TestDemoSpreadsItsOrdersOverTheWorkflows(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "")
	code, stdout, stderr := sasctl(t, "demo", "--orders", "8", "--malformed", "0", "--transient", "0.2",
		"--stall", "0", "--permanent", "0", "--run-dir", t.TempDir(),
		"--workflows", "../../shared/workflow/examples/order.yaml,../../shared/workflow/examples/parallel.yaml")
	require.Zero(t, code, stderr)
	require.Regexp(t, `workflow parallel v[0-9a-f]{8} \(\.\./\.\./shared/workflow/examples/parallel\.yaml\): 6 steps`, stdout)
	require.Contains(t, stdout, "the orders take turns over the 2 workflows")
	require.Regexp(t, regexp.MustCompile(`Processed\s+8`), stdout)
	require.Regexp(t, regexp.MustCompile(`Remote effects\s+36\s+0 of them undo actions; 0 applied twice`), stdout, "4×3 + 4×6")
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
	code, stdout, stderr := sasctl(t, "demo", "--run-dir", t.TempDir(), "--batch-window-seconds", "3", "--pickup-timeout", "2s")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `workflow "order": pickup timeout 2s is shorter than 3 batching windows of 3s (9s)`)
	require.Contains(t, stderr, "(--pickup-timeout, --batch-window-seconds)")
	require.NotContains(t, stdout, "started", "nothing started")
}

// An order deadline shorter than a workflow's wait would fail every order
// at its wait: refused before anything starts, as the file's own would be.
func TestDemoRefusesAnOrderDeadlineShorterThanAWait(t *testing.T) {
	code, stdout, stderr := sasctl(t, "demo", "--run-dir", t.TempDir(), "--order-deadline", "24h",
		"--workflows", "../../shared/workflow/examples/approval.yaml")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `workflow "approval": step await-approval waits up to 72h0m0s, longer than the order deadline of 24h0m0s`)
	require.Contains(t, stderr, "(--order-deadline)")
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

// Against AWS (no endpoint), the SDK's own configuration must name a region.
func TestADeploymentOnAWSNeedsARegion(t *testing.T) {
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	code, _, stderr := sasctl(t, "list", "--prefix", "shop")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "sasctl list: no AWS region: set AWS_REGION, or use a profile that has one (AWS_PROFILE)")
}

// The local commands install DynamoDB Local into the user's cache
// directory (or SAS_CACHE_DIR), not the folder they run in.
func TestTheCacheDirectoryIsTheUsersNotTheCurrentFolder(t *testing.T) {
	t.Setenv("SAS_CACHE_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg-cache")
	require.Equal(t, "/tmp/xdg-cache/sas", defaultCacheDir())
	t.Setenv("SAS_CACHE_DIR", "/tmp/elsewhere")
	require.Equal(t, "/tmp/elsewhere", defaultCacheDir())
	code, out, _ := sasctl(t, "dev", "--help")
	require.Zero(t, code)
	require.Regexp(t, `--cache-dir string +where DynamoDB Local is installed on first use \(default "/tmp/elsewhere"\)`, out)
}
