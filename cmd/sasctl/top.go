package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

func topCmd() *cobra.Command {
	var r refreshing
	return refreshCmd(&cobra.Command{
		Use:   "top",
		Short: "each workflow's health: orders started and ended, failure rate, durations, in flight",
		Long: `top prints, per workflow and version, over the last hour (this clock hour and the previous one) and
day (the last 24 clock hours and this one): the orders started, ended by state, the failure rate
(ended Failed or CompensationFailed) and compensation rate (their undo actions ran), the p50/p95/p99
of an order's duration and of each step's (a percentile is the upper bound of its latency bucket);
and the orders in flight now, by what they wait on. It reads the hourly counts the writes that end
orders keep and the in-flight index, never the whole state table. The console's health page shows
the same; in AWS, so do the CloudWatch metrics and the stack's dashboard.`,
		Example: "  sasctl top\n  sasctl top --once -o json",
	}, &r, 5*time.Second, "print once and exit", func(cmd *cobra.Command, op *operator.Operator) error {
		return r.top(cmd.Context(), op, cmd.OutOrStdout())
	})
}

// topView is what top prints (its --output json).
type topView struct {
	At        time.Time                 `json:"at"`
	Workflows []operator.WorkflowHealth `json:"workflows"`
}

// top prints the health every period until --once or ctx ends.
func (r *refreshing) top(ctx context.Context, op *operator.Operator, out io.Writer) error {
	return r.loop(ctx, func() (bool, error) {
		now := time.Now()
		hs, err := op.Health(ctx, now)
		if err != nil {
			return false, r.t.explain(err)
		}
		v := topView{At: now.UTC(), Workflows: hs}
		return r.once, emit(out, r.t.output, v, func() { v.print(out) })
	})
}

// topStates are the end states top has a column for.
var topStates = []workflow.State{workflow.Processed, workflow.Failed, workflow.CompensationFailed, workflow.Cancelled}

// print writes the view as two tables: the orders, then the steps.
func (v topView) print(out io.Writer) {
	fmt.Fprintf(out, "%s: %d workflow versions\n", v.At.Format(time.RFC3339), len(v.Workflows))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tVERSION\tWINDOW\tSTARTED\tPROCESSED\tFAILED\tCOMP.FAILED\tCANCELLED\tFAILURE\tCOMPENSATION\tORDER DURATION\tIN FLIGHT")
	for _, h := range v.Workflows {
		for _, w := range []struct {
			name string
			f    operator.Figures
		}{{"hour", h.Hour}, {"day", h.Day}} {
			cells := []string{h.Workflow, h.Version, w.name, fmt.Sprint(w.f.Started)}
			for _, st := range topStates {
				cells = append(cells, fmt.Sprint(w.f.Ended[st]))
			}
			cells = append(cells, fmt.Sprintf("%.1f%%", 100*w.f.FailureRate), fmt.Sprintf("%.1f%%", 100*w.f.CompensationRate),
				w.f.Order.Text(), inFlightText(h))
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tVERSION\tSTEP\tDONE (DAY)\tDURATION (DAY)")
	for _, h := range v.Workflows {
		for _, s := range h.Day.Steps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", h.Workflow, h.Version, s.Name, s.Count, s.Text())
		}
	}
	_ = tw.Flush()
}

// inFlightText is "3 (at work 2, held 1)".
func inFlightText(h operator.WorkflowHealth) string {
	var parts []string
	for _, why := range slices.Sorted(maps.Keys(h.Waiting)) {
		parts = append(parts, fmt.Sprintf("%s %d", why, h.Waiting[why]))
	}
	if len(parts) == 0 {
		return fmt.Sprint(h.InFlight)
	}
	return fmt.Sprintf("%d (%s)", h.InFlight, strings.Join(parts, ", "))
}
