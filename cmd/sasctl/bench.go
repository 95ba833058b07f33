package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/devkit/costbench"
	"github.com/sas-go/sas/shared/topology"
)

// benchFlags are sasctl bench's flags.
type benchFlags struct {
	plan                                  costbench.Plan
	runDir, cacheDir, jsonPath, chartPath string
	output                                string
}

func parseBench(args []string, stderr io.Writer) (benchFlags, error) {
	fs := flag.NewFlagSet("sasctl bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := benchFlags{plan: costbench.DefaultPlan(200)}
	p := &f.plan
	fs.IntVar(&p.Orders, "orders", p.Orders, "orders per run (one run per workflow and batch size)")
	workflows := fs.String("workflows", strings.Join(p.Workflows, ","), "workflows to measure: single, order")
	batches := fs.String("batch-sizes", "1,2,5,10", "event source mapping batch sizes, 1 to 10")
	results := fs.String("result-bytes", "0", "sizes of the services' answers, each kept as its step's result (0: none), e.g. 0,1024")
	fs.DurationVar(&p.Timeout, "timeout", p.Timeout, "give up on a run after this long")
	fs.DurationVar(&p.BatchWindow, "batch-window", p.BatchWindow, "event source mapping batching window, 0 to 5m (whole seconds)")
	fs.StringVar(&f.runDir, "run-dir", ".run", "where emulator logs go")
	fs.StringVar(&f.cacheDir, "cache-dir", ".cache", "where DynamoDB Local is installed")
	fs.StringVar(&f.jsonPath, "json", ".run/bench.json", "write the result as JSON here (\"\" for none)")
	fs.StringVar(&f.chartPath, "chart", ".run/bench.svg", "write the chart (SVG) here (\"\" for none)")
	fs.StringVar(&f.output, "output", "text", "text or json (on stdout)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	p.Workflows = strings.Split(*workflows, ",")
	var err error
	if p.BatchSizes, err = batchSizes(*batches); err != nil {
		return f, err
	}
	for _, v := range strings.Split(*results, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > workflowMaxResult {
			return f, fmt.Errorf("result size %q: want bytes from 0 to %d", v, workflowMaxResult)
		}
		p.ResultBytes = append(p.ResultBytes, n)
	}
	if err := topology.CheckBatchWindow(p.BatchWindow); err != nil {
		return f, fmt.Errorf("--batch-window %w", err)
	}
	if p.Orders < 1 || f.output != "text" && f.output != "json" {
		return f, errors.New("--orders must be at least 1 and --output text or json")
	}
	return f, nil
}

// workflowMaxResult is the largest answer a bench may ask for: the default
// result limit (the example workflows set none).
const workflowMaxResult = 4096

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

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseBench(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "sasctl bench:", err)
		return 2
	}
	for _, dir := range []string{f.runDir, f.cacheDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fail(stderr, "bench", &globals{}, err)
		}
	}
	endpoint, stop, err := localEndpoint(ctx, f.runDir, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sasctl bench:", err)
		return 2
	}
	defer stop()
	f.plan.Endpoint = endpoint
	// DynamoDB Local reports the units per table and index (the meter prices
	// them as DynamoDB bills, see accounting.NewForDynamoDBLocal). An
	// AWS_ENDPOINT_URL (LocalStack, which runs DynamoDB Local) serves it all.
	ddb, stopDDB, err := localDynamoDB(ctx, f.cacheDir, f.runDir, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sasctl bench:", err)
		return 2
	}
	defer stopDDB()
	f.plan.DynamoDBEndpoint = cmp.Or(ddb, endpoint)
	return runBench(ctx, f, stdout, stderr)
}

// runBench runs the plan and writes its results.
func runBench(ctx context.Context, f benchFlags, stdout, stderr io.Writer) int {
	start := time.Now()
	res, err := costbench.Execute(ctx, f.plan, func(s string) {
		fmt.Fprintf(stderr, "  %6.0fs  %s\n", time.Since(start).Seconds(), s)
	})
	if err != nil {
		fmt.Fprintln(stderr, "sasctl bench:", err)
		return 1
	}
	if err := writeFile(f.jsonPath, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}); err != nil {
		return fail(stderr, "bench", &globals{}, err)
	}
	if err := writeFile(f.chartPath, res.SVG); err != nil {
		return fail(stderr, "bench", &globals{}, err)
	}
	emit(stdout, &globals{output: f.output}, res, func() {
		res.Print(stdout)
		for _, path := range []string{f.jsonPath, f.chartPath} {
			if path != "" {
				fmt.Fprintln(stdout, "wrote", path)
			}
		}
	})
	return 0
}

// writeFile writes path (nothing if path is "") with fn.
func writeFile(path string, fn func(io.Writer) error) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
