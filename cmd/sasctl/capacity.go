package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/capacity"
	"github.com/sas-go/sas/shared/devkit/costbench"
	"github.com/sas-go/sas/shared/devkit/handlerbench"
	"github.com/sas-go/sas/shared/topology"
)

// capacitySettings are the deployment's settings sasctl capacity takes as
// flags: the ones that move a limit, and the workflows.
var capacitySettings = []string{"workflows", "submissionConcurrency", "schedulerConcurrency", "agentConcurrency",
	"deadlineShards", "targetRate", "supervisorParallelism", "supervisorRate"}

// capacityFlags are sasctl capacity's flags.
type capacityFlags struct {
	settingFlags
	rate, tableWrites    float64
	burst, account       int
	over                 time.Duration
	latency              []string
	benchPath, figures   string
	output               output
	shardsSet, rateGiven bool
}

func capacityCmd() *cobra.Command {
	f := capacityFlags{settingFlags: settingFlags{Settings: deployment.DefaultSettings()}}
	cmd := &cobra.Command{
		Use:   "capacity --rate R [--burst B --for D]",
		Short: "each throughput limit's use at a rate of orders, the first that binds, and what moves it",
		Long: `capacity models a deployment's throughput ceilings (docs/capacity.md): from what an order asks
(its messages, and its write units as sasctl bench counts them: --bench, else estimated), each
handler's throughput per instance (go test -bench Throughput ./shared/devkit/handlerbench: --figures,
else the figures docs/cost.md reports) and the deployment's settings (the same names as its CDK
context), it prints each limit's use at --rate orders a second of each workflow, the first limit that
binds as the rate grows, and the settings or AWS quotas that move each. With --burst, what B orders
arriving over --for meet on top of the rate: the drain time, the queue wait, the alarm that sees it,
and every limit while the backlog drains (a limit over 100% there throttles: a throttled write is
retried until its message's receives run out, and its order goes to a DLQ).`,
		Example: "  sasctl capacity --rate 1000\n" +
			"  sasctl capacity --rate 10000 --target-rate 12000 --submission-concurrency 200 --agent-concurrency 150 --table-writes 200000\n" +
			"  sasctl capacity --rate 0 --burst 100000 --for 1s --service-latency payment=300ms",
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			f.shardsSet, f.rateGiven = cmd.Flags().Changed("deadline-shards"), cmd.Flags().Changed("rate")
			return f.check(cmd, args)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			models, err := f.models()
			if err != nil {
				return usageError{err}
			}
			return runCapacity(cmd.OutOrStdout(), f, models)
		},
	}
	fs := cmd.Flags()
	fs.Float64Var(&f.rate, "rate", 0, "orders a second, steady (required)")
	fs.IntVar(&f.burst, "burst", 0, "orders arriving at once on top of the rate (0: none)")
	fs.DurationVar(&f.over, "for", time.Second, "the time the burst arrives over")
	fs.StringSliceVar(&f.latency, "service-latency", nil, "each service's time to answer: a duration for every agent, or agent=duration (default none: at once)")
	fs.StringVar(&f.benchPath, "bench", "", "a sasctl bench --json file: each workflow's write units an order (default: estimated as docs/cost.md counts them)")
	fs.StringVar(&f.figures, "figures", "", "the output of go test -bench Throughput ./shared/devkit/handlerbench (default: docs/cost.md's figures)")
	fs.IntVar(&f.account, "account-concurrency", capacity.AccountConcurrencyDefault, `the Lambda quota "Concurrent executions"`)
	fs.Float64Var(&f.tableWrites, "table-writes", capacity.TableWritesDefault, `the DynamoDB quota "Table-level write throughput limit" (write units a second)`)
	outputFlag(cmd, &f.output)
	f.bind(fs, capacitySettings...)
	return cmd
}

// capacityModel is one workflow's model.
type capacityModel struct {
	Workflow  string `json:"workflow"`
	Estimated bool   `json:"writesEstimated"` // its write units are estimated, not measured
	model     capacity.Model
}

// models are the model of each workflow, from the flags.
func (f *capacityFlags) models() ([]capacityModel, error) {
	if !f.rateGiven {
		return nil, fmt.Errorf("--rate is required (0 with --burst for a burst alone)")
	}
	if f.TargetRate > 0 {
		if f.shardsSet {
			return nil, fmt.Errorf("--target-rate and --deadline-shards: set one (the target rate sizes the shards)")
		}
		f.Topology.DeadlineShards = topology.ShardsFor(f.TargetRate)
	}
	set, err := deployment.LoadWorkflows(f.WorkflowFiles, "", 0)
	if err != nil {
		return nil, fmt.Errorf("--workflows: %w", err)
	}
	set = set.With(f.Overrides)
	s := capacity.FromDeployment(f.Settings, set)
	s.AccountConcurrency, s.TableWrites = f.account, f.tableWrites
	h, err := f.handlers()
	if err != nil {
		return nil, err
	}
	runs, err := readBench(f.benchPath)
	if err != nil {
		return nil, err
	}
	var out []capacityModel
	for _, def := range set.Definitions() {
		m := capacityModel{Workflow: def.Name, model: capacity.Model{Settings: s, Handlers: h}}
		if run, ok := benchRun(runs, def.Name); ok {
			if m.model.Workload, err = capacity.FromBench(def, run); err != nil {
				return nil, err
			}
		} else {
			m.Estimated, m.model.Workload = true, capacity.Happy(def, capacity.EstimatedStateWrites(def))
		}
		out = append(out, m)
	}
	return out, nil
}

// handlers are the handlers' figures (--figures, or docs/cost.md's) with
// the services' latencies.
func (f *capacityFlags) handlers() (capacity.Handlers, error) {
	h := capacity.Measured()
	if f.figures != "" {
		file, err := os.Open(f.figures)
		if err != nil {
			return h, fmt.Errorf("--figures: %w", err)
		}
		defer file.Close()
		figs, err := handlerbench.ReadFigures(file)
		if err != nil {
			return h, fmt.Errorf("--figures %s: %w", f.figures, err)
		}
		for name, fig := range figs {
			h.Figures[name] = fig
		}
	}
	for _, v := range f.latency {
		agent, d, ok := strings.Cut(v, "=")
		if !ok {
			agent, d = "", v
		}
		lat, err := time.ParseDuration(d)
		if err != nil || lat < 0 {
			return h, fmt.Errorf("--service-latency %q: want a duration, or agent=duration", v)
		}
		h.ServiceLatency[agent] = lat
	}
	if all, ok := h.ServiceLatency[""]; ok {
		delete(h.ServiceLatency, "")
		for _, a := range capacityAgents(f) {
			if _, own := h.ServiceLatency[a]; !own {
				h.ServiceLatency[a] = all
			}
		}
	}
	return h, nil
}

// capacityAgents are the agents of the workflows the flags name.
func capacityAgents(f *capacityFlags) []string {
	set, err := deployment.LoadWorkflows(f.WorkflowFiles, "", 0)
	if err != nil {
		return nil
	}
	return set.Agents()
}

// readBench reads a sasctl bench --json file ("": none).
func readBench(path string) ([]costbench.Run, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--bench: %w", err)
	}
	var doc struct {
		Runs []costbench.Run `json:"runs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("--bench %s: %w", path, err)
	}
	return doc.Runs, nil
}

// benchRun is the workflow's run at the deployment's batch size, its
// services answering nothing.
func benchRun(runs []costbench.Run, wf string) (costbench.Run, bool) {
	for _, r := range runs {
		if r.Workflow == wf && r.BatchSize == capacity.BatchSizeDefault && r.ResultBytes == 0 {
			return r, true
		}
	}
	return costbench.Run{}, false
}

// capacityResult is one workflow's report, as --output json prints it.
type capacityResult struct {
	capacityModel
	Report capacity.Report       `json:"report"`
	Burst  *capacity.BurstReport `json:"burst,omitempty"`
}

func runCapacity(out io.Writer, f capacityFlags, models []capacityModel) error {
	var results []capacityResult
	for _, m := range models {
		r := capacityResult{capacityModel: m}
		var err error
		if r.Report, err = m.model.At(f.rate); err != nil {
			return usageError{err}
		}
		if f.burst > 0 {
			b, err := m.model.Burst(f.burst, f.over, f.rate)
			if err != nil {
				return usageError{err}
			}
			r.Burst = &b
		}
		results = append(results, r)
	}
	return emit(out, f.output, results, func() {
		for _, r := range results {
			printCapacity(out, r)
		}
	})
}

// printCapacity prints one workflow's report as text.
func printCapacity(out io.Writer, r capacityResult) {
	how := "measured by sasctl bench"
	if r.Estimated {
		how = "estimated"
	}
	fmt.Fprintf(out, "workflow %s at %s orders a second (write units %s)\n", r.Workflow, num(r.Report.Rate), how)
	printLimits(out, r.Report.Limits)
	b := r.Report.Binding
	fmt.Fprintf(out, "binds first: %s, at %s orders a second; moved by %s\n", b.Name, num(b.Ceiling), b.Moves)
	if r.Burst != nil {
		printBurst(out, *r.Burst)
	}
	fmt.Fprintln(out)
}

func printLimits(out io.Writer, limits []capacity.Limit) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  limit\tuse\tof\tunit\tuse %\torders/s at 100%\tmoved by")
	for _, l := range limits {
		name := l.Name
		if l.Transient {
			name += " (lifts by itself)"
		}
		ceiling := "—"
		if l.Ceiling > 0 {
			ceiling = num(l.Ceiling)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%.0f%%\t%s\t%s\n", name, num(l.Use), num(l.Max), l.Unit, 100*l.Utilization(),
			ceiling, l.Moves)
	}
	_ = tw.Flush()
}

func printBurst(out io.Writer, b capacity.BurstReport) {
	fmt.Fprintf(out, "burst: %d orders over %s on top of %s a second: they arrive at %s a second; the pipeline takes %s (%s)\n",
		b.Orders, b.Over, num(b.Rate), num(b.Arrival), num(b.Drain), b.Bottleneck)
	if !b.Drains {
		fmt.Fprintf(out, "  it never drains: the steady rate is at or above what the pipeline takes\n")
		return
	}
	fmt.Fprintf(out, "  backlog %s orders, drained %s after the burst starts; queue wait at most %s, %s on average (%s: %s)\n",
		num(b.Backlog), b.DrainTime.Round(100*time.Millisecond), b.MaxWait.Round(100*time.Millisecond),
		b.MeanWait.Round(100*time.Millisecond), b.Alarm, map[bool]string{true: "alarms", false: "stays quiet"}[b.Alarmed])
	fmt.Fprintf(out, "  while it drains (%s orders a second, %.2f Supervisor looks an order):\n", num(b.AtDrain.Rate), b.LooksPerOrder)
	printLimits(out, b.AtDrain.Limits)
	over := 0
	for _, l := range b.AtDrain.Limits {
		if l.Utilization() > 1 && !l.Transient {
			fmt.Fprintf(out, "  over its limit: %s (%.0f%%): %s\n", l.Name, 100*l.Utilization(), overMeans(l))
			over++
		}
	}
	if over == 0 {
		fmt.Fprintln(out, "  no limit passes 100% while it drains: no order fails")
	}
}

// overMeans is what a limit over its maximum does to the orders.
func overMeans(l capacity.Limit) string {
	switch l.Unit {
	case "seconds":
		return "the looks fall behind: a hung attempt is recovered, a deadline enforced, later (no order fails for it)"
	case "write units/s":
		return "writes are throttled and retried; a message past its queue's receives goes to the DLQ, its order with it"
	}
	return "more than it takes: the excess waits, or is refused"
}

// num prints a figure to three significant digits, with thousands
// separators.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return commas(int64(v + 0.5))
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
