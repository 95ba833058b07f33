package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// bulkHelp is what the help of every action that takes a query adds.
const bulkHelp = `

On many orders: name several ORDER ids, or a query (--state, --workflow, --id-prefix, --older-than,
--newer-than, as sasctl list's; with no --state, %s). --dry-run writes nothing: it
lists what it would act on and why not for the rest. The action is paced (--rate a second), shows
its progress on stderr, and ends with a report: done, done already, refused and why, changed since
listed (an order that fitted when listed and not at its turn). Ctrl-C stops it after the order at
hand, with the report so far; the same command again goes on where it stopped (an order acted on
is refused, or found done, the second time). Each order's history names the bulk action: who,
which action, when it started and how many orders it listed.`

// bulkFlags are the flags of an action that takes a query.
type bulkFlags struct {
	state        stateFlag
	search       operator.Search
	older, newer string
	more         moreFlags
	dry          bool
	rate         float64
	count        int
	quiet        bool
}

// bind puts the flags on cmd, the query's but those of except (the
// command's own: cancel's --reason).
func (b *bulkFlags) bind(cmd *cobra.Command, except ...string) {
	fl := cmd.Flags()
	fl.Var(&b.state, "state", "only orders in this state: "+strings.Join(stateNames(), ", "))
	fl.StringVar(&b.search.Prefix, "id-prefix", "", "only orders whose orderId starts with this")
	fl.StringVar(&b.search.Workflow, "workflow", "", "only orders of this workflow (its name)")
	fl.StringVar(&b.older, "older-than", "", "only orders created longer ago than this (10m, 1h, 2d)")
	fl.StringVar(&b.newer, "newer-than", "", "only orders created less long ago than this (10m, 1h, 2d)")
	queryFlags(cmd, &b.search, &b.more, except...)
	fl.BoolVar(&b.dry, "dry-run", false, "write nothing: list what it would act on, and why not for the rest")
	fl.Float64Var(&b.rate, "rate", operator.BulkRate, "on many orders: at most this many a second (0: unpaced)")
	fl.IntVar(&b.count, "count", 0, "on many orders: act on at most this many (0: all)")
	fl.BoolVar(&b.quiet, "quiet", false, "on many orders: print the counts only, not a line per order")
}

// many reports whether the command acts on many orders: several ids, a
// query or a dry run, rather than one ORDER as it always did.
func (b *bulkFlags) many(cmd *cobra.Command, ids []string) bool {
	if len(ids) > 1 || b.dry {
		return true
	}
	if b.more != (moreFlags{}) || b.search.Version != "" || b.search.Agent != "" || b.search.Reason != "" {
		return true
	}
	for _, f := range []string{"state", "id-prefix", "workflow", "older-than", "newer-than"} {
		if cmd.Flags().Changed(f) {
			return true
		}
	}
	return false
}

// selector is what the ids or the query select (the query: in state def
// unless --state says otherwise).
func (b *bulkFlags) selector(op *operator.Operator, ids []string, def workflow.State) (operator.Selector, error) {
	if b.rate < 0 || b.count < 0 {
		return nil, usageErrorf("--rate and --count are not negative")
	}
	query := b.state.state != "" || !b.search.Empty() || b.older != "" || b.newer != "" || b.more != (moreFlags{})
	switch {
	case len(ids) > 0 && query:
		return nil, usageErrorf("name ORDER ids or a query (--state, --workflow…), not both")
	case len(ids) > 0:
		return operator.IDs(ids...), nil
	case !query:
		return nil, usageErrorf("name ORDER ids, or a query: --state, --workflow, --id-prefix, --older-than, --newer-than")
	}
	s := b.search
	st := b.state.state
	if st == "" {
		st = def
	}
	if err := searchOf(&s, st, b.older, b.newer, b.more); err != nil {
		return nil, err
	}
	return op.Searched(s), nil
}

// runBulk runs the action spec names on the orders the ids or the query
// select (the query: in the action's own state unless it names one),
// printing each order (unless --quiet), its progress on stderr and its
// report; it exits 1 if stopped.
func runBulk(cmd *cobra.Command, t *target, b *bulkFlags, ids []string, spec operator.ActionSpec) error {
	op, err := t.connect(cmd.Context(), true) // its agents' queues: where the requests go
	if err != nil {
		return err
	}
	if op.Workflows, err = deployedWorkflows(t.WorkflowFiles); err != nil {
		return err // a field no workflow declares is told so
	}
	sel, err := b.selector(op, ids, spec.DefaultState())
	if err != nil {
		return err
	}
	a, err := op.ActionOf(spec)
	if err != nil {
		return usageErrorf("%v", err)
	}
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	text := t.output != "json"
	started, listed, n := time.Now(), 0, 0
	opts := operator.BulkOptions{DryRun: b.dry, Rate: b.rate, Limit: b.count, By: operatorName(),
		Listed: func(total int, by string) {
			listed = total
			fmt.Fprintf(errOut, "%s: %d orders listed; each one's history names %q\n", a.Name, total, by)
		}}
	rep, err := op.Bulk(cmd.Context(), sel, a, opts, func(r operator.BulkResult) {
		if text && !b.quiet {
			printBulkResult(out, a.Name, r)
		}
		if n++; n%100 == 0 || n == listed {
			fmt.Fprintf(errOut, "%d of %d orders in %s\n", n, listed, time.Since(started).Round(time.Second))
		}
	})
	if err != nil {
		return fmt.Errorf("%w (the report so far: %d done, %d refused, %d changed since listed)", t.explain(err), rep.Done,
			rep.Refused, rep.Changed)
	}
	if err := emit(out, t.output, rep, func() { printBulkReport(out, rep, time.Since(started)) }); err != nil {
		return err
	}
	if rep.Stopped {
		fmt.Fprintf(errOut, "stopped with %d orders left: run the same command again to go on\n", rep.Left)
		return errReported
	}
	return nil
}

// printBulkResult prints one order's outcome.
func printBulkResult(out io.Writer, action string, r operator.BulkResult) {
	switch r.Outcome {
	case operator.BulkWould:
		fmt.Fprintf(out, "%s: would %s", r.OrderID, action)
		if r.What != "" {
			fmt.Fprintf(out, ": %s", r.What)
		}
		fmt.Fprintln(out)
	case operator.BulkDone:
		fmt.Fprintf(out, "%s: %s\n", r.OrderID, r.What)
	case operator.BulkAlready:
		fmt.Fprintf(out, "%s: done already: %s\n", r.OrderID, r.What)
	case operator.BulkChanged:
		fmt.Fprintf(out, "%s: changed since listed: %s\n", r.OrderID, r.Why)
	default:
		fmt.Fprintf(out, "%s: not: %s\n", r.OrderID, r.Why)
	}
}

// printBulkReport prints a bulk action's counts and its reasons, the most
// frequent first.
func printBulkReport(out io.Writer, r operator.BulkReport, took time.Duration) {
	verb := "done"
	if r.DryRun {
		verb = "would " + r.Action
	}
	fmt.Fprintf(out, "%s: %d listed, %d %s, %d done already, %d refused, %d changed since listed, %d left (%s)\n",
		r.Action, r.Listed, r.Done, verb, r.Already, r.Refused, r.Changed, r.Left, took.Round(time.Millisecond))
	if !r.DryRun {
		fmt.Fprintf(out, "  by %s\n", r.By)
	}
	printReasons(out, r.Why)
}

// printReasons prints counts of reasons, a line each, the most frequent
// first.
func printReasons(out io.Writer, why map[string]int) {
	reasons := slices.Collect(maps.Keys(why))
	slices.SortFunc(reasons, func(a, b string) int { return cmp.Or(why[b]-why[a], strings.Compare(a, b)) })
	for _, w := range reasons {
		fmt.Fprintf(out, "  %5d  %s\n", why[w], w)
	}
}
