package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/workflow"
)

// demoFlags are sasctl demo's flags.
type demoFlags struct {
	settingFlags
	orders, malformed           int
	transient, stall, permanent float64
	latency, timeout            time.Duration
	seed                        uint64
	runDir, cacheDir            string
	queues                      string
}

func demoCmd() *cobra.Command {
	f := demoFlags{settingFlags: settingFlags{Settings: deployment.DefaultSettings()}}
	f.Overrides = workflow.Settings{StepTimeout: 3 * time.Second, MaxFailures: 3, RetryBackoff: time.Second,
		PickupTimeout: 10 * time.Second}
	f.SupervisorRate, f.Topology.BatchWindow = time.Second, 0
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "run the pipeline locally on a demo batch, with faults, and print a summary",
		Long: `demo runs the whole pipeline locally, its queues in process (--queues), against moto_server
(started for it, unless AWS_ENDPOINT_URL names an emulator) and DynamoDB Local: it provisions the deployment, starts the remote-service
simulator with faults, submits a batch of orders and malformed ones, shows progress, prints a
summary and stops what it started. It fails (exit 1) if an order was lost, did not end, or had an
effect applied twice. make run runs it.`,
		Example: "  sasctl demo --orders 1000 --transient 0.3 --seed 7\n  sasctl demo --workflows my.yaml",
		Args:    noArgs,
		PreRunE: f.check,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			return startFailed(runDemo(cmd.Context(), f, cmd.OutOrStdout()))
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&f.orders, "orders", 100, "well-formed orders to submit")
	fs.IntVar(&f.malformed, "malformed", 5, "malformed orders to submit alongside")
	fs.Float64Var(&f.transient, "transient", 0.2, "share of remote calls answered with a transient 503")
	fs.Float64Var(&f.stall, "stall", 0.05, "share of steps whose first remote call hangs (agent never replies)")
	fs.Float64Var(&f.permanent, "permanent", 0.02, "share of orders the remote refuses for good (422)")
	fs.DurationVar(&f.latency, "latency", 20*time.Millisecond, "latency of every remote call")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "give up waiting after this long")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the simulator's random faults")
	fs.StringVar(&f.runDir, "run-dir", ".run", "where logs go")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "where DynamoDB Local is installed on first use")
	queuesFlag(fs, &f.queues)
	f.bind(fs, localSettings...)
	return cmd
}

// validate says what is wrong with the flags, before anything starts.
func (f demoFlags) validate() error {
	if err := checkQueues(f.queues); err != nil {
		return err
	}
	switch {
	case f.orders < 1 || f.orders > 100_000:
		return usageErrorf("--orders must be 1..100000")
	case f.malformed < 0:
		return usageErrorf("--malformed must be >= 0")
	case !share(f.transient) || !share(f.stall) || !share(f.permanent):
		return usageErrorf("--transient, --stall and --permanent are shares between 0 and 1")
	}
	return nil
}

func share(v float64) bool { return v >= 0 && v <= 1 }

func runDemo(ctx context.Context, f demoFlags, out io.Writer) error {
	o, err := localOptions(f.settingFlags)
	if err != nil {
		return err // before anything starts
	}
	if err := makeDirs(f.runDir, f.cacheDir); err != nil {
		return err
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
	queuesEndpoint, stopQueues, err := localQueues(f.queues, 0, rand.Uint64(), out)
	if err != nil {
		return err
	}
	defer stopQueues()

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
	o.Endpoint, o.DynamoDBEndpoint, o.QueuesEndpoint, o.RemoteURL = endpoint, dynamodbEndpoint, queuesEndpoint, srv.URL
	stack, err := demoStack(ctx, o, logf, out)
	if err != nil {
		return err
	}
	sim.OnCallback(stack.Callbacks(func(err error) { fmt.Fprintln(logf, err) })) // async services answer with events
	defer stack.Start(ctx)()

	return drive(ctx, stack, sim, f, out)
}

// demoStack provisions the demo's stack with o's endpoints and workflows,
// its handlers logging to logf, and says what it made.
func demoStack(ctx context.Context, o localrun.Options, logf *os.File, out io.Writer) (*localrun.Stack, error) {
	o.Log, o.Metrics = slog.New(slog.NewJSONHandler(logf, nil)), logf
	stack, err := localrun.New(ctx, o)
	if err != nil {
		return nil, err
	}
	defs := stack.Deployment.Config.Workflows.Definitions()
	for _, def := range defs {
		fmt.Fprintf(out, "workflow %s v%s (%s): %d steps\n", def.Name, def.Version, def.File, len(def.Steps))
	}
	if len(defs) > 1 {
		fmt.Fprintf(out, "the orders take turns over the %d workflows\n", len(defs))
	}
	t := stack.Topology()
	fmt.Fprintf(out, "resources ready (tables %s, %s; %d queues with DLQs; topic %s); handler logs in %s\n",
		t.OrdersTable(), t.StateTable(), len(t.Queues()), t.AlertTopic(), logf.Name())
	return stack, nil
}
