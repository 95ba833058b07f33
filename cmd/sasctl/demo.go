package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/sas-go/sas/shared/devkit/emulator"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

type demoFlags struct {
	orders, malformed                int
	transient, stall, permanent      float64
	latency, timeout, supervisorRate time.Duration
	batchWindow                      time.Duration
	settings                         workflow.Settings
	seed                             uint64
	runDir, cacheDir                 string
	workflows                        listFlag
}

func parseDemo(args []string, stderr io.Writer) (demoFlags, error) {
	f := demoFlags{settings: workflow.Settings{StepTimeout: 3 * time.Second, MaxFailures: 3,
		RetryBackoff: time.Second, PickupTimeout: 10 * time.Second}}
	fs := flag.NewFlagSet("sasctl demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.orders, "orders", 100, "well-formed orders to submit")
	fs.IntVar(&f.malformed, "malformed", 5, "malformed orders to submit alongside")
	fs.Float64Var(&f.transient, "transient", 0.2, "share of remote calls answered with a transient 503")
	fs.Float64Var(&f.stall, "stall", 0.05, "share of steps whose first remote call hangs (agent never replies)")
	fs.Float64Var(&f.permanent, "permanent", 0.02, "share of orders the remote refuses for good (422)")
	fs.DurationVar(&f.latency, "latency", 20*time.Millisecond, "latency of every remote call")
	fs.DurationVar(&f.settings.StepTimeout, "step-timeout", f.settings.StepTimeout, "step timeout (CompleteBy = claim + this)")
	fs.IntVar(&f.settings.MaxFailures, "max-failures", f.settings.MaxFailures, "attempts that do not complete before a step is an Error (0: the workflow's)")
	fs.DurationVar(&f.settings.RetryBackoff, "retry-backoff", f.settings.RetryBackoff, "base of the supervisor's growing backoff")
	fs.DurationVar(&f.settings.PickupTimeout, "pickup-timeout", f.settings.PickupTimeout, "a ready step not claimed by then has its message re-sent (never a failure)")
	fs.DurationVar(&f.settings.OrderDeadline, "order-deadline", workflow.DefaultOrderDeadline, "an order not ended by then fails for good")
	fs.DurationVar(&f.supervisorRate, "supervisor-every", time.Second, "the supervisor's schedule")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up waiting after this long")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the simulator's random faults")
	fs.DurationVar(&f.batchWindow, "batch-window", 0, "event source mappings' batching window, whole seconds (a deployment's is 1s)")
	fs.Var(&f.workflows, "workflows", "workflow files to run, comma-separated or repeated; orders name none, so run the first (default: the example order workflow)")
	fs.StringVar(&f.runDir, "run-dir", ".run", "where logs go")
	fs.StringVar(&f.cacheDir, "cache-dir", ".cache", "where DynamoDB Local is installed on first use")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	switch {
	case f.orders < 1 || f.orders > 100_000:
		return f, errors.New("--orders must be 1..100000")
	case f.malformed < 0:
		return f, errors.New("--malformed must be >= 0")
	case !share(f.transient) || !share(f.stall) || !share(f.permanent):
		return f, errors.New("--transient, --stall and --permanent are shares between 0 and 1")
	case topology.CheckBatchWindow(f.batchWindow) != nil:
		return f, fmt.Errorf("--batch-window %w", topology.CheckBatchWindow(f.batchWindow))
	}
	return f, f.settings.Validate()
}

func share(v float64) bool { return v >= 0 && v <= 1 }

func demo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseDemo(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "sasctl demo:", err)
		return 2
	}
	if err := runDemo(ctx, f, stdout); err != nil {
		fmt.Fprintln(stderr, "sasctl demo:", err)
		if errors.Is(err, emulator.ErrMotoMissing) {
			return 2
		}
		return 1
	}
	return 0
}

func runDemo(ctx context.Context, f demoFlags, out io.Writer) error {
	var o localrun.Options
	if err := loadWorkflows(&o, f.workflows); err != nil {
		return err // before anything starts
	}
	o.Settings, o.BatchWindow = f.settings, f.batchWindow
	if err := o.Check(); err != nil {
		return fmt.Errorf("%w (--pickup-timeout, --batch-window)", err)
	}
	for _, dir := range []string{f.runDir, f.cacheDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	endpoint, stop, err := localEndpoint(ctx, f.runDir, out)
	if err != nil {
		return err
	}
	defer stop()
	// moto serves one request at a time; DynamoDB Local, AWS's own engine,
	// serves the state store many at once.
	dynamodbEndpoint, stopDDB, err := localDynamoDB(ctx, f.cacheDir, f.runDir, out)
	if err != nil {
		return err
	}
	defer stopDDB()

	sim := remotesim.New(f.seed)
	sim.SetFaults("", remotesim.Faults{Latency: f.latency, TransientRate: f.transient, StallRate: f.stall, PermanentRate: f.permanent})
	srv, err := sim.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(out, "remote simulator on %s (seed %d)\n", srv.URL, f.seed)

	logf, err := os.Create(filepath.Join(f.runDir, "handlers.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	o.Endpoint, o.DynamoDBEndpoint, o.RemoteURL = endpoint, dynamodbEndpoint, srv.URL
	stack, err := demoStack(ctx, o, f, logf, out)
	if err != nil {
		return err
	}
	sim.OnCallback(stack.Callbacks(nil)) // async services answer through the orders queue
	defer stack.Start(ctx)()

	return drive(ctx, stack, sim, f, out)
}

// demoStack provisions the demo's stack with o's endpoints and workflows,
// its handlers logging to logf, and says what it made.
func demoStack(ctx context.Context, o localrun.Options, f demoFlags, logf *os.File, out io.Writer) (*localrun.Stack, error) {
	o.Prefix, o.Settings, o.SupervisorEvery, o.BatchWindow = "sas-demo", f.settings, f.supervisorRate, f.batchWindow
	o.Log, o.Metrics = slog.New(slog.NewJSONHandler(logf, nil)), logf
	stack, err := localrun.New(ctx, o)
	if err != nil {
		return nil, err
	}
	def := stack.Deployment.Config.Workflows.Default()
	fmt.Fprintf(out, "workflow %s v%s (%s): %d steps\n", def.Name, def.Version, def.File, len(def.Steps))
	t := stack.Topology()
	fmt.Fprintf(out, "resources ready (tables %s, %s; %d queues with DLQs; topic %s); handler logs in %s\n",
		t.OrdersTable(), t.StateTable(), len(t.Queues()), t.AlertTopic(), logf.Name())
	return stack, nil
}
