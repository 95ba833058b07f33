package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/sas-go/sas/shared/devkit/capacity"
)

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
	for _, a := range r.Rates {
		printAgentRate(out, a)
	}
	fmt.Fprintln(out)
}

// printAgentRate prints what rate a rate-limited agent can be given.
func printAgentRate(out io.Writer, a capacity.AgentRate) {
	least, most := a.Writes()
	fmt.Fprintf(out, "agent %s, rateLimit %s (%s): it can be given %s calls a second; bound by %s\n", a.Agent, a.Limit, a.Meaning,
		num(a.Given), a.BoundBy)
	fmt.Fprintf(out, "  its %d instances call at up to %s a second; at a %s write its leases hand out up to %s turns a second "+
		"(up to %s a lease; one turn a write: %s)\n", a.Instances, num(a.Callers), a.StoreLatency, num(a.Store), turns(a.MaxLease),
		num(a.OneAWrite))
	writes := fmt.Sprintf("about %s conditional writes a second, one a lease", num(least))
	if most > least {
		writes = fmt.Sprintf("%s to %s conditional writes a second (one a lease; while the limit binds, each instance waiting races "+
			"for the next)", num(least), num(most))
	}
	fmt.Fprintf(out, "  leases of %s, %s a second: %s\n", turns(a.Lease), num(a.Leases), writes)
}

// turns is n turns, in words.
func turns(n int) string {
	if n == 1 {
		return "1 turn"
	}
	return fmt.Sprintf("%d turns", n)
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
