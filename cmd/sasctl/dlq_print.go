package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/sas-go/sas/shared/operator"
)

// printDLQList prints each DLQ's depth and oldest message's age.
func printDLQList(out io.Writer, dlqs []operator.DLQSummary) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tDLQ\tDEPTH\tOLDEST")
	for _, d := range dlqs {
		oldest := "-"
		if !d.OldestSentAt.IsZero() {
			oldest = d.OldestAge.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", d.Queue, d.Name, d.Depth, oldest)
	}
	_ = tw.Flush()
}

// printDLQMessages prints a DLQ's messages, one a line.
func printDLQMessages(out io.Writer, c operator.DLQContents) {
	fmt.Fprintf(out, "%s: %d message%s\n", c.Name, c.Depth, plural(c.Depth))
	if len(c.Messages) == 0 {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tORDER\tWHAT\tRECEIVES\tAGE\tREASON")
	for _, m := range c.Messages {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, dlqOrDash(m.OrderID), dlqWhat(m), m.ReceiveCount, m.Age, short(dlqReason(m), 90))
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "one whole: sasctl dlq show %s ID; back to %s once the cause is fixed: sasctl dlq redrive %[1]s ID|--all\n",
		c.Queue, c.Queue)
}

// printDLQMessage prints one message whole.
func printDLQMessage(out io.Writer, m operator.DLQMessage) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Message\t%s\n", m.ID)
	fmt.Fprintf(tw, "Order\t%s\n", dlqOrDash(m.OrderID))
	fmt.Fprintf(tw, "What\t%s\n", dlqWhat(m))
	fmt.Fprintf(tw, "Reason\t%s\n", dlqReason(m))
	fmt.Fprintf(tw, "Source\t%s\n", dlqOrDash(m.SourceQueue))
	fmt.Fprintf(tw, "Receives\t%d\n", m.ReceiveCount)
	fmt.Fprintf(tw, "Sent\t%s (%s ago)\n", stamp(m.SentAt), m.Age)
	_ = tw.Flush()
	fmt.Fprintf(out, "Body\n%s\n", m.Body)
}

// printRedriven prints what a redrive moved.
func printRedriven(out io.Writer, queue string, r operator.DLQRedriven) {
	fmt.Fprintf(out, "moved %d message%s from %s to %s\n", r.Moved, plural(r.Moved), r.From, r.To)
	printRedriveLines(out, r.Messages)
	if r.Moved > 0 {
		fmt.Fprintf(out, "one refused again is back in the DLQ with its reason: sasctl dlq show %s\n", queue)
	}
}

// dlqWhat says what a message is: an order, an event (its name and id), or
// its kind.
func dlqWhat(m operator.DLQMessage) string {
	switch {
	case m.Kind == "" && m.OrderID != "":
		return "order"
	case m.Kind == "event" && m.Event != "":
		return fmt.Sprintf("event %s (%s)", m.Event, dlqOrDash(m.EventID))
	case m.Kind == "":
		return "-"
	}
	return m.Kind
}

// dlqReason is a message's reason, or why it has none.
func dlqReason(m operator.DLQMessage) string {
	if m.RejectReason == "" {
		return "(none: SQS moved it after too many receives; see its consumer's log)"
	}
	return oneLine(m.RejectReason)
}

// dlqOrDash is s, or "-" for none.
func dlqOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printRedriveDry lists the messages a redrive would move.
func printRedriveDry(out io.Writer, r operator.DLQRedriven) {
	fmt.Fprintf(out, "would move %d message%s from %s to %s (a dry run: nothing moved)\n", len(r.Messages), plural(len(r.Messages)),
		r.From, r.To)
	printRedriveLines(out, r.Messages)
	printLeft(out, r)
}

// printLeft says how many messages a redrive's query left in the DLQ.
func printLeft(out io.Writer, r operator.DLQRedriven) {
	if r.Left > 0 {
		fmt.Fprintf(out, "%d other message%s left in %s: the query does not keep them\n", r.Left, plural(r.Left), r.From)
	}
}

// printRedriveLines prints a line for each message moved, or to move.
func printRedriveLines(out io.Writer, msgs []operator.DLQMessage) {
	for _, m := range msgs {
		fmt.Fprintf(out, "  %s  %s  order %s  (was: %s)\n", m.ID, dlqWhat(m), dlqOrDash(m.OrderID), short(dlqReason(m), 70))
	}
}
