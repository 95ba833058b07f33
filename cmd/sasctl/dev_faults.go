package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sas-go/sas/shared/devkit/remotesim"
)

// faultFlags are the flags that change the remote simulator's faults.
type faultFlags struct{ change remotesim.Change }

func (f *faultFlags) register(fs *pflag.FlagSet) {
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

func devFaultsCmd() *cobra.Command {
	var (
		runDir string
		ff     faultFlags
	)
	cmd := &cobra.Command{
		Use:   "faults",
		Short: "show or change the faults of the remote simulator of a running sasctl dev",
		Long: `faults changes the faults of the remote-service simulator of the sasctl dev that runs from the run
folder, through its control endpoint (its address and token are in <run-dir>/dev.json); with no
flag but --run-dir, it shows the faults in effect.`,
		Example: "  sasctl dev faults --transient 0.3 --outage payment:2m\n  sasctl dev faults --clear",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := ff.change.Validate(); err != nil {
				return usageErrorf("%s", strings.ReplaceAll(err.Error(), "\n", "; "))
			}
			apply := false
			cmd.Flags().Visit(func(f *pflag.Flag) { apply = apply || f.Name != "run-dir" })
			lines, err := callControl(cmd.Context(), runDir, apply, ff.change)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, "faults now:")
			if len(lines) == 0 {
				fmt.Fprintln(out, "  none: every remote call succeeds")
			}
			for _, l := range lines {
				fmt.Fprintf(out, "  %s: %s\n", l.Service, l.Faults)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&runDir, "run-dir", ".run", "the run folder of the sasctl dev to change")
	ff.register(cmd.Flags())
	return cmd
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
