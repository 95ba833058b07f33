package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sas-go/sas/shared/chaos"
	"github.com/sas-go/sas/shared/localrun"
	"github.com/sas-go/sas/shared/topology"
)

func chaosCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sasctl chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	p := chaos.DefaultPlan(1, 300)
	fs.Uint64Var(&p.Seed, "seed", p.Seed, "chooses the faults: the same seed replays the same run")
	fs.IntVar(&p.Orders, "orders", p.Orders, "orders to send")
	fs.Float64Var(&p.Drop, "drop", p.Drop, "share of deliveries dropped (every queue but orders)")
	fs.Float64Var(&p.Delay, "delay", p.Delay, "share of deliveries delayed")
	fs.Float64Var(&p.Duplicate, "duplicate", p.Duplicate, "share of deliveries made twice")
	fs.Float64Var(&p.Crash, "crash", p.Crash, "chance a handler is killed at each crash point")
	fs.Float64Var(&p.Transient, "transient", p.Transient, "share of remote calls answered 503")
	fs.Float64Var(&p.Permanent, "permanent", p.Permanent, "share of remote actions refused for good")
	fs.Float64Var(&p.UndoFailure, "undo-failure", p.UndoFailure, "share of undo actions refused for good")
	fs.IntVar(&p.Schedulers, "schedulers", p.Schedulers, "scheduler instances")
	fs.IntVar(&p.Supervisors, "supervisors", p.Supervisors, "supervisor instances")
	fs.DurationVar(&p.SupervisorEvery, "supervisor-every", p.SupervisorEvery, "each supervisor's schedule")
	fs.DurationVar(&p.Timeout, "timeout", 0, "give up waiting for the orders to end (default: 10m plus 0.5s per order)")
	fs.IntVar(&p.InFlight, "in-flight", p.InFlight, "at most this many orders sent but not ended (0: send all at once)")
	fs.DurationVar(&p.BatchWindow, "batch-window", p.BatchWindow, "event source mappings' batching window, whole seconds from 0 to 5m")
	runDir := fs.String("run-dir", ".run", "where logs go")
	// Off by default: with the state store on DynamoDB Local, moto's SQS
	// becomes the only bottleneck and, past a few hundred orders in flight,
	// a backlog the Supervisor keeps adding to (see the README's Reliability).
	dynamodbLocal := fs.Bool("dynamodb-local", false, "keep the state store on DynamoDB Local, moto serving SQS and SNS")
	cacheDir := fs.String("cache-dir", ".cache", "where DynamoDB Local is installed on first use (with --dynamodb-local)")
	output := fs.String("output", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if p.Orders < 1 || *output != "text" && *output != "json" {
		fmt.Fprintln(stderr, "sasctl chaos: --orders must be at least 1 and --output text or json")
		return 2
	}
	if err := topology.CheckBatchWindow(p.BatchWindow); err != nil {
		fmt.Fprintln(stderr, "sasctl chaos: --batch-window", err)
		return 2
	}
	if p.Timeout <= 0 {
		p.Timeout = chaos.DefaultPlan(p.Seed, p.Orders).Timeout // it grows with the orders
	}
	for _, dir := range []string{*runDir, *cacheDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fail(stderr, "chaos", &globals{}, err)
		}
	}
	endpoint, stop, err := localEndpoint(ctx, *runDir)
	if err != nil {
		fmt.Fprintln(stderr, "sasctl chaos:", err)
		return 2
	}
	defer stop()
	if *dynamodbLocal {
		ddb, stopDDB, err := localDynamoDB(ctx, *cacheDir, *runDir, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "sasctl chaos:", err)
			return 2
		}
		defer stopDDB()
		p.DynamoDBEndpoint = ddb
	}
	logPath := filepath.Join(*runDir, "chaos.log")
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
	emit(stdout, &globals{output: *output}, res, func() { res.Print(stdout) })
	if err != nil || res.Violations.Count() > 0 {
		return 1
	}
	return 0
}
