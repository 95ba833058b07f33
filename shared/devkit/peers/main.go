// Command peers runs the same three-step order on this product's local
// pipeline and on its peers, where they can run here (Temporal's server in
// process, DBOS Transact on PostgreSQL), and prints one table with each
// peer's figures as ratios to this product's: the latency of one order
// alone, the drain of a burst, the CPU seconds and peak memory of every
// process involved.
//
// Each engine runs in a child process of its own, one after another, so
// that its CPU and memory are its own: this program again (--child sas,
// --child dbos), and the Temporal engine's own program (./temporal, built
// on first use). Every step of every engine calls one service this process
// runs: the product's remote simulator, answering at once. This is a module
// of its own so that the product's go.mod does not take Temporal's or
// DBOS's dependencies. See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sas-go/sas/shared/devkit/peers/harness"
)

// options are the parent's flags beside the workload's.
type options struct {
	engines     string
	temporalSrc string
	temporalBin string
	strict      bool
}

func main() {
	var c harness.Config
	var o options
	c.Bind(flag.CommandLine)
	flag.StringVar(&o.engines, "engines", "sas,temporal,temporal-file,dbos",
		"engines to run, in this order, comma-separated: sas (this product), temporal (SQLite in memory), temporal-file, dbos")
	flag.StringVar(&o.temporalSrc, "temporal-src", "temporal", "the Temporal engine's module, built into --run-dir on first use (the first build takes about 15 minutes)")
	flag.StringVar(&o.temporalBin, "temporal-bin", "", "the Temporal engine's program, already built (instead of --temporal-src)")
	flag.BoolVar(&o.strict, "strict", false, "exit 1 if an engine named did not run (unavailable here, or failed): CI's quick run, so that this program cannot rot")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if c.Engine != "" {
		err = runChild(ctx, c)
	} else {
		err = runAll(ctx, c, o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

// runChild runs this program's engines: sas or dbos.
func runChild(ctx context.Context, c harness.Config) error {
	svc := harness.NewService(c.ServiceURL)
	switch c.Engine {
	case "sas":
		return harness.RunChild(ctx, c, "Go process (handlers, runner, queues)", func(ctx context.Context) (harness.Engine, error) {
			return startSAS(ctx, c.ServiceURL, c.CacheDir, c.RunDir)
		})
	case "dbos":
		return harness.RunChild(ctx, c, "Go process (DBOS)", func(ctx context.Context) (harness.Engine, error) {
			return startDBOSIn(ctx, svc)
		})
	}
	return fmt.Errorf("--child %s: this program runs sas and dbos", c.Engine)
}

// startDBOSIn starts DBOS on a PostgreSQL in a temporary folder, removed
// when the engine closes.
func startDBOSIn(ctx context.Context, svc *harness.Service) (harness.Engine, error) {
	dir, err := os.MkdirTemp("", "sas-peers-pg-")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL's folder: %w", err)
	}
	e, err := startDBOS(ctx, svc, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return withCleanup{e, func() { _ = os.RemoveAll(dir) }}, nil
}

// withCleanup is an engine that runs a cleanup once it closed.
type withCleanup struct {
	harness.Engine
	cleanup func()
}

// Close closes the engine, then cleans up.
func (w withCleanup) Close() error {
	defer w.cleanup()
	return w.Engine.Close()
}
