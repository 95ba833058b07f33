package main

import (
	"context"
	"errors"
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

// migrateLong is sasctl migrate's help.
const migrateLong = `migrate moves orders in flight of a workflow to the version a workflow file describes: every
order in flight of it, the ORDER ids named, or those a search picks (--state, --older-than,
--at-step), a canary first (--count, --share) if you like. Each order moves at a safe point only
(running forward or held, no attempt at work or whose answer may still come), in one conditional
write of its state: its steps are matched by name (the file's migrate: section may rename them,
declare new steps skipped for orders past them, renew an undo); what ran keeps its state, its
result and the undo of the version that ran it; waits keep their deadlines; what is ready next is
sent. An order that cannot move says why and is left as it was (try again later: a step at work is
done within its timeout). --dry-run writes nothing and says, order by order, what would happen.
Moving back is a migration like any other: migrate --to the earlier file. Run again, it skips the
orders moved already (one read each): a move of thousands can be stopped and resumed. A deployment
that overrides its files (--step-timeout, --max-failures, --retry-backoff, --pickup-timeout,
--order-deadline) runs another version of them: give the same overrides here.`

// migrateFlags are sasctl migrate's flags.
type migrateFlags struct {
	t      target
	to     string
	dry    bool
	state  stateFlag
	older  string
	atStep string
	count  int
	share  float64
	rate   float64
	quiet  bool
}

func migrateCmd() *cobra.Command {
	var f migrateFlags
	cmd := &cobra.Command{
		Use:   "migrate --to FILE [ORDER...]",
		Short: "move orders in flight to another version of their workflow: a dry run, a canary, all",
		Long:  migrateLong,
		Example: "  sasctl migrate --to loan.yaml --dry-run\n  sasctl migrate --to loan.yaml --count 50\n" +
			"  sasctl migrate --to loan.yaml --at-step approval --rate 20\n  sasctl migrate --to loan-v1.yaml o-1 o-2",
		RunE: f.run,
	}
	targetFlags(cmd, &f.t, true)
	// The deployment's overrides of its files, if it has any: the file is
	// read as the deployment runs it, so that it is the version it runs.
	f.t.bind(cmd.Flags(), "stepTimeout", "maxFailures", "retryBackoff", "pickupTimeout", "orderDeadline")
	fl := cmd.Flags()
	fl.StringVar(&f.to, "to", "", "the workflow file of the version to move to (required)")
	fl.BoolVar(&f.dry, "dry-run", false, "write nothing: say, order by order, whether it moves and what it then runs and undoes")
	fl.Var(&f.state, "state", "only orders in this state (Pending, Held)")
	fl.StringVar(&f.older, "older-than", "", "only orders created longer ago than this (10m, 1h, 2d)")
	fl.StringVar(&f.atStep, "at-step", "", "only orders at this step: ready, waiting, at work or held on it")
	fl.IntVar(&f.count, "count", 0, "move at most this many (a canary)")
	fl.Float64Var(&f.share, "share", 0, "only the orders whose id falls in this share (0.05: one in twenty), the same ones each run")
	fl.Float64Var(&f.rate, "rate", 50, "at most this many moves a second (0: unpaced)")
	fl.BoolVar(&f.quiet, "quiet", false, "print the counts only, not a line per order")
	return cmd
}

func (f *migrateFlags) run(cmd *cobra.Command, ids []string) error {
	if f.to == "" {
		return usageErrorf("name the version to move to: --to FILE")
	}
	if f.share < 0 || f.share > 1 || f.count < 0 || f.rate < 0 {
		return usageErrorf("--share is 0 to 1, --count and --rate are not negative")
	}
	sel := operator.MoveSelect{Orders: ids, State: f.state.state, AtStep: f.atStep, Count: f.count, Share: f.share}
	if f.older != "" {
		d, err := operator.ParseAge(f.older)
		if err != nil {
			return usageErrorf("--older-than: %v", err)
		}
		sel.OlderThan = d
	}
	to, err := workflow.LoadFile(f.to, workflow.Options{MaxStepTimeout: f.t.MaxStepTimeout()})
	if err != nil {
		return showFailed(cmd.ErrOrStderr(), f.to, err)
	}
	to = to.With(f.t.Overrides)
	op, err := f.t.connect(cmd.Context(), false)
	if err != nil {
		return err
	}
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	text := f.t.output != "json"
	started := time.Now()
	each := func(m operator.Migrated) {
		if text && !f.quiet {
			printMigrated(out, m, f.dry)
		}
	}
	n := 0
	rep, err := op.Migrate(cmd.Context(), to, sel, operatorName(), f.dry, f.rate, func(m operator.Migrated) {
		each(m)
		if n++; n%100 == 0 {
			fmt.Fprintf(errOut, "%d orders looked at in %s\n", n, time.Since(started).Round(time.Second))
		}
	})
	if errors.Is(err, context.Canceled) { // Ctrl-C: the report so far, then why it stopped
		_ = emit(out, f.t.output, rep, func() { printMoveReport(out, rep, time.Since(started)) })
	}
	if err != nil {
		return err
	}
	return emit(out, f.t.output, rep, func() { printMoveReport(out, rep, time.Since(started)) })
}

// printMigrated prints one order's move.
func printMigrated(out io.Writer, m operator.Migrated, dry bool) {
	switch {
	case m.Already:
		fmt.Fprintf(out, "%s: runs version %s already\n", m.OrderID, m.To)
		return
	case !m.Moves:
		fmt.Fprintf(out, "%s: cannot move: %s\n", m.OrderID, m.Why)
		return
	}
	verb := "moved"
	if dry {
		verb = "moves"
	}
	to := m.To
	if m.Base != "" {
		to = fmt.Sprintf("%s (version %s, keeping the undo its steps ran with)", m.To, m.Base)
	}
	parts := m.Effects()
	fmt.Fprintf(out, "%s: %s from %s to %s", m.OrderID, verb, m.From, to)
	if len(parts) > 0 {
		fmt.Fprintf(out, ": %s", strings.Join(parts, "; "))
	}
	fmt.Fprintln(out)
}

// printMoveReport prints a migration's counts.
func printMoveReport(out io.Writer, r operator.MoveReport, took time.Duration) {
	verb := "moved"
	if r.DryRun {
		verb = "would move"
	}
	fmt.Fprintf(out, "workflow %s to version %s: %d looked at, %d %s, %d already there, %d cannot move now (%s)\n",
		r.Workflow, r.To, r.Seen, r.Moves, verb, r.Already, r.Refused, took.Round(time.Millisecond))
	printReasons(out, r.Why)
}

func workflowVersionsCmd() *cobra.Command {
	var t target
	cmd := &cobra.Command{
		Use:   "versions",
		Short: "the versions of each workflow that orders in flight run, with their counts (on a deployment)",
		Long: `versions counts the orders in flight of each version of each workflow, by state, and names a few of
each. Given the deployment's workflow files (--workflows, with its overrides), it says which versions
the deployment no longer runs: their orders go on from the definitions the state table keeps (an
order keeps the version it started with); sasctl migrate moves them. It exits 1 if any order in
flight runs a version the deployment does not.`,
		Example: "  sasctl workflow versions --workflows loan.yaml",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, err := deployedWorkflows(t.WorkflowFiles)
			if err != nil {
				return err
			}
			op, err := t.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			op.Workflows = set.With(t.Overrides)
			vs, err := op.Versions(cmd.Context())
			if err != nil {
				return t.explain(err)
			}
			out := cmd.OutOrStdout()
			if err := emit(out, t.output, vs, func() { printVersions(out, vs) }); err != nil {
				return err
			}
			for _, v := range vs {
				if v.Deployed != nil && !*v.Deployed {
					return errReported
				}
			}
			return nil
		},
	}
	targetFlags(cmd, &t, true)
	t.bind(cmd.Flags(), "workflows", "stepTimeout", "maxFailures", "retryBackoff", "pickupTimeout", "orderDeadline")
	return cmd
}

// printVersions prints the versions in flight, a line each.
func printVersions(out io.Writer, vs []operator.VersionInFlight) {
	if len(vs) == 0 {
		fmt.Fprintln(out, "no order in flight")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tVERSION\tORDERS\tSTATES\tDEPLOYED\tFOR EXAMPLE")
	for _, v := range vs {
		version := v.Version
		if v.Base != "" {
			version += " (of " + v.Base + ")"
		}
		var states []string
		for _, st := range slices.Sorted(maps.Keys(v.States)) {
			states = append(states, fmt.Sprintf("%s %d", st, v.States[st]))
		}
		deployed := "-"
		if v.Deployed != nil {
			deployed = map[bool]string{true: "yes", false: "NO: sasctl migrate moves them"}[*v.Deployed]
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", v.Workflow, version, v.Orders, strings.Join(states, ", "), deployed,
			strings.Join(v.Examples, " "))
	}
	tw.Flush()
}
