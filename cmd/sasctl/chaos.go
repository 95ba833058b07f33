package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/devkit/chaos"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// chaosFlags are sasctl chaos's flags beyond the plan's.
type chaosFlags struct {
	runDir, cacheDir, output string
	dynamodbLocal, noFaults  bool
}

func chaosFlagSet(p *chaos.Plan, f *chaosFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sasctl chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Uint64Var(&p.Seed, "seed", p.Seed, "chooses the faults: the same seed replays the same run")
	fs.IntVar(&p.Orders, "orders", p.Orders, "orders to send")
	fs.Float64Var(&p.Drop, "drop", p.Drop, "share of deliveries dropped (every queue but orders)")
	fs.Float64Var(&p.Delay, "delay", p.Delay, "share of deliveries delayed")
	fs.Float64Var(&p.Duplicate, "duplicate", p.Duplicate, "share of deliveries made twice")
	fs.Float64Var(&p.Crash, "crash", p.Crash, "chance a handler is killed at each crash point")
	fs.Float64Var(&p.Transient, "transient", p.Transient, "share of remote calls answered 503")
	fs.Float64Var(&p.Permanent, "permanent", p.Permanent, "share of remote actions refused for good")
	fs.Float64Var(&p.UndoFailure, "undo-failure", p.UndoFailure, "share of undo actions refused for good")
	fs.Float64Var(&p.Cancel, "cancel", p.Cancel, "share of orders a cancel message is sent for, at a random point")
	fs.BoolVar(&f.noFaults, "no-faults", false, "inject no fault at all (a burst plan: with --throttle, waiting alone)")
	fs.Var(throttleValue{&p.Throttle}, "throttle", "cap functions' pace, e.g. scheduler=20ms,agent-payment=50ms: each "+
		"message takes that long of the function's one invocation at a time (a function at its maximum concurrency)")
	fs.IntVar(&p.Schedulers, "schedulers", p.Schedulers, "scheduler instances")
	fs.IntVar(&p.Supervisors, "supervisors", p.Supervisors, "supervisor instances")
	fs.DurationVar(&p.SupervisorEvery, "supervisor-every", p.SupervisorEvery, "each supervisor's schedule")
	fs.DurationVar(&p.Settings.StepTimeout, "step-timeout", p.Settings.StepTimeout, "an attempt's time, from its claim")
	fs.DurationVar(&p.Settings.PickupTimeout, "pickup-timeout", p.Settings.PickupTimeout, "a ready step's wait before the supervisor first looks at it")
	fs.DurationVar(&p.Settings.OrderDeadline, "order-deadline", workflow.DefaultOrderDeadline, "an order not ended by then fails")
	fs.DurationVar(&p.Timeout, "timeout", 0, "give up waiting for the orders to end (default: 10m plus 0.5s per order)")
	fs.IntVar(&p.InFlight, "in-flight", p.InFlight, "at most this many orders sent but not ended (0: send all at once)")
	fs.DurationVar(&p.BatchWindow, "batch-window", p.BatchWindow, "event source mappings' batching window, whole seconds from 0 to 5m")
	fs.StringVar(&f.runDir, "run-dir", ".run", "where logs go")
	fs.BoolVar(&f.dynamodbLocal, "dynamodb-local", false, "keep the state store on DynamoDB Local, moto serving SQS and SNS")
	fs.StringVar(&f.cacheDir, "cache-dir", ".cache", "where DynamoDB Local is installed on first use (with --dynamodb-local)")
	fs.StringVar(&f.output, "output", "text", "text or json")
	return fs
}

// checkPlan says what is wrong with the flags, if anything.
func checkPlan(p chaos.Plan, f chaosFlags) error {
	if p.Orders < 1 || f.output != "text" && f.output != "json" {
		return errors.New("--orders must be at least 1 and --output text or json")
	}
	if err := topology.CheckBatchWindow(p.BatchWindow); err != nil {
		return fmt.Errorf("--batch-window %w", err)
	}
	return p.Settings.Validate()
}

func chaosCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	p := chaos.DefaultPlan(1, 300)
	var f chaosFlags
	if err := chaosFlagSet(&p, &f, stderr).Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := checkPlan(p, f); err != nil {
		fmt.Fprintln(stderr, "sasctl chaos:", err)
		return 2
	}
	if f.noFaults {
		p.NoFaults()
	}
	if p.Timeout <= 0 {
		p.Timeout = chaos.DefaultPlan(p.Seed, p.Orders).Timeout // it grows with the orders
	}
	return runChaos(ctx, p, f, stdout, stderr)
}

func runChaos(ctx context.Context, p chaos.Plan, f chaosFlags, stdout, stderr io.Writer) int {
	for _, dir := range []string{f.runDir, f.cacheDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fail(stderr, "chaos", &globals{}, err)
		}
	}
	endpoint, stop, err := localEndpoint(ctx, f.runDir, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sasctl chaos:", err)
		return 2
	}
	defer stop()
	if f.dynamodbLocal {
		ddb, stopDDB, err := localDynamoDB(ctx, f.cacheDir, f.runDir, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "sasctl chaos:", err)
			return 2
		}
		defer stopDDB()
		p.DynamoDBEndpoint = ddb
	}
	logPath := filepath.Join(f.runDir, "chaos.log")
	logs, err := os.Create(logPath)
	if err != nil {
		return fail(stderr, "chaos", &globals{}, err)
	}
	defer logs.Close()
	fmt.Fprintf(stderr, "chaos run: %d orders, seed %d, batching window %s, against %s (state store: %s); handler logs in %s\n",
		p.Orders, p.Seed, p.BatchWindow, endpoint, cmp.Or(p.DynamoDBEndpoint, endpoint), logPath)
	start, last := time.Now(), time.Time{}
	res, err := chaos.Run(ctx, p, endpoint, logs, func(c localrun.Counts) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "  %6.0fs  %d/%d ended, %d in flight\n",
				time.Since(start).Seconds(), c.Ended(), c.Total, c.Running+c.Compensating)
		}
	})
	if err != nil {
		fmt.Fprintln(stderr, "sasctl chaos:", err)
	}
	emit(stdout, &globals{output: f.output}, res, func() { res.Print(stdout) })
	if err != nil || res.Violations.Count() > 0 {
		return 1
	}
	return 0
}

// throttleValue parses function=duration pairs, comma-separated.
type throttleValue struct{ m *map[string]time.Duration }

func (t throttleValue) String() string {
	if t.m == nil || len(*t.m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(*t.m)) {
		parts = append(parts, k+"="+(*t.m)[k].String())
	}
	return strings.Join(parts, ",")
}

func (t throttleValue) Set(v string) error {
	out := map[string]time.Duration{}
	for _, part := range strings.Split(v, ",") {
		fn, d, ok := strings.Cut(strings.TrimSpace(part), "=")
		per, err := time.ParseDuration(d)
		if !ok || fn == "" || err != nil || per <= 0 {
			return fmt.Errorf("%q is not function=duration (e.g. scheduler=20ms)", part)
		}
		out[fn] = per
	}
	*t.m = out
	return nil
}
