package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/sas-go/sas/shared/devkit/peers/harness"
)

// printTable writes the figures as a Markdown table, then each peer's as
// ratios to this product's, then where each engine's CPU and memory went.
func printTable(out io.Writer, rs []harness.Result, burst int) {
	fmt.Fprintf(out, "| engine | one alone p50 / p95 | %d at once | orders/s | CPU s | CPU ms an order | peak memory |\n", burst)
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|")
	for _, r := range rs {
		if reason := why(r); reason != "" {
			fmt.Fprintf(out, "| %s | %s | | | | | |\n", labels[r.Engine], reason)
			continue
		}
		fmt.Fprintf(out, "| %s | %s / %s ms | %.1f s | %.1f | %s | %.1f | %s MB |\n", labels[r.Engine],
			num(r.P50MS), num(r.P95MS), r.DrainSec, rate(r), seconds(cpu(r)), 1000*cpu(r)/float64(r.Burst), thousands(rss(r)))
	}
	base, ok := find(rs, "sas")
	if ok && why(base) == "" {
		fmt.Fprintln(out, "\nEach peer's figure divided by this product's (under 1: the peer is faster, or uses less):")
		fmt.Fprintln(out, "\n| engine | p50 | p95 | drain time | CPU s | peak memory |")
		fmt.Fprintln(out, "|---|---|---|---|---|---|")
		for _, r := range rs {
			if r.Engine == "sas" || why(r) != "" {
				continue
			}
			fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s |\n", labels[r.Engine], ratio(r.P50MS, base.P50MS),
				ratio(r.P95MS, base.P95MS), ratio(r.DrainSec, base.DrainSec), ratio(cpu(r), cpu(base)), ratio(rss(r), rss(base)))
		}
	}
	fmt.Fprintln(out, "\nWhere the burst's CPU seconds and the memory went (memory: the peak of the processes' proportional set sizes "+
		"(PSS) added up, sampled every 250 ms over the whole run; memory processes share counts once):")
	for _, r := range rs {
		if why(r) == "" {
			fmt.Fprintf(out, "- %s: %s\n", labels[r.Engine], breakdown(r))
		}
	}
	for _, r := range rs {
		if why(r) != "" {
			fmt.Fprintf(out, "- %s: %s\n", labels[r.Engine], why(r))
		}
	}
}

// why is why the engine has no figures ("" if it has).
func why(r harness.Result) string {
	switch {
	case r.Unavailable != "":
		return "not available: " + r.Unavailable
	case r.Error != "":
		return "failed: " + r.Error
	}
	return ""
}

func rate(r harness.Result) float64 { return float64(r.Burst) / r.DrainSec }

func cpu(r harness.Result) (s float64) {
	for _, p := range r.Procs {
		s += p.CPUSeconds
	}
	return s
}

func rss(r harness.Result) float64 { return r.PeakMB }

func breakdown(r harness.Result) string {
	var parts []string
	for _, p := range r.Procs {
		n := p.Name
		if p.Count > 1 {
			n = fmt.Sprintf("%s (%d processes)", n, p.Count)
		}
		parts = append(parts, fmt.Sprintf("%s %s s, %s MB", n, seconds(p.CPUSeconds), thousands(p.PeakMB)))
	}
	return strings.Join(parts, "; ")
}

func find(rs []harness.Result, engine string) (harness.Result, bool) {
	for _, r := range rs {
		if r.Engine == engine {
			return r, true
		}
	}
	return harness.Result{}, false
}

// ratio is a ÷ b, as ×0.25.
func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	v := a / b
	if v < 0.1 {
		return fmt.Sprintf("×%.3f", v)
	}
	return fmt.Sprintf("×%.2f", v)
}

// num is a latency in ms with a precision that fits it.
func num(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// thousands is v rounded, with commas.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// seconds is a CPU time with a precision that fits it.
func seconds(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
