package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/chaos"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/workflow"
)

// chaosFlags are sasctl chaos's flags beyond the plan's.
type chaosFlags struct {
	settingFlags
	runDir, cacheDir        string
	output                  output
	dynamodbLocal, noFaults bool
	queues                  string // --queues: moto or in-process
	flow                    flowFlags
}

// flowFlags are sasctl chaos's flow-control flags: --flow turns it on.
type flowFlags struct {
	share               float64
	rate, burst, perKey int
	hold, refuse        float64
}

// plan puts the flow control the flags ask for on p (none without --flow).
func (f flowFlags) plan(p *chaos.Plan) error {
	if f.share <= 0 {
		return nil
	}
	if f.share > 1 || f.hold < 0 || f.hold > 1 || f.refuse < 0 || f.refuse > 1 || f.rate < 0 || f.burst < 0 || f.perKey < 0 {
		return usageErrorf("--flow, --flow-hold and --flow-refuse are shares from 0 to 1; --flow-rate, --flow-burst and --flow-in-flight are not negative")
	}
	p.Flow = chaos.DefaultFlow()
	p.Flow.Share, p.Flow.Hold, p.Flow.Refuse, p.Flow.InFlight = f.share, f.hold, f.refuse, f.perKey
	if f.rate > 0 {
		p.Flow.Rate = workflow.Rate{Calls: f.rate, Per: time.Second, Burst: max(f.burst, 1)}
	}
	return nil
}

func chaosCmd() *cobra.Command {
	p := chaos.DefaultPlan(1, 300)
	f := chaosFlags{settingFlags: settingFlags{Settings: deployment.DefaultSettings()}}
	f.Overrides, f.SupervisorRate, f.Topology.BatchWindow = p.Settings, p.SupervisorEvery, p.BatchWindow
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "run orders through the local stack with every fault injected, and check every invariant",
		Long: `chaos sends orders through a local stack (its queues in process, or moto_server's with --queues
moto; the state store on moto_server, or on DynamoDB Local with --dynamodb-local) with every fault of the design injected at once: dropped, delayed and duplicated
messages, killed handlers, paused agents, transient and permanent remote faults, an outage,
cancels, an operator moving orders in flight to another version of their workflow (--migrate), and
an operator acting on the orders a searchable field's value finds (--bulk). The seed chooses the faults: the same seed replays the same run. It checks each invariant
from the state table and the simulator's ledger, and fails (exit 1) if one broke. With --flow, a
share of the orders runs on shapes with flow control (rate limits, calls in flight per customer,
holds on failure) under a pauser, a storm of 429s and an operator deciding held orders, and the
flow control's own invariants are checked too.`,
		Example: "  sasctl chaos --orders 10000 --in-flight 300 --supervisors 2 --dynamodb-local\n" +
			"  sasctl chaos --orders 2000 --in-flight 300 --flow 0.3 --dynamodb-local",
		Args:    noArgs,
		PreRunE: f.check,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if p.Orders < 1 {
				return usageErrorf("--orders must be at least 1")
			}
			if err := checkQueues(f.queues); err != nil {
				return err
			}
			if p.Migrate < 0 || p.Migrate > 1 {
				return usageErrorf("--migrate is a share from 0 to 1")
			}
			if p.Bulk < 0 {
				return usageErrorf("--bulk is not negative")
			}
			p.Settings, p.SupervisorEvery, p.BatchWindow = f.Overrides, f.SupervisorRate, f.Topology.BatchWindow
			if err := f.flow.plan(&p); err != nil {
				return err
			}
			if f.noFaults {
				p.NoFaults()
			}
			if p.Timeout <= 0 {
				p.Timeout = chaos.DefaultPlan(p.Seed, p.Orders).Timeout // it grows with the orders
			}
			return startFailed(runChaos(cmd.Context(), p, f, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	planFlags(cmd.Flags(), &p)
	fs := cmd.Flags()
	fs.BoolVar(&f.noFaults, "no-faults", false, "inject no fault at all (a burst plan: with --throttle, waiting alone)")
	fs.Float64Var(&f.flow.share, "flow", 0, "share of orders (of those not waiting) run on generated shapes with flow control "+
		"(rate limits, calls in flight per customer, holds on failure), under a pauser, a storm of 429s and an operator deciding held orders")
	fs.IntVar(&f.flow.rate, "flow-rate", 0, "with --flow: the rate-limited agents' calls a second (default: the seed's, 2 to 5)")
	fs.IntVar(&f.flow.burst, "flow-burst", 0, "with --flow-rate: their burst (default 1)")
	fs.IntVar(&f.flow.perKey, "flow-in-flight", 0, "with --flow: the keyed agents' calls at once per customer (default: the seed's, 1 or 2)")
	fs.Float64Var(&f.flow.hold, "flow-hold", chaos.DefaultFlow().Hold, "with --flow: share of the flow shapes' steps that hold the order on failure")
	fs.Float64Var(&f.flow.refuse, "flow-refuse", chaos.DefaultFlow().Refuse, "with --flow: share of the flow agents' actions refused for good")
	fs.StringVar(&f.runDir, "run-dir", ".run", "where logs go")
	fs.BoolVar(&f.dynamodbLocal, "dynamodb-local", false, "keep the state store on DynamoDB Local (SQS and SNS: --queues)")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "where DynamoDB Local is installed on first use (with --dynamodb-local)")
	queuesFlag(fs, &f.queues)
	outputFlag(cmd, &f.output)
	f.bind(fs, without(localSettings, "prefix", "workflows", "backlogDepth", "sealData", "payloadInlineBytes")...) // its own --seal
	return cmd
}

// planFlags puts the chaos plan's own flags on fs.
func planFlags(fs *pflag.FlagSet, p *chaos.Plan) {
	fs.Uint64Var(&p.Seed, "seed", p.Seed, "chooses the faults: the same seed replays the same run")
	fs.IntVar(&p.Orders, "orders", p.Orders, "orders to send")
	fs.Float64Var(&p.Drop, "drop", p.Drop, "share of deliveries dropped (every queue but orders)")
	fs.Float64Var(&p.Delay, "delay", p.Delay, "share of deliveries delayed")
	fs.Float64Var(&p.Duplicate, "duplicate", p.Duplicate, "share of deliveries made twice")
	fs.Float64Var(&p.Crash, "crash", p.Crash, "chance a handler is killed at each crash point")
	fs.Float64Var(&p.Transient, "transient", p.Transient, "share of remote calls answered 503")
	fs.Float64Var(&p.Permanent, "permanent", p.Permanent, "share of remote actions refused for good")
	fs.Float64Var(&p.UndoFailure, "undo-failure", p.UndoFailure, "share of undo actions refused for good")
	fs.Float64Var(&p.StoreFaults, "store-faults", p.StoreFaults, "share of the handlers' DynamoDB requests that fail, half of the writes' applied and their answers lost (the SDK tries them again)")
	fs.Float64Var(&p.Cancel, "cancel", p.Cancel, "share of orders a cancel message is sent for, at a random point")
	fs.Float64Var(&p.Migrate, "migrate", p.Migrate, "share of orders an operator tries to move to another version of their workflow "+
		"(a mutation of it the seed chooses: a timeout raised, an undo changed, a step added or renamed), at a random point, and some back")
	fs.Float64Var(&p.Generated, "generated", p.Generated, "share of orders (of those not waiting) run on workflows of generated shapes")
	fs.Float64Var(&p.Large, "large", p.Large, "share of orders run on the large workflow: documents of 4 KB to 600 KB (kept in the payload bucket, sent by pointer over 256 KB), answers of --large-result bytes")
	fs.BoolVar(&p.Seal, "seal", p.Seal, "seal every order's data, results and events' data under a data key of its own (sealData; KMS: moto's)")
	fs.IntVar(&p.LargeResult, "large-result", p.LargeResult, "with --large: about how many bytes the large workflow's service answers")
	fs.IntVar(&p.AtLimit, "at-limit", p.AtLimit, "with --large: how many of its orders are at the limits: an order of 16 MB whose first step answers 16 MB")
	fs.Float64Var(&p.Hostile, "hostile", p.Hostile, "share of the payloads full of what encoders change (<, >, &, control characters, "+
		"U+FFFD, U+2028; answers with raw control bytes and invalid UTF-8, half of them not JSON), each either side of a limit: "+
		"the large orders' documents, the approvals, the flow orders' keys (141 to 400 bytes), the services' answers")
	fs.IntVar(&p.Shapes, "shapes", p.Shapes, "how many workflows of generated shapes (branches, joins, steps per item, timers, async calls)")
	fs.BoolVar(&p.Search, "search", p.Search, "the generated and flow shapes declare searchable fields, their orders carry values of them, "+
		"and every value searched finds every order that carries it and no other (sealed: none kept in clear)")
	fs.IntVar(&p.Bulk, "bulk", p.Bulk, "with --search: how many actions an operator takes on orders found by a searchable value "+
		"(paced, as sasctl's with a query): a sample cancelled, the Failed resubmitted, with --flow the held retried or undone")
	fs.Var(throttleValue{&p.Throttle}, "throttle", "cap functions' pace, e.g. scheduler=20ms,agent-payment=50ms: each "+
		"message takes that long of the function's one invocation at a time (a function at its maximum concurrency)")
	fs.IntVar(&p.Schedulers, "schedulers", p.Schedulers, "scheduler instances")
	fs.IntVar(&p.Supervisors, "supervisors", p.Supervisors, "supervisor instances")
	fs.DurationVar(&p.Timeout, "timeout", 0, "give up waiting for the orders to end (default: 10m plus 0.5s per order)")
	fs.IntVar(&p.InFlight, "in-flight", p.InFlight, "at most this many orders sent but not ended (0: send all at once)")
}

func runChaos(ctx context.Context, p chaos.Plan, f chaosFlags, stdout, stderr io.Writer) error {
	if err := makeDirs(f.runDir, f.cacheDir); err != nil {
		return err
	}
	endpoint, stop, err := localEndpoint(ctx, f.runDir, stderr)
	if err != nil {
		return err
	}
	defer stop()
	if f.dynamodbLocal {
		ddb, stopDDB, err := localDynamoDB(ctx, f.cacheDir, f.runDir, stderr)
		if err != nil {
			return err
		}
		defer stopDDB()
		p.DynamoDBEndpoint = ddb
	}
	queues, stopQueues, err := localQueues(f.queues, 0, p.Seed, stderr)
	if err != nil {
		return err
	}
	defer stopQueues()
	p.QueuesEndpoint = queues
	logPath := filepath.Join(f.runDir, "chaos.log")
	logs, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("chaos log: %w", err)
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
	if err := emit(stdout, f.output, res, func() { res.Print(stdout) }); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	if n := res.Violations.Count(); n > 0 {
		return fmt.Errorf("%d invariant violations (seed %d replays the run)", n, p.Seed)
	}
	return nil
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

func (t throttleValue) Type() string { return "function=duration,..." }

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
