package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/sas-go/sas/shared/devkit/peers/harness"
	"github.com/sas-go/sas/shared/devkit/remotesim"
)

// labels describe each engine in the table.
var labels = map[string]string{
	"sas":           "this product: local pipeline (queues in process, DynamoDB Local)",
	"temporal":      "Temporal: server in process, SQLite in memory",
	"temporal-file": "Temporal: server in process, SQLite in a file",
	"dbos":          "DBOS Transact (Go) on PostgreSQL, fsync on",
}

// runAll starts the service, runs each engine in a child process, one after
// another, and prints the table.
func runAll(ctx context.Context, c harness.Config, o options, out io.Writer) error {
	names, err := engineNames(o.engines)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.RunDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", c.RunDir, err)
	}
	sim := remotesim.New(1)
	sim.SetFaults("", remotesim.Faults{}) // answers at once, no faults
	srv, err := sim.Start("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("start the service: %w", err)
	}
	defer srv.Close()
	c.ServiceURL = srv.URL
	fmt.Fprintf(os.Stderr, "the service every step calls: the remote simulator on %s\n", srv.URL)
	load0, began := loadAverage(), time.Now()
	var results []harness.Result
	for _, name := range names {
		fmt.Fprintln(os.Stderr, labels[name])
		c.Engine = name
		results = append(results, runOne(ctx, c, &o, name))
	}
	fmt.Fprintf(out, "\n%d orders one after another (after %d not counted), then %d at once; the three-step order, "+
		"each step a POST to one local service answering at once (not counted below); %d CPUs, %s; "+
		"load average %s at the start, %s at the end; %.0f s in all\n\n", c.One, c.Warmup, c.Burst,
		runtime.NumCPU(), runtime.Version(), load0, loadAverage(), time.Since(began).Seconds())
	printTable(out, results, c.Burst)
	if o.strict {
		return notRun(results)
	}
	return nil
}

// runOne runs one engine in a child process and reads its result.
func runOne(ctx context.Context, c harness.Config, o *options, name string) harness.Result {
	c.RunDir = filepath.Join(c.RunDir, name)
	if err := os.MkdirAll(c.RunDir, 0o755); err != nil {
		return harness.Result{Engine: name, Error: err.Error()}
	}
	prog, err := program(ctx, c, o, name)
	if err != nil {
		return harness.Result{Engine: name, Unavailable: err.Error()}
	}
	cmd := exec.CommandContext(ctx, prog, c.Args()...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	// Interrupted, the child is asked to stop (it then stops what it
	// started: DynamoDB Local runs in a process group of its own), and
	// killed only if it has not after 30 s.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	err = cmd.Run()
	var r harness.Result
	if jerr := json.Unmarshal(stdout.Bytes(), &r); jerr != nil {
		if err == nil {
			err = jerr
		}
		r = harness.Result{Engine: name, Error: fmt.Sprintf("no figures from its process: %v", err)}
	}
	return r
}

// notRun is an error naming the engines of results that did not run, or
// nil.
func notRun(results []harness.Result) error {
	var failed []string
	for _, r := range results {
		if why := cmp.Or(r.Unavailable, r.Error); why != "" {
			failed = append(failed, fmt.Sprintf("%s: %s", r.Engine, why))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d engines did not run: %s", len(failed), len(results), strings.Join(failed, "; "))
	}
	return nil
}

// program is the program that runs engine name: this one, or the Temporal
// engine's, built from o.temporalSrc unless o.temporalBin names it (or it
// was built for the other Temporal engine of this run: o.temporalBin is
// then set).
func program(ctx context.Context, c harness.Config, o *options, name string) (string, error) {
	if !strings.HasPrefix(name, "temporal") {
		return os.Executable()
	}
	if o.temporalBin != "" {
		return o.temporalBin, nil
	}
	bin, err := filepath.Abs(filepath.Join(c.RunDir, "peers-temporal"))
	if err != nil {
		return "", fmt.Errorf("the Temporal engine's program: %w", err)
	}
	harness.Logf("building the Temporal engine from %s (the first build takes about 15 minutes, later ones seconds)", o.temporalSrc)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = o.temporalSrc
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("its program did not build (%w): %s", err, lastLines(string(out), 3))
	}
	o.temporalBin = bin
	return bin, nil
}

// lastLines are the last n lines of s, on one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " / ")
}

// engineNames are the engines of --engines, checked.
func engineNames(list string) ([]string, error) {
	var out []string
	for n := range strings.SplitSeq(list, ",") {
		n = strings.TrimSpace(n)
		if _, ok := labels[n]; !ok {
			return nil, fmt.Errorf("--engines: unknown engine %q (want sas, temporal, temporal-file, dbos)", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// loadAverage is the 1-minute load average, or "?".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}
