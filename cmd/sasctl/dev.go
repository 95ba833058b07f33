package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/console"
	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/tracing"
)

// devFlags are sasctl dev's flags.
type devFlags struct {
	settingFlags
	runDir, cacheDir, listen string
	otlp                     string // the OTLP/HTTP collector the spans go to ("": OTEL_EXPORTER_OTLP_ENDPOINT's, if set)
	motoPort, dynamodbPort   int
	queues                   string // --queues: moto or in-process
	queuesPort               int
	seed                     uint64
	faults                   faultFlags
}

// The fixed ports of sasctl dev's emulators and console by default: the
// lines a user pasted stay right across restarts.
const (
	devMotoPort     = 4566 // LocalStack's edge port: clients configured for one find the other
	devDynamoDBPort = 8000 // DynamoDB Local's own default
	devQueuesPort   = 9324 // the in-process queues' (--queues in-process): ElasticMQ's, the usual local SQS port
	devConsole      = "127.0.0.1:8090"
)

func devCmd() *cobra.Command {
	f := devFlags{settingFlags: settingFlags{Settings: deployment.DefaultSettings()}}
	f.SupervisorRate, f.Topology.BatchWindow = time.Second, 0
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "run the pipeline locally until Ctrl-C, with the web console",
		Long: `dev keeps the pipeline up until Ctrl-C: the queues (in process, or moto's with --queues moto),
moto_server and DynamoDB Local (its tables kept in the run folder), the remote-service simulator, the local runner, the Supervisor's schedule and the console,
each on 127.0.0.1. It prints the lines to paste into another shell, after which the AWS CLI, the
SDKs and every sasctl command use it. sasctl dev faults changes its simulator's faults. make dev
runs it.`,
		Example: "  sasctl dev --workflows shared/workflow/examples/approval.yaml\n  sasctl dev --transient 0.2 --step-timeout 5s\n" +
			"  sasctl dev --otlp http://127.0.0.1:4318   # each order's trace to a local Jaeger",
		Args:    noArgs,
		PreRunE: f.check,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			return startFailed(runDev(cmd.Context(), f, cmd.OutOrStdout()))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.runDir, "run-dir", ".run", "where the tables (DynamoDB Local's file), logs and dev.json go")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "where DynamoDB Local is installed on first use")
	fs.StringVar(&f.listen, "listen", devConsole, "the console's address (127.0.0.1 only; PORT 0 for a free one)")
	fs.IntVar(&f.motoPort, "moto-port", devMotoPort, "moto_server's port on 127.0.0.1 (0 for a free one)")
	fs.IntVar(&f.dynamodbPort, "dynamodb-port", devDynamoDBPort, "DynamoDB Local's port on 127.0.0.1 (0 for a free one)")
	queuesFlag(fs, &f.queues)
	fs.IntVar(&f.queuesPort, "queues-port", devQueuesPort, "the in-process queues' port on 127.0.0.1 (--queues in-process; 0 for a free one)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the simulator's random faults")
	fs.StringVar(&f.otlp, "otlp", "", "send each order's trace over OTLP/HTTP to the OpenTelemetry collector at this URL (Jaeger's http://127.0.0.1:4318); "+
		"sets "+tracing.EndpointEnv+", which the other OTEL_ variables (headers, sampler, service name) go with")
	f.faults.register(fs)
	f.bind(fs, localSettings...)
	cmd.AddCommand(devFaultsCmd())
	return cmd
}

// validate says what is wrong with the flags, before anything starts.
func (f devFlags) validate() error {
	if err := checkQueues(f.queues); err != nil {
		return err
	}
	for name, p := range map[string]int{"--moto-port": f.motoPort, "--dynamodb-port": f.dynamodbPort, "--queues-port": f.queuesPort} {
		if p < 0 || p > 65535 {
			return usageErrorf("%s %d is not a port (0 for a free one)", name, p)
		}
	}
	if err := console.CheckAddr(f.listen); err != nil {
		return usageError{err}
	}
	if err := f.faults.change.Validate(); err != nil {
		return usageError{err}
	}
	if f.otlp != "" {
		if u, err := url.Parse(f.otlp); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErrorf("--otlp %s is not an http(s) URL: the collector's OTLP/HTTP base, such as http://127.0.0.1:4318", f.otlp)
		}
	}
	return nil
}

// tracing sends the pipeline's spans (its handlers run in this process) to
// the collector --otlp names, or the standard variables name
// (OTEL_EXPORTER_OTLP_ENDPOINT), each order one trace; their spans are
// flushed when dev stops. Nothing is traced if neither names one.
func (d *devRun) tracing(ctx context.Context) error {
	if d.flags.otlp != "" {
		if err := os.Setenv(tracing.EndpointEnv, d.flags.otlp); err != nil {
			return err
		}
	}
	if !tracing.Enabled() {
		return nil
	}
	flush, err := tracing.Setup(ctx, "sas-dev")
	if err != nil {
		return err
	}
	d.later(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := flush(ctx); err != nil {
			fmt.Fprintf(d.out, "traces not all sent: %v\n", err)
		}
	})
	fmt.Fprintf(d.out, "traces: each order's to the OTLP collector at %s\n",
		cmp.Or(os.Getenv(tracing.TracesEndpointEnv), os.Getenv(tracing.EndpointEnv), tracing.DefaultEndpoint))
	return nil
}

// runDev runs the local deployment until ctx ends (SIGINT, SIGTERM), then
// stops everything it started, in reverse order.
func runDev(ctx context.Context, f devFlags, out io.Writer) error {
	d := &devRun{flags: f, out: out}
	defer d.stop()
	if err := d.start(ctx); err != nil {
		return err
	}
	fmt.Fprintln(out, "ready; Ctrl-C stops it")
	<-ctx.Done()
	fmt.Fprintln(out, "stopping")
	return nil
}

// newSim is the remote simulator of a dev run, with the faults the flags set.
func newSim(f devFlags) (*remotesim.Simulator, error) {
	sim := remotesim.New(f.seed)
	_, err := sim.Apply(f.faults.change, time.Now())
	return sim, err
}

// printEnv prints, one a line, what a user pastes into a shell to talk to
// the stack with their own tools and sasctl, then where things are.
func (d *devRun) printEnv() {
	w, t := d.out, d.stack.Topology()
	fmt.Fprintln(w, "paste these lines into another shell; then the AWS CLI, boto3, the SDKs and every sasctl command use this stack:")
	for _, kv := range d.exports() {
		fmt.Fprintf(w, "export %s=%s\n", kv[0], kv[1])
	}
	fmt.Fprintf(w, "orders queue: %s\n", d.stack.QueueURL(t.OrdersQueue().Name))
	fmt.Fprintf(w, "events queue: %s (events and async callbacks)\n", d.stack.QueueURL(t.EventsQueue().Name))
	fmt.Fprintf(w, "orders table: %s\nstate table: %s\n", t.OrdersTable(), t.StateTable())
	fmt.Fprintf(w, "alert inbox: %s\n", d.stack.AlertInbox)
	fmt.Fprintf(w, "faults: sasctl dev faults --run-dir %s ... (its control endpoint and token are in %s)\n",
		d.flags.runDir, devStatePath(d.flags.runDir))
	fmt.Fprintf(w, "console: %s\n", d.state.Console)
}

// exports are the environment variables a user's shell needs, in order:
// the SDKs' endpoint, region and dummy credentials, then what sasctl's
// defaults read (the prefix, the agents), the orders and events queues'
// URLs, and the workflow files it runs (sasctl submit checks orders against
// them).
func (d *devRun) exports() [][2]string {
	t := d.stack.Topology()
	region := d.stack.Deployment.Clients.Config.Region
	out := [][2]string{{"AWS_ENDPOINT_URL", d.state.Endpoint}}
	if d.state.DynamoDBEndpoint != "" {
		out = append(out, [2]string{"AWS_ENDPOINT_URL_DYNAMODB", d.state.DynamoDBEndpoint})
	}
	if d.state.QueuesEndpoint != "" {
		out = append(out, [][2]string{{"AWS_ENDPOINT_URL_SQS", d.state.QueuesEndpoint}, {"AWS_ENDPOINT_URL_SNS", d.state.QueuesEndpoint}}...)
	}
	out = append(out, [][2]string{{"AWS_REGION", region}, {"AWS_DEFAULT_REGION", region},
		{"AWS_ACCESS_KEY_ID", "test"}, {"AWS_SECRET_ACCESS_KEY", "test"},
		{"SAS_PREFIX", t.Prefix}, {"SAS_AGENTS", strings.Join(t.Agents, ",")},
		{"SAS_ORDERS_QUEUE_URL", d.stack.QueueURL(t.OrdersQueue().Name)},
		{"SAS_EVENTS_QUEUE_URL", d.stack.QueueURL(t.EventsQueue().Name)}}...)
	if files := absolutePaths(d.flags.WorkflowFiles); len(files) > 0 {
		out = append(out, [2]string{"SAS_WORKFLOWS", strings.Join(files, ",")}) // sasctl submit checks orders against them
	}
	return out
}

// absolutePaths are paths made absolute, for a shell in another directory
// (a path that cannot be is kept as it is).
func absolutePaths(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		out = append(out, p)
	}
	return out
}
