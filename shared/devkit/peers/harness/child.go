package harness

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"
)

// Config is a child process's run: its engine, the workload, where it writes.
type Config struct {
	Engine     string
	One, Burst int // orders one at a time, then at once
	Warmup     int // orders run first and not counted
	Timeout    time.Duration
	RunDir     string // where the engine's logs go
	CacheDir   string // where DynamoDB Local is installed on first use
	ServiceURL string // the one local service every step calls
}

// Args are the command-line arguments that give a child c.
func (c Config) Args() []string {
	return []string{"--child", c.Engine, "--one", fmt.Sprint(c.One), "--burst", fmt.Sprint(c.Burst),
		"--warmup", fmt.Sprint(c.Warmup), "--timeout", c.Timeout.String(), "--run-dir", c.RunDir,
		"--cache-dir", c.CacheDir, "--service", c.ServiceURL}
}

// Bind registers c's flags on fs, with the parent's defaults.
func (c *Config) Bind(fs *flag.FlagSet) {
	fs.StringVar(&c.Engine, "child", "", "run this one engine and print its figures as JSON (what the parent runs)")
	fs.IntVar(&c.One, "one", 50, "orders sent one after another, each alone (p50/p95 from send to end)")
	fs.IntVar(&c.Burst, "burst", 1000, "orders sent at once (drain time, orders/s, CPU)")
	fs.IntVar(&c.Warmup, "warmup", 3, "orders run first and not counted (connections, caches)")
	fs.DurationVar(&c.Timeout, "timeout", 15*time.Minute, "give an engine up after this long")
	fs.StringVar(&c.RunDir, "run-dir", ".run/peers", "where each engine's logs go")
	fs.StringVar(&c.CacheDir, "cache-dir", defaultCacheDir(), "where DynamoDB Local is installed on first use")
	fs.StringVar(&c.ServiceURL, "service", "", "the service's base URL (a child's; the parent starts it)")
}

// defaultCacheDir is where sasctl installs DynamoDB Local: SAS_CACHE_DIR,
// else the user's cache directory under sas.
func defaultCacheDir() string {
	if d := os.Getenv("SAS_CACHE_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return d + "/sas"
	}
	return ".cache"
}

// Result is what one engine's run measured.
type Result struct {
	Engine      string    `json:"engine"`
	Unavailable string    `json:"unavailable,omitempty"` // why it could not run here
	Error       string    `json:"error,omitempty"`       // why the run failed
	StartupSec  float64   `json:"startupSeconds"`
	One         int       `json:"one"`
	P50MS       float64   `json:"p50ms"`
	P95MS       float64   `json:"p95ms"`
	Burst       int       `json:"burst"`
	DrainSec    float64   `json:"drainSeconds"`
	Procs       []ProcUse `json:"processes"` // CPU over the burst, memory over the run
	PeakMB      float64   `json:"peakMB"`    // the peak of every process's memory together
}

// Logf writes a progress line on stderr.
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "  "+format+"\n", args...)
}

// RunChild starts the engine (an error there: it is not available here),
// runs the workload, stops it and prints the Result as JSON on stdout. self
// names the engine's own process in the figures.
func RunChild(ctx context.Context, c Config, self string, start func(context.Context) (Engine, error)) error {
	r := Result{Engine: c.Engine, One: c.One, Burst: c.Burst}
	if err := measure(ctx, c, self, start, &r); err != nil {
		r.Error = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return fmt.Errorf("print the result: %w", err)
	}
	return nil
}

func measure(ctx context.Context, c Config, self string, start func(context.Context) (Engine, error), r *Result) (err error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	began := time.Now()
	meter := StartMeter(self)
	e, err := start(ctx)
	if err != nil {
		meter.Stop()
		r.Unavailable = err.Error()
		return nil
	}
	defer func() {
		if cerr := e.Close(); err == nil {
			err = cerr
		}
	}()
	r.StartupSec = time.Since(began).Seconds()
	Logf("started in %.1fs; %d warm-up orders", r.StartupSec, c.Warmup)
	if _, err := Latencies(ctx, e, "warm", c.Warmup); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	lat, err := Latencies(ctx, e, "one", c.One)
	if err != nil {
		return err
	}
	r.P50MS, r.P95MS = ms(Percentile(lat, 0.50)), ms(Percentile(lat, 0.95))
	Logf("%d orders one at a time: p50 %.1f ms, p95 %.1f ms; now %d at once", c.One, r.P50MS, r.P95MS, c.Burst)
	meter.Restart()
	drain, err := Burst(ctx, e, "burst", c.Burst)
	if err != nil {
		return err
	}
	r.Procs, r.PeakMB = meter.Stop()
	r.DrainSec = drain.Seconds()
	Logf("%d at once drained in %.1fs (%.1f orders/s)", c.Burst, r.DrainSec, float64(c.Burst)/r.DrainSec)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
