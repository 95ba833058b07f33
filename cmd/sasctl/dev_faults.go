package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/devkit/remotesim"
)

// faultFlags are the flags that change the remote simulator's faults.
type faultFlags struct{ change remotesim.Change }

func (f *faultFlags) register(fs *flag.FlagSet) {
	share := func(dst **float64) func(string) error {
		return func(v string) error {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("%q is not a number", v)
			}
			*dst = &x
			return nil
		}
	}
	fs.Func("transient", "share of remote calls answered with a transient 503 (0..1)", share(&f.change.Transient))
	fs.Func("permanent", "share of remote calls refused for good with a 422 (0..1): their orders fail and are undone", share(&f.change.Permanent))
	fs.Func("latency", "latency added to every remote call, such as 200ms", func(v string) error {
		f.change.Latency = &v
		return nil
	})
	fs.Func("outage", "SERVICE:DURATION, such as payment:2m: the service answers 503 for that long, from now (repeatable)", func(v string) error {
		o, err := remotesim.ParseOutage(v)
		f.change.Outages = append(f.change.Outages, o)
		return err
	})
	fs.StringVar(&f.change.Service, "service", "", "set --transient, --permanent and --latency on this service only (inventory, payment, shipping)")
	fs.BoolVar(&f.change.Clear, "clear", false, "clear every fault first")
}

// devFaults changes (or with no flag shows) the faults of the sasctl dev
// running from the run folder, through its control endpoint.
func devFaults(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	runDir, change, apply, code := parseDevFaults(args, stderr)
	if code >= 0 {
		return code
	}
	lines, err := callControl(ctx, runDir, apply, change)
	if err != nil {
		fmt.Fprintln(stderr, "sasctl dev faults:", err)
		return 1
	}
	fmt.Fprintln(stdout, "faults now:")
	if len(lines) == 0 {
		fmt.Fprintln(stdout, "  none: every remote call succeeds")
	}
	for _, l := range lines {
		fmt.Fprintf(stdout, "  %s: %s\n", l.Service, l.Faults)
	}
	return 0
}

// parseDevFaults reads sasctl dev faults' flags: the run folder, the change,
// and whether there is one (no flag but --run-dir: show the faults). It
// returns an exit code (>= 0) when the command must stop.
func parseDevFaults(args []string, stderr io.Writer) (runDir string, c remotesim.Change, apply bool, code int) {
	fs := flag.NewFlagSet("sasctl dev faults", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&runDir, "run-dir", ".run", "the run folder of the sasctl dev to change")
	var ff faultFlags
	ff.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return runDir, c, false, 0
		}
		return runDir, c, false, 2
	}
	err := ff.change.Validate()
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(stderr, "sasctl dev faults:", strings.ReplaceAll(err.Error(), "\n", "; "))
		return runDir, c, false, 2
	}
	fs.Visit(func(f *flag.Flag) { apply = apply || f.Name != "run-dir" })
	return runDir, ff.change, apply, -1
}

// callControl sends the change (or, if !apply, asks for the faults) to the
// control endpoint that dev.json names.
func callControl(ctx context.Context, runDir string, apply bool, c remotesim.Change) ([]faultLine, error) {
	s, err := readDevState(runDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	method, body := http.MethodGet, []byte(nil)
	if apply {
		method, body = http.MethodPost, mustJSON(c)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.Control+"/faults", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("control endpoint %q in dev.json: %w", s.Control, err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sasctl dev (pid %d) does not answer at %s: is it still running? %w", s.PID, s.Control, err)
	}
	defer resp.Body.Close()
	return readFaultLines(resp)
}

// readFaultLines reads the control endpoint's answer: the faults, or why not.
func readFaultLines(resp *http.Response) ([]faultLine, error) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", strings.TrimSpace(string(b)))
	}
	var lines []faultLine
	if err := json.Unmarshal(b, &lines); err != nil {
		return nil, fmt.Errorf("control endpoint answered %q: %w", b, err)
	}
	return lines, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
