package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Print writes the result as a table.
func (r Result) Print(w io.Writer) {
	row := func(k string, v any) { fmt.Fprintf(w, "  %-46s %8v\n", k, v) }
	fmt.Fprintf(w, "Chaos run: %d orders, seed %d, drained in %.1fs\n\n", r.Orders, r.Seed, r.Drain.Seconds())
	if r.Stopped != "" {
		fmt.Fprintf(w, "  stopped before every order ended: %s\n\n", r.Stopped)
	}
	fmt.Fprintln(w, "  faults injected")
	for _, k := range slices.Sorted(maps.Keys(r.Faults)) {
		row("  "+k, r.Faults[k])
	}
	fmt.Fprintln(w)
	r.printRecovery(row)
	r.printPayloads(row)
	r.Migrations.print(row)
	r.Search.print(row)
	r.Bulk.print(row)
	r.printEnds(w, row)
	if !r.Checked {
		fmt.Fprintln(w, "\nThe run was cut short before the invariants were checked.")
		return
	}
	r.Flow.print(w, row)
	r.printInvariants(w, row)
}

// printRecovery prints what the pipeline did to recover: retries,
// recoveries, re-sends, the longest queue wait, messages per order.
func (r Result) printRecovery(row func(string, any)) {
	row("agent retries", r.AgentRetries)
	row("attempts recovered (not completed in time)", r.Recoveries)
	row("lost messages re-sent (a step not claimed)", r.Resent)
	row("waits held back (a queue backlogged)", r.Held)
	row("orders failed by their deadline", r.Expired)
	row("longest queue wait (ready to claimed)", r.QueueWaitMax.Round(time.Millisecond))
	for _, q := range slices.Sorted(maps.Keys(r.MessagesPerOrder)) {
		row("messages per order: "+q, fmt.Sprintf("%.3f", r.MessagesPerOrder[q]))
	}
	row("undo actions completed (compensations)", r.Compensations)
	row("stale outcomes fenced off", r.StaleReplies)
}

// printPayloads prints what the bucket kept, the orders at the limits, the
// hostile payloads and the largest item and message.
func (r Result) printPayloads(row func(string, any)) {
	row("payloads kept in the bucket (orders, results, events)", r.Payloads.Kept)
	row("  their megabytes", fmt.Sprintf("%.1f", float64(r.Payloads.KeptBytes)/(1<<20)))
	row("  the largest object's kilobytes", r.Payloads.Largest>>10)
	for _, o := range r.AtLimit {
		row("order at the limits "+o.OrderID+": "+string(o.State)+", its scan's result kept (bytes)", o.ScanBytes)
		if o.Reason != "" {
			row("  why", o.Reason)
		}
	}
	r.Hostile.print(row)
	row("the largest item's bytes (DynamoDB's 400 KB)", r.LargestItem)
	row("the largest message's bytes (SQS's 256 KB)", r.LargestMessage)
	row("  of the product's own (the Scheduler's, the Agents')", r.LargestWorkMessage)
	row("orders and events sent by Extended Client pointer", r.Payloads.Offloaded)
	for _, kind := range slices.Sorted(maps.Keys(r.Payloads.WrittenOver)) {
		row("  "+kind+"s written over once taken (sealed)", r.Payloads.WrittenOver[kind])
	}
	row("payloads streamed to their services as read", r.Payloads.Streamed)
}

// printEnds prints the dead letters, the rejections by reason and how the
// orders ended, in all and by workflow (the generated and flow shapes
// together).
func (r Result) printEnds(w io.Writer, row func(string, any)) {
	for _, q := range slices.Sorted(maps.Keys(r.DeadLetters)) {
		row("messages left in "+q, r.DeadLetters[q])
	}
	for _, why := range slices.Sorted(maps.Keys(r.Rejected)) {
		fmt.Fprintf(w, "    %6d  %s\n", r.Rejected[why], why)
	}
	for _, s := range []workflow.State{workflow.Processed, workflow.Failed, workflow.Cancelled, workflow.CompensationFailed} {
		row("ended "+string(s), r.EndStates[s])
	}
	byName := map[string]map[workflow.State]int{}
	for wf, e := range r.ByWorkflow {
		switch {
		case strings.HasPrefix(wf, "shape"):
			wf = "generated shapes"
		case strings.HasPrefix(wf, "flow"):
			wf = "flow shapes"
		}
		if byName[wf] == nil {
			byName[wf] = map[workflow.State]int{}
		}
		for s, n := range e {
			byName[wf][s] += n
		}
	}
	for _, wf := range slices.Sorted(maps.Keys(byName)) {
		e := byName[wf]
		row("  "+wf+" (Processed/Failed/Cancelled/CompFailed)", fmt.Sprintf("%d/%d/%d/%d", e[workflow.Processed], e[workflow.Failed], e[workflow.Cancelled], e[workflow.CompensationFailed]))
	}
}

// printInvariants prints each invariant's count of breaches, then, if any,
// the orders that broke each.
func (r Result) printInvariants(w io.Writer, row func(string, any)) {
	v := r.Violations
	row("orders lost", len(v.Lost))
	row("orders not ended", len(v.NotEnded))
	row("step effects applied twice", len(v.AppliedTwice))
	row("effects inconsistent with the end state", len(v.Inconsistent))
	row("failure counts past the threshold", len(v.OverThreshold))
	row("Error records never alerted", len(v.Unalerted))
	row("bad input not rejected with its reason", len(v.Unrejected))
	row("steps failed for a size within the limits", len(v.TooLarge))
	row("messages or items over their limit, sends refused", len(v.OverLimit))
	row("messages refused for their size or encoding, work refused", len(v.Refused))
	if r.Flow != nil {
		row("seconds over a rate limit and its burst", len(v.RateExceeded))
		row("rate limits short of their rate in a backlog", len(v.RateShort))
		row("slots or places kept for ended orders", len(v.SlotsLeft))
		row("held orders not ended", len(v.HeldNotEnded))
		row("keys whose calls had no place in a short line", len(v.LinesRefused))
	}
	if r.Migrations != nil {
		row("effects applied after a move by an attempt claimed before it", len(v.MovedAtWork))
	}
	if r.Search != nil {
		row("searches by a value that missed or wrongly found an order", len(v.Unfound))
	}
	if r.Bulk != nil {
		row("bulk reports that do not add up", len(v.BulkReports))
	}
	if r.Payloads.Offloaded > 0 {
		row("data in clear (payloads under incoming/ once taken or under orders/, keys by value, searchable values)", len(v.ClearCopies))
	}
	if v.Count() == 0 {
		fmt.Fprintln(w, "\nEvery invariant held.")
		return
	}
	fmt.Fprintln(w, "\nINVARIANTS BROKEN:")
	for _, s := range r.Stuck {
		fmt.Fprintln(w, "  stuck: "+s)
	}
	for name, ids := range map[string][]string{"lost": v.Lost, "not ended": v.NotEnded, "applied twice": v.AppliedTwice,
		"inconsistent": v.Inconsistent, "over threshold": v.OverThreshold, "never alerted": v.Unalerted,
		"bad input not rejected with its reason": v.Unrejected, "over a rate limit": v.RateExceeded,
		"short of its rate in a backlog":        v.RateShort,
		"slots or places kept for ended orders": v.SlotsLeft, "held, not ended": v.HeldNotEnded,
		"data in clear": v.ClearCopies, "failed for a size within the limits": v.TooLarge, "over a limit": v.OverLimit,
		"refused to a DLQ": v.Refused, "no place in a short line": v.LinesRefused, "moved while at work": v.MovedAtWork,
		"search by a searchable value": v.Unfound, "bulk report": v.BulkReports} {
		if len(ids) > 0 {
			fmt.Fprintf(w, "  %s: %s\n", name, strings.Join(ids, ", "))
		}
	}
}

// print prints what the searches by a searchable field found.
func (f *SearchFigures) print(row func(string, any)) {
	if f == nil {
		return
	}
	row("workflows declaring searchable fields", f.Workflows)
	for _, field := range slices.Sorted(maps.Keys(f.Fields)) {
		row("  declaring "+shortField(field), f.Fields[field])
	}
	row("searches by a value at the end (every page)", f.Searches)
	row("  orders they found", f.Found)
	row("searches while the orders ran (before a bulk action)", f.MidRun)
}

// print prints each bulk action's report.
func (f *BulkFigures) print(row func(string, any)) {
	if f == nil {
		return
	}
	row("bulk actions by query (paced, operator.Bulk)", len(f.Runs))
	for _, b := range f.Runs {
		row(fmt.Sprintf("  %s %s", b.Action, clip(b.Query, 60)), fmt.Sprintf("%d listed: %d done, %d already, %d refused, %d changed, %d left (%s)",
			b.Listed, b.Done, b.Already, b.Refused, b.Changed, b.Left, b.Took.Round(time.Millisecond)))
		if len(b.Acted) > 0 {
			row("    acted on "+clip(strings.Join(b.Acted, ", "), 80), len(b.Acted))
		}
		for _, why := range slices.Sorted(maps.Keys(b.Why)) {
			row("    "+clip(why, 80), b.Why[why])
		}
	}
	for _, why := range slices.Sorted(maps.Keys(f.Errors)) {
		row("  stopped by an error: "+clip(why, 80), f.Errors[why])
	}
}
