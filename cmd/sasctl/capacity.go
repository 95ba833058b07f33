package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
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
	over, storeLatency   time.Duration
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
retried until its message's receives run out, and its order goes to a DLQ). For each agent with a
rateLimit, the rate it can be given: the least of its limit, what its instances call at (their
concurrency and its service's latency), and what its leases of turns hand out at the state table's
write latency (--store-latency), with the leases and writes a second they take.`,
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
	fs.DurationVar(&f.storeLatency, "store-latency", capacity.StoreLatencyDefault, "a conditional write's round trip to the state table (a rate limit's lease of turns is one)")
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
	h, err := f.handlers(set.Agents())
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
func (f *capacityFlags) handlers(agents []string) (capacity.Handlers, error) {
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
		for _, a := range agents {
			if _, own := h.ServiceLatency[a]; !own {
				h.ServiceLatency[a] = all
			}
		}
	}
	return h, nil
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
	// Rates are what rate each of its rate-limited agents can be given.
	Rates []capacity.AgentRate `json:"agentRates,omitempty"`
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
		if r.Rates, err = m.model.AgentRates(f.storeLatency); err != nil {
			return usageError{err}
		}
		results = append(results, r)
	}
	return emit(out, f.output, results, func() {
		for _, r := range results {
			printCapacity(out, r)
		}
	})
}
