package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/client"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

func statusCmd() *cobra.Command {
	var t target
	cmd := &cobra.Command{
		Use:   "status ORDER",
		Short: "show an order: its state, each step and undo action, what it waits for, its timeline",
		Long: `status shows an order: its state, workflow and round; each step and undo action (its state,
attempts, failures, CompleteBy, when it is due, its last error); what a waiting step waits for
(an event, a timer or its service's callback), since when and until when; each record's result;
and the timeline. In an ended order a record that will never run is NotNeeded (an undo action
with nothing to undo) or Skipped (a step never reached).`,
		Example: "  sasctl status o-1\n  sasctl status o-1 -o json | jq '.records[] | {name, state, result}'",
		Args:    exactly(1, "one ORDER id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op, err := t.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			st, err := client.Of(op).Status(cmd.Context(), args[0])
			if err != nil {
				return t.explainOrder(args[0], err)
			}
			out := cmd.OutOrStdout()
			return emit(out, t.output, st, func() { printStatus(out, st) })
		},
	}
	targetFlags(cmd, &t, true)
	return cmd
}

// clock is a time of day in UTC, or "-".
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}

// stamp is a time in RFC 3339, UTC, or "-".
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func printStatus(out io.Writer, s operator.Status) {
	o := s.Order
	fmt.Fprintf(out, "Order %s: %s (workflow %s, round %d)\n", o.OrderID, o.State, o.Workflow, o.Round)
	fmt.Fprintf(out, "  created %s   updated %s   ended %s\n", stamp(o.CreatedAt), clock(o.UpdatedAt), clock(o.CompletedAt))
	if o.LastError != "" {
		fmt.Fprintf(out, "  last error: %s\n", o.LastError)
	}
	for _, m := range o.Moves {
		fmt.Fprintf(out, "  %s at %s\n", m.What, stamp(m.At))
	}
	if len(o.Moves) > 0 {
		fmt.Fprintf(out, "  runs version %s\n", o.Version)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Kept)) {
		fmt.Fprintf(out, "  keeps %s, kept from version %s (undo only: done before a move, never run again)\n", name, s.Kept[name])
	}
	if o.State == workflow.Held {
		fmt.Fprintf(out, "  held for its operator since %s, until %s (then undone): sasctl retry, skip or undo %s\n",
			stamp(o.HeldAt), stamp(o.HeldUntil), o.OrderID)
	}
	if o.CancelledBy != "" {
		fmt.Fprintf(out, "  cancel asked by %s at %s", o.CancelledBy, stamp(o.CancelledAt))
		if o.CancelReason != "" {
			fmt.Fprintf(out, ": %s", o.CancelReason)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)
	printBranches(out, s.Needs)
	printRecords(out, s.Records)
	printWaiting(out, s.Records)
	printResults(out, s.Records)
	fmt.Fprintln(out, "\nTimeline")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, e := range s.Timeline {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", clock(e.At), e.Record, short(e.What, 90))
	}
	tw.Flush()
}

// printBranches says, for a workflow whose steps run at once, what each
// step waits for.
func printBranches(out io.Writer, needs map[string][]string) {
	if len(needs) == 0 {
		return
	}
	fmt.Fprintln(out, "Steps run as their needs allow (a step per item of a forEach step):")
	for _, name := range slices.Sorted(maps.Keys(needs)) {
		what := "starts with the order"
		if n := needs[name]; len(n) > 0 {
			what = "after " + strings.Join(n, ", ")
		}
		fmt.Fprintf(out, "  %s: %s\n", name, what)
	}
	fmt.Fprintln(out)
}

// printRecords prints a table of the records.
func printRecords(out io.Writer, recs []operator.Record) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tKIND\tSTATE\tATTEMPTS\tFAILURES\tCOMPLETE BY\tDUE\tLAST ERROR")
	now := time.Now()
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.Name, r.KindText(), r.State, attempts(r), r.FailureCount,
			r.MaxFailures, operator.Clock(r.CompleteBy, now), operator.Clock(r.DueAt, now), short(r.LastError, 70))
	}
	tw.Flush()
}

// attempts is a record's attempts, and of them those its flow control gave
// back before their call ("19 (18 waited)"): waiting is not failing.
func attempts(r operator.Record) string {
	if r.FlowWaits == 0 {
		return strconv.Itoa(r.Attempt)
	}
	return fmt.Sprintf("%d (%d waited)", r.Attempt, r.FlowWaits)
}

// printWaiting says what each waiting record waits for, since and until
// when.
func printWaiting(out io.Writer, recs []operator.Record) {
	header := false
	for _, r := range recs {
		w := r.Waiting
		if w == nil {
			continue
		}
		if !header {
			fmt.Fprintln(out, "\nWaiting")
			header = true
		}
		fmt.Fprintf(out, "  %s waits for %s since %s, until %s\n", r.Name, w.What(), stamp(w.Since), stamp(w.Until))
	}
}

// printResults prints each record's result, cut to a line.
func printResults(out io.Writer, recs []operator.Record) {
	header := false
	for _, r := range recs {
		if len(r.Result) == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(out, "\nResults")
			header = true
		}
		fmt.Fprintf(out, "  %s: %s\n", r.Name, short(oneLine(string(r.Result)), 100))
	}
}
