package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/operator"
)

// dlqRead says how sasctl dlq reads a DLQ, for its help.
const dlqRead = `It reads a DLQ without consuming it, as the console does: each message is received hidden for
30 s, so that successive receives walk through the queue, then made visible again at once; if
that is lost, the message reappears after 30 s. Nothing is deleted, but each read counts in a
message's receive count (shown less this read's own). A DLQ of N messages costs about N/10 + 2
requests; at most 1000 messages are read.`

func dlqCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "read the dead-letter queues, and move their messages back once the cause is fixed",
		Long: `dlq lists the dead-letter queues (every queue of the deployment has one: orders, events,
scheduler, agent-NAME-requests, agent-NAME-responses), shows their messages, each with its reason
(its RejectReason attribute; none for a message SQS moved after too many receives), the order it
names and its age, and moves one message or all back to its queue.

` + dlqRead,
	}
	cmd.AddCommand(dlqListCmd(), dlqShowCmd(), dlqRedriveCmd())
	return cmd
}

func dlqListCmd() *cobra.Command {
	var t target
	cmd := &cobra.Command{
		Use:   "list [QUEUE]",
		Short: "each DLQ with its depth and oldest message's age; with QUEUE, its messages",
		Long: `list prints each dead-letter queue with its depth (visible and in flight) and the age of its oldest
message (of the first 100 read); with QUEUE (orders, events, scheduler, agent-NAME-requests,
agent-NAME-responses), what dlq show QUEUE prints.

` + dlqRead,
		Example: "  sasctl dlq list\n  sasctl dlq list events -o json",
		Args:    maxArgs(1, "at most a QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return showDLQ(cmd, &t, args[0])
			}
			op, err := t.connect(cmd.Context(), true)
			if err != nil {
				return err
			}
			res, err := op.DLQSummaries(cmd.Context())
			if err != nil {
				return t.explain(err)
			}
			out := cmd.OutOrStdout()
			return emit(out, t.output, dlqList{DLQs: res}, func() { printDLQList(out, res) })
		},
	}
	targetFlags(cmd, &t, true)
	return cmd
}

// dlqList is what sasctl dlq list prints with -o json.
type dlqList struct {
	DLQs []operator.DLQSummary `json:"dlqs"`
}

func dlqShowCmd() *cobra.Command {
	var t target
	cmd := &cobra.Command{
		Use:   "show QUEUE [MESSAGE-ID]",
		Short: "a DLQ's messages (id, order, reason, receive count, age), or one message whole",
		Long: `show prints the messages of QUEUE's dead-letter queue (QUEUE: orders, events, scheduler,
agent-NAME-requests, agent-NAME-responses), oldest first: each one's id, the order (and event) its
body names, its reason, its receive count and its age; with MESSAGE-ID, that message whole, its
body included. A message not there is said so (exit 1).

` + dlqRead,
		Example: "  sasctl dlq show events\n  sasctl dlq show events 6f1c0e8a-… -o json",
		Args:    rangeArgs(1, 2, "a QUEUE, and perhaps a MESSAGE-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return showDLQ(cmd, &t, args[0])
			}
			op, err := t.connect(cmd.Context(), true)
			if err != nil {
				return err
			}
			if op.Workflows, err = deployedWorkflows(t.WorkflowFiles); err != nil {
				return err // an order named by its workflow's id field
			}
			m, err := op.DLQMessage(cmd.Context(), args[0], args[1])
			if err != nil {
				return t.explain(err)
			}
			out := cmd.OutOrStdout()
			return emit(out, t.output, m, func() { printDLQMessage(out, m) })
		},
	}
	targetFlags(cmd, &t, true)
	t.bind(cmd.Flags(), "workflows") // a refused order named by its workflow's id field (id:)
	return cmd
}

// showDLQ prints a queue's DLQ messages.
func showDLQ(cmd *cobra.Command, t *target, queue string) error {
	op, err := t.connect(cmd.Context(), true)
	if err != nil {
		return err
	}
	if op.Workflows, err = deployedWorkflows(t.WorkflowFiles); err != nil {
		return err
	}
	res, err := op.DLQMessages(cmd.Context(), queue, operator.DLQReadMax)
	if err != nil {
		return t.explain(err)
	}
	out := cmd.OutOrStdout()
	return emit(out, t.output, res, func() { printDLQMessages(out, res) })
}

func dlqRedriveCmd() *cobra.Command {
	var (
		t   target
		all bool
	)
	cmd := &cobra.Command{
		Use:   "redrive QUEUE MESSAGE-ID|--all",
		Short: "move one message, or all, from QUEUE's DLQ back to QUEUE",
		Long: `redrive sends a message of QUEUE's dead-letter queue back to QUEUE (its body, without its reason)
and deletes it from the DLQ, then prints what it moved. Fix the cause first: a message its consumer
rejected (an event for an order not stored, a workflow not deployed) is rejected again, with its
reason, if it is sent again as it was.

With MESSAGE-ID it walks the DLQ as dlq show does and moves that message alone. With --all it takes
what the DLQ holds (up to 1000 messages, hidden from other readers for five minutes), then moves
each, as sasctl redrive does: a message that fails again is not moved twice, and a crash between a
send and its delete duplicates a message rather than losing it.`,
		Example: "  sasctl dlq redrive events 6f1c0e8a-…\n  sasctl dlq redrive orders --all",
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case all && len(args) != 1:
				return exactly(1, "a QUEUE with --all")(cmd, args)
			case !all && len(args) != 2:
				return usageErrorf("need a QUEUE and a MESSAGE-ID, or a QUEUE and --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			op, err := t.connect(cmd.Context(), true)
			if err != nil {
				return err
			}
			var res operator.DLQRedriven
			if all {
				res, err = op.RedriveAll(cmd.Context(), args[0], operator.DLQReadMax)
			} else {
				res, err = op.RedriveMessage(cmd.Context(), args[0], args[1])
			}
			if err != nil && res.Moved > 0 {
				return fmt.Errorf("%w (moved %d before that)", t.explain(err), res.Moved)
			}
			if err != nil {
				return t.explain(err)
			}
			out := cmd.OutOrStdout()
			return emit(out, t.output, res, func() { printRedriven(out, args[0], res) })
		},
	}
	targetFlags(cmd, &t, true)
	cmd.Flags().BoolVar(&all, "all", false, "move every message of the DLQ (up to 1000)")
	return cmd
}

// maxArgs allows up to n arguments, what says which.
func maxArgs(n int, what string) cobra.PositionalArgs { return rangeArgs(0, n, what) }

// rangeArgs requires lo to hi arguments, what says which.
func rangeArgs(lo, hi int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usageErrorf("need %s, not %d argument%s", what, len(args), plural(len(args)))
		}
		return nil
	}
}
