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

	"github.com/sas-go/sas/shared/costbench"
	"github.com/sas-go/sas/shared/topology"
)

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sasctl bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	p := costbench.DefaultPlan(200)
	fs.IntVar(&p.Orders, "orders", p.Orders, "orders per run (one run per workflow and batch size)")
	workflows := fs.String("workflows", strings.Join(p.Workflows, ","), "workflows to measure: single, order")
	batches := fs.String("batch-sizes", "1,2,5,10", "event source mapping batch sizes, 1 to 10")
	fs.DurationVar(&p.Timeout, "timeout", p.Timeout, "give up on a run after this long")
	fs.DurationVar(&p.BatchWindow, "batch-window", p.BatchWindow, "event source mapping batching window, 0 to 5m (whole seconds)")
	runDir := fs.String("run-dir", ".run", "where emulator logs go")
	cacheDir := fs.String("cache-dir", ".cache", "where DynamoDB Local is installed")
	jsonPath := fs.String("json", ".run/bench.json", "write the result as JSON here (\"\" for none)")
	chartPath := fs.String("chart", ".run/bench.svg", "write the chart (SVG) here (\"\" for none)")
	output := fs.String("output", "text", "text or json (on stdout)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	p.Workflows = strings.Split(*workflows, ",")
	p.BatchSizes = nil
	for _, s := range strings.Split(*batches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 10 {
			fmt.Fprintf(stderr, "sasctl bench: batch size %q: want a whole number from 1 to 10\n", s)
			return 2
		}
		p.BatchSizes = append(p.BatchSizes, n)
	}
	if err := topology.CheckBatchWindow(p.BatchWindow); err != nil {
		fmt.Fprintln(stderr, "sasctl bench: --batch-window", err)
		return 2
	}
	if p.Orders < 1 || *output != "text" && *output != "json" {
		fmt.Fprintln(stderr, "sasctl bench: --orders must be at least 1 and --output text or json")
		return 2
	}
	for _, dir := range []string{*runDir, *cacheDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fail(stderr, "bench", &globals{}, err)
		}
	}
	endpoint, stop, err := localEndpoint(ctx, *runDir)
	if err != nil {
		fmt.Fprintln(stderr, "sasctl bench:", err)
		return 2
	}
	defer stop()
	p.Endpoint = endpoint
	// DynamoDB Local reports the units per table and index (the meter prices
	// them as DynamoDB bills, see accounting.NewForDynamoDBLocal). An
	// AWS_ENDPOINT_URL (LocalStack, which runs DynamoDB Local) serves it all.
	ddb, stopDDB, err := localDynamoDB(ctx, *cacheDir, *runDir, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sasctl bench:", err)
		return 2
	}
	defer stopDDB()
	p.DynamoDBEndpoint = cmp.Or(ddb, endpoint)
	start := time.Now()
	res, err := costbench.Execute(ctx, p, func(s string) {
		fmt.Fprintf(stderr, "  %6.0fs  %s\n", time.Since(start).Seconds(), s)
	})
	if err != nil {
		fmt.Fprintln(stderr, "sasctl bench:", err)
		return 1
	}
	if err := writeFile(*jsonPath, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}); err != nil {
		return fail(stderr, "bench", &globals{}, err)
	}
	if err := writeFile(*chartPath, res.SVG); err != nil {
		return fail(stderr, "bench", &globals{}, err)
	}
	emit(stdout, &globals{output: *output}, res, func() {
		res.Print(stdout)
		for _, f := range []string{*jsonPath, *chartPath} {
			if f != "" {
				fmt.Fprintln(stdout, "wrote", f)
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
