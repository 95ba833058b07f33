package main

import (
	"fmt"
	"os/user"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/client"
	"github.com/sas-go/sas/shared/operator"
)

func resubmitCmd() *cobra.Command {
	var (
		t    target
		step string
		b    bulkFlags
	)
	cmd := &cobra.Command{
		Use:   "resubmit ORDER...|--state Failed [QUERY]",
		Short: "put a Failed or CompensationFailed order back to work",
		Long: `resubmit puts an order that ended Failed or CompensationFailed back to work, once its cause is
fixed: a Failed order runs again from its first step in a new round (new idempotency keys); a
CompensationFailed one retries its failed undo action, or its pivot step that timed out, with its
failure count reset. The state table is written, then its request is sent to its Agent (if that message is
lost, the step's pickup deadline brings the Supervisor).` + fmt.Sprintf(bulkHelp, "the Failed ones"),
		Example: "  sasctl resubmit o-1\n  sasctl resubmit --step charge-payment o-1\n  sasctl resubmit --workflow order --newer-than 2h --dry-run",
		RunE: func(cmd *cobra.Command, args []string) error {
			if b.many(cmd, args) {
				return runBulk(cmd, &t, &b, args, operator.ActionSpec{Name: "resubmit", Step: step})
			}
			if len(args) != 1 {
				return exactly(1, "one ORDER id, or a query")(cmd, args)
			}
			op, err := t.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			res, err := op.Resubmit(cmd.Context(), args[0], step)
			if err != nil {
				return t.explainOrder(args[0], err)
			}
			out := cmd.OutOrStdout()
			return emit(out, t.output, res, func() {
				what := "step " + res.Step
				if res.Undo {
					what = "undo action " + res.Step
				}
				fmt.Fprintf(out, "order %s resubmitted: %s is Pending again (round %d); its request was sent\n", res.OrderID, what, res.Round)
			})
		},
	}
	targetFlags(cmd, &t, true)
	b.bind(cmd)
	t.bind(cmd.Flags(), "workflows") // a field no workflow declares is told so
	cmd.Flags().StringVar(&step, "step", "", "the step (or undo action) that failed, as a check; default: the one in Error")
	return cmd
}

func cancelCmd() *cobra.Command {
	var (
		t      target
		reason string
		b      bulkFlags
	)
	cmd := &cobra.Command{
		Use:   "cancel ORDER...|QUERY",
		Short: "cancel an order: what has not started does not, what completed is undone",
		Long: `cancel cancels an order: a ready or waiting step does not run, a running step's outcome is
awaited, and the completed steps are undone in reverse order; it ends Cancelled. Asking twice is no
error; an ended order, or one whose pivot step ran, is refused with the reason.` + fmt.Sprintf(bulkHelp, "every order (those ended are refused)"),
		Example: "  sasctl cancel --reason \"customer asked\" o-1\n  sasctl cancel --state Pending --id-prefix test- --dry-run",
		RunE: func(cmd *cobra.Command, args []string) error {
			if b.many(cmd, args) {
				return runBulk(cmd, &t, &b, args, operator.ActionSpec{Name: "cancel", Reason: reason})
			}
			if len(args) != 1 {
				return exactly(1, "one ORDER id, or a query")(cmd, args)
			}
			op, err := t.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			res, err := client.Of(op).Cancel(cmd.Context(), args[0], operatorName(), reason)
			if err != nil {
				return t.explainOrder(args[0], err)
			}
			out := cmd.OutOrStdout()
			return emit(out, t.output, res, func() { fmt.Fprintf(out, "order %s: %s\n", res.OrderID, res.What) })
		},
	}
	targetFlags(cmd, &t, true)
	b.bind(cmd, "reason")            // its own --reason: why
	t.bind(cmd.Flags(), "workflows") // a field no workflow declares is told so
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept with the order and shown by status")
	return cmd
}

// operatorName says who runs sasctl, for the records it writes.
func operatorName() string {
	name := "sasctl"
	if u, err := user.Current(); err == nil {
		name += " (" + u.Username + ")"
	}
	return name
}

func redriveCmd() *cobra.Command {
	var (
		t     target
		queue string
		maxN  int
		dry   bool
		rate  float64
		q     operator.DLQQuery
		older string
	)
	cmd := &cobra.Command{
		Use:   "redrive",
		Short: "move messages from a dead-letter queue back to its queue",
		Long: `redrive takes what a dead-letter queue holds (hidden from other readers for five minutes), then
sends each message back to its queue and deletes it from the DLQ: a message that fails again is not
moved twice, and a crash between the send and the delete duplicates a message rather than losing it.
--dry-run moves nothing: it lists the messages it would move (read without consuming them, as sasctl
dlq show does). --rate paces the moves; Ctrl-C stops between two messages, and those not moved are
visible in the DLQ again at once (the same command again moves them). A query (--order, --id-prefix,
--kind, --reason, --older-than) moves the messages it keeps only: the others it looks at (up to
1,000) are made visible again at once, and counted.`,
		Example: "  sasctl redrive --queue orders\n  sasctl redrive --queue agent-payment-requests --max 10\n" +
			"  sasctl redrive --queue scheduler --dry-run\n  sasctl redrive --queue orders --rate 20\n" +
			"  sasctl redrive --queue events --reason 'not stored' --older-than 10m\n  sasctl redrive --queue orders --order o-1 --order o-2",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxN < 1 || rate < 0 {
				return usageErrorf("--max must be at least 1, --rate not negative")
			}
			if older != "" {
				d, err := operator.ParseAge(older)
				if err != nil {
					return usageErrorf("--older-than: %v", err)
				}
				q.OlderThan = d
			}
			op, err := t.connect(cmd.Context(), true)
			if err != nil {
				return err
			}
			res, err := op.RedriveMatching(cmd.Context(), queue, maxN, q, operator.BulkOptions{DryRun: dry, Rate: rate})
			if err != nil {
				return fmt.Errorf("%w (moved %d before that)", t.explain(err), res.Moved)
			}
			out := cmd.OutOrStdout()
			if dry {
				return emit(out, t.output, res, func() { printRedriveDry(out, res) })
			}
			return emit(out, t.output, res.Redriven, func() {
				fmt.Fprintf(out, "moved %d messages from %s to %s\n", res.Moved, res.From, res.To)
				printLeft(out, res)
			})
		},
	}
	targetFlags(cmd, &t, true)
	cmd.Flags().StringVar(&queue, "queue", "orders", "the queue whose DLQ to empty back into it: orders, scheduler, "+
		"agent-NAME-requests, agent-NAME-responses")
	cmd.Flags().IntVar(&maxN, "max", 1000, "move at most this many messages")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "move nothing: list the messages it would move")
	cmd.Flags().Float64Var(&rate, "rate", 0, "move at most this many messages a second (0: unpaced)")
	cmd.Flags().StringSliceVar(&q.OrderIDs, "order", nil, "only the messages of this order (again for more)")
	cmd.Flags().StringVar(&q.Prefix, "id-prefix", "", "only the messages of orders whose orderId starts with this")
	cmd.Flags().StringVar(&q.Kind, "kind", "", "only messages of this kind: order, event, cancel, schedule, reply…")
	cmd.Flags().StringVar(&q.Reason, "reason", "", "only messages whose reject reason holds this text (none: those SQS moved after too many receives)")
	cmd.Flags().StringVar(&older, "older-than", "", "only messages sent to the DLQ longer ago than this (10m, 1h, 2d)")
	return cmd
}
