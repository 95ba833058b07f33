package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/costbench"
	"github.com/sas-go/sas/shared/workflow"
)

// benchFlags are sasctl bench's flags.
type benchFlags struct {
	settingFlags
	plan                                  costbench.Plan
	examples, batches, results, payloads  string
	runDir, cacheDir, jsonPath, chartPath string
	output                                output
	queues                                string // --queues: moto or in-process
}

func benchCmd() *cobra.Command {
	f := benchFlags{plan: costbench.DefaultPlan(200), settingFlags: settingFlags{Settings: deployment.DefaultSettings()}}
	f.Topology.BatchWindow = f.plan.BatchWindow
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "count every AWS request of N orders, price them, compare with Step Functions",
		Long: `bench runs N orders of each example workflow (single, order) at each batch size against the
in-process queues (--queues), moto_server and DynamoDB Local, counts every AWS request (an SDK middleware) and DynamoDB's consumed capacity,
prices them at us-east-1 list prices, and compares with Step Functions Standard. Lambda time is
priced from what the invocations did at AWS's latencies (the time measured against the emulators
moves with the machine's load; it is printed beside). It writes the result as JSON and an SVG chart.`,
		Example: "  sasctl bench --orders 200 --batch-sizes 10\n  sasctl bench --result-bytes 0,1024",
		Args:    noArgs,
		PreRunE: f.check,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.parse(); err != nil {
				return usageError{err}
			}
			return startFailed(runBench(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	fs, p := cmd.Flags(), &f.plan
	fs.IntVar(&p.Orders, "orders", p.Orders, "orders per run (one run per workflow and batch size)")
	fs.StringVar(&f.examples, "examples", strings.Join(p.Workflows, ","), "the example workflows to measure: single, order")
	fs.StringVar(&f.batches, "batch-sizes", "1,2,5,10", "event source mapping batch sizes, 1 to 10")
	fs.StringVar(&f.results, "result-bytes", "0", "sizes of the services' answers, each kept as its step's result (0: none), e.g. 0,1024")
	fs.BoolVar(&p.Seal, "seal", false, "seal every order's data under a data key of its own (sealData), its KMS requests counted and priced")
	fs.StringVar(&f.payloads, "payload-bytes", "", "sizes of order and answers to run the order workflow with besides, e.g. "+
		"1024,307200,4194304,16777216 (kept in the payload bucket over the inline limit; fewer orders for the largest)")
	fs.DurationVar(&p.Timeout, "timeout", p.Timeout, "give up on a run after this long")
	fs.DurationVar(&p.Lambda.ServiceLatency, "service-latency", 0,
		"price each agent's call as its service answering in this long (the simulator answers at once)")
	fs.StringVar(&f.runDir, "run-dir", ".run", "where emulator logs go")
	fs.StringVar(&f.cacheDir, "cache-dir", defaultCacheDir(), "where DynamoDB Local is installed")
	fs.StringVar(&f.jsonPath, "json", ".run/bench.json", "write the result as JSON here (\"\" for none)")
	fs.StringVar(&f.chartPath, "chart", ".run/bench.svg", "write the chart (SVG) here (\"\" for none)")
	queuesFlagAs(fs, &f.queues, benchQueues())
	outputFlag(cmd, &f.output)
	f.bind(fs, "batchWindowSeconds")
	return cmd
}

// parse reads the list flags into the plan.
func (f *benchFlags) parse() error {
	p := &f.plan
	p.Workflows, p.BatchWindow = strings.Split(f.examples, ","), f.Topology.BatchWindow
	var err error
	if p.BatchSizes, err = batchSizes(f.batches); err != nil {
		return err
	}
	for _, v := range strings.Split(f.results, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > workflowMaxResult {
			return fmt.Errorf("result size %q: want bytes from 0 to %d", v, workflowMaxResult)
		}
		p.ResultBytes = append(p.ResultBytes, n)
	}
	for _, v := range strings.Split(f.payloads, ",") {
		if strings.TrimSpace(v) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 256 || n > workflow.MaxResultLimit {
			return fmt.Errorf("payload size %q: want bytes from 256 to %d", v, workflow.MaxResultLimit)
		}
		p.PayloadBytes = append(p.PayloadBytes, n)
	}
	if p.Orders < 1 {
		return errors.New("--orders must be at least 1")
	}
	if err := checkQueues(f.queues); err != nil {
		return err
	}
	return nil
}

// workflowMaxResult is the largest answer a bench may ask for: the default
// result limit (the example workflows set none).
const workflowMaxResult = workflow.DefaultResultLimit

// batchSizes parses --batch-sizes.
func batchSizes(list string) ([]int, error) {
	var sizes []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 10 {
			return nil, fmt.Errorf("batch size %q: want a whole number from 1 to 10", s)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// runBench starts the emulators, runs the plan and writes its results.
func runBench(ctx context.Context, f benchFlags, stdout, stderr io.Writer) error {
	if err := makeDirs(f.runDir, f.cacheDir); err != nil {
		return err
	}
	endpoint, stop, err := localEndpoint(ctx, f.runDir, stderr)
	if err != nil {
		return err
	}
	defer stop()
	f.plan.Endpoint = endpoint
	queues, stopQueues, err := localQueues(f.queues, 0, rand.Uint64(), stderr)
	if err != nil {
		return err
	}
	defer stopQueues()
	f.plan.QueuesEndpoint = queues
	// DynamoDB Local reports the units per table and index (the meter prices
	// them as DynamoDB bills, see accounting.NewForDynamoDBLocal). An
	// AWS_ENDPOINT_URL (LocalStack, which runs DynamoDB Local) serves it all.
	ddb, stopDDB, err := localDynamoDB(ctx, f.cacheDir, f.runDir, stderr)
	if err != nil {
		return err
	}
	defer stopDDB()
	f.plan.DynamoDBEndpoint = cmp.Or(ddb, endpoint)
	return measure(ctx, f, stdout, stderr)
}

// measure runs the plan and writes its results.
func measure(ctx context.Context, f benchFlags, stdout, stderr io.Writer) error {
	start := time.Now()
	res, err := costbench.Execute(ctx, f.plan, func(s string) {
		fmt.Fprintf(stderr, "  %6.0fs  %s\n", time.Since(start).Seconds(), s)
	})
	if err != nil {
		return err
	}
	if err := writeFile(f.jsonPath, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}); err != nil {
		return err
	}
	if err := writeFile(f.chartPath, res.SVG); err != nil {
		return err
	}
	return emit(stdout, f.output, res, func() {
		res.Print(stdout)
		for _, path := range []string{f.jsonPath, f.chartPath} {
			if path != "" {
				fmt.Fprintln(stdout, "wrote", path)
			}
		}
	})
}

// writeFile writes path (nothing if path is "") with fn.
func writeFile(path string, fn func(io.Writer) error) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
