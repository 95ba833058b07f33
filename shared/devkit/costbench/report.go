package costbench

import (
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// Print writes the result as tables: per order, and per million orders.
func (r Result) Print(w io.Writer) {
	fmt.Fprintf(w, "Cost per order, measured from every AWS request of %d orders per run (us-east-1 list prices),\n"+
		"batching window %gs\n\n", r.Orders, r.BatchWindowSeconds)
	fmt.Fprintf(w, "%-8s %7s %5s %6s %9s %9s %9s %9s %9s %7s | %9s %9s %9s %9s | %9s %9s %7s | %7s %9s\n",
		"workflow", "results", "batch", "fill", "SQS req", "Lambda", "GB-s", "DDB RRU", "DDB WRU", "log B",
		"$/M SQS", "$/M λ", "$/M DDB", "$/M logs", "$/M total", "SFN Std", "ratio", "p50", "@128MB")
	for _, run := range r.Runs {
		if run.PayloadBytes > 0 {
			continue // their own table
		}
		u, c := run.PerOrder, run.Cost
		fmt.Fprintf(w, "%-8s %7s %5d %6.1f %9.2f %9.2f %9.5f %9.2f %9.2f %7.0f | %9.2f %9.2f %9.2f %9.2f | %9.2f %9.2f %6.1fx | %6.2fs %9.2f\n",
			run.Workflow, resultsLabel(run.ResultBytes), run.BatchSize, run.MeanBatch, u.SQSRequests, u.LambdaInvocations, u.LambdaGBSeconds,
			u.ReadUnits, u.WriteUnits, u.LogBytes, c.SQS, c.Lambda, c.DynamoDB, c.Logs, c.Total, run.SFN.Standard.Total, run.Ratio,
			run.LatencyP50, run.CoordinatorsAt128MB)
	}
	fmt.Fprintln(w, "(GB-s: billed time × memory, priced from the requests and messages counted, at AWS's latencies (costbench.LambdaModel),\n"+
		"not from the time measured against the emulators, which grows with the machine's load; log B: bytes per order\n"+
		"written to CloudWatch Logs, priced at $0.50 per GB ingested; p50: submission to end, the median order;\n"+
		"@128MB: $/M total with Submission and Scheduler at 128 MB, their CPU work twice as long)")
	fmt.Fprintln(w)
	r.printPayloads(w)
	if len(r.Runs) == 0 {
		return
	}
	r.printStages(w)
	largest := slices.Max(r.batchSizes())
	for _, run := range r.Runs {
		if run.BatchSize != largest || run.PayloadBytes > 0 {
			continue
		}
		fmt.Fprintf(w, "%s workflow (%d step(s)), batch %d, %s: $%.2f per million orders; Step Functions Standard $%.2f (%d transitions), Express $%.2f\n",
			run.Workflow, run.Steps, run.BatchSize, answers(run.ResultBytes), run.Cost.Total, run.SFN.Standard.Total, run.SFN.Transitions, run.SFN.Express.Total)
		keys := make([]string, 0, len(run.Requests))
		for k := range run.Requests {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			line := fmt.Sprintf("    %-58s %6.2f per order", k, run.Requests[k])
			if units, ok := run.Units[k]; ok {
				line += fmt.Sprintf(", %5.2f capacity units", units)
			}
			if refused := run.Refused[k]; refused > 0 {
				line += fmt.Sprintf(" (%.3f refused by their condition)", refused)
			}
			if unpriced := run.Unpriced[k]; unpriced > 0 {
				line += fmt.Sprintf(" (%.2f not priced: flushed while the batch ran, longer here than in AWS)", unpriced)
			}
			fmt.Fprintln(w, line)
		}
		fns := slices.Sorted(maps.Keys(run.Functions))
		for _, fn := range fns {
			f := run.Functions[fn]
			fmt.Fprintf(w, "    %-58s %6.2f per order, %4.1f messages and %3.0f ms billed each (%5.1f ms measured), %.5f GB-s per order\n",
				"λ "+fn, f.InvocationsPerOrder, f.MessagesPerInvocation, f.BilledMsPerInvocation, f.MsPerInvocation, f.GBSecondsPerOrder)
		}
		printLogs(w, run)
		if u := run.PerOrder; math.Abs(u.ReportedWriteUnits-u.WriteUnits) > 1e-9 {
			fmt.Fprintf(w, "    DynamoDB Local reported %.2f write units per order, DynamoDB bills %.2f: it bills an index\n"+
				"    write inside a transaction at the standard rate, where DynamoDB Local reports it doubled, and a write\n"+
				"    its condition refused, which no engine reports\n", u.ReportedWriteUnits, u.WriteUnits)
		}
	}
}

func (r Result) batchSizes() []int {
	var out []int
	for _, run := range r.Runs {
		if !slices.Contains(out, run.BatchSize) {
			out = append(out, run.BatchSize)
		}
	}
	slices.Sort(out)
	return out
}

func (r Result) workflows() []string {
	var out []string
	for _, run := range r.Runs {
		if !slices.Contains(out, run.Workflow) {
			out = append(out, run.Workflow)
		}
	}
	return out
}

// SVG draws the cost per million orders against the batch size, one line per
// workflow, with Step Functions Standard and Express for the same flows.
func (r Result) SVG(w io.Writer) error {
	const W, H, left, right, top, bottom = 760.0, 440.0, 70.0, 230.0, 40.0, 50.0
	sizes, flows := r.batchSizes(), r.workflows()
	if len(sizes) == 0 {
		return fmt.Errorf("no runs to chart")
	}
	maxY := 0.0
	for _, run := range r.Runs {
		maxY = max(maxY, run.Cost.Total, run.SFN.Standard.Total)
	}
	maxY = niceCeil(maxY)
	x := func(b int) float64 {
		if len(sizes) == 1 {
			return left
		}
		i := slices.Index(sizes, b)
		return left + float64(i)*(W-left-right)/float64(len(sizes)-1)
	}
	y := func(v float64) float64 { return H - bottom - v/maxY*(H-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15">Cost per million orders (USD, us-east-1) by SQS batch size</text>`+"\n", left)
	for i := 0; i <= 5; i++ {
		v := maxY * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">$%g</text>`+"\n",
			left, W-right, y(v), y(v), left-6, y(v)+4, math.Round(v*100)/100)
	}
	for _, s := range sizes {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%d</text>`+"\n", x(s), H-bottom+18, s)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">messages per Lambda invocation (batch size)</text>`+"\n", (left+W-right)/2, H-12)
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	legend := 0
	key := func(color, dash, label string) {
		ly := top + 10 + float64(legend)*20
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="2" stroke-dasharray="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			W-right+12, W-right+40, ly, ly, color, dash, W-right+46, ly+4, html.EscapeString(label))
		legend++
	}
	for i, wf := range flows {
		color := colors[i%len(colors)]
		var pts []string
		var std, exp float64
		for _, run := range r.Runs {
			if run.Workflow == wf {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(run.BatchSize), y(run.Cost.Total)))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>$%.2f</title></circle>`+"\n",
					x(run.BatchSize), y(run.Cost.Total), color, run.Cost.Total)
				std, exp = run.SFN.Standard.Total, run.SFN.Express.Total
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		for _, l := range []struct {
			v    float64
			dash string
		}{{std, "8 4"}, {exp, "2 3"}} {
			fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="%s"/>`+"\n",
				left, W-right, y(l.v), y(l.v), color, l.dash)
		}
		key(color, "", fmt.Sprintf("this product, %s", wf))
		key(color, "8 4", fmt.Sprintf("SFN Standard, %s ($%.0f)", wf, std))
		key(color, "2 3", fmt.Sprintf("SFN Express, %s ($%.2f)", wf, exp))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// printStages writes each workflow's state item size and write units after
// each write of an order's life.
func (r Result) printStages(w io.Writer) {
	for _, wf := range slices.Sorted(maps.Keys(r.Stages)) {
		fmt.Fprintf(w, "%s workflow, one order's state item after each write (a write is billed a unit per started KB\n"+
			"of the larger of the item before and after it; an index entry written or removed is a unit more):\n", wf)
		total := 0.0
		for _, st := range r.Stages[wf] {
			fmt.Fprintf(w, "    %-72s %5d bytes %5.1f write units\n", st.Write, st.ItemBytes, st.WriteUnits)
			total += st.WriteUnits
		}
		fmt.Fprintf(w, "    %-72s %11s %5.1f write units\n\n", "in all", "", total)
	}
}

// resultsLabel is a run's answers in the table: "-" for none, else bytes.
func resultsLabel(b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%dB", b)
}

// printLogs writes what a run's functions wrote to CloudWatch Logs per order.
func printLogs(w io.Writer, run Run) {
	l := run.Logs
	fmt.Fprintf(w, "    %-58s %6.0f bytes per order, $%.2f per million: log lines %.0f B (%.2f), EMF %.0f B (%.2f), Lambda's %.0f B\n",
		"CloudWatch Logs", l.Total(), run.Cost.Logs, l.Bytes, l.Lines, l.MetricBytes, l.MetricLines, l.PlatformBytes)
	for _, fn := range slices.Sorted(maps.Keys(run.Functions)) {
		f := run.Functions[fn].Logs
		if f.Lines+f.MetricLines > 0 {
			fmt.Fprintf(w, "    %-58s %6.0f bytes per order: %.2f log lines, %.2f EMF documents\n", "  "+fn, f.Total(), f.Lines, f.MetricLines)
		}
	}
}

// printPayloads writes the payload runs (Plan.PayloadBytes), if any: what a
// three-step order costs with its order and each answer of a size.
func (r Result) printPayloads(w io.Writer) {
	var runs []Run
	for _, run := range r.Runs {
		if run.PayloadBytes > 0 {
			runs = append(runs, run)
		}
	}
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "The order workflow (3 steps) with its order and each service's answer of a size: payloads over the inline\n"+
		"limit kept in the payload bucket, a claim check in the messages and items\n\n")
	fmt.Fprintf(w, "%10s %6s %8s %7s %7s %9s %9s %9s | %9s %9s %9s | %9s\n",
		"payload", "orders", "p50", "S3 PUT", "S3 GET", "MB moved", "MB kept", "SQS req", "$/M S3", "$/M λ", "$/M DDB", "$/M total")
	for _, run := range runs {
		u, c := run.PerOrder, run.Cost
		fmt.Fprintf(w, "%10s %6d %7.2fs %7.2f %7.2f %9.2f %9.2f %9.2f | %9.2f %9.2f %9.2f | %9.2f\n",
			sizeLabel(run.PayloadBytes), run.Orders, run.LatencyP50, u.S3Puts, u.S3Gets, u.S3Bytes/1e6, u.S3KeptBytes/1e6, u.SQSRequests,
			c.S3, c.Lambda, c.DynamoDB, c.Total)
	}
	fmt.Fprintln(w, "(per order; MB moved: to and from S3; MB kept: stored until the bucket's expiry, priced for 93 days;\n"+
		"$/M λ adds each payload's transfer at 85 MB/s; p50: submission to end on the emulators, the median order)")
	fmt.Fprintln(w)
}

// sizeLabel writes a size in bytes as 1KB, 300KB, 4MB.
func sizeLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
