package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/operator"
)

// verdictEvery is how often --wait looks.
const verdictEvery = 250 * time.Millisecond

// waitFlag puts --wait on cmd.
func waitFlag(cmd *cobra.Command, wait *time.Duration, what string) {
	cmd.Flags().DurationVar(wait, "wait", 0, "wait up to this long for what the pipeline made of "+what+
		": taken, or refused to its DLQ with the reason (exit 1); 0: do not wait, say where to look")
}

// signalWaited is what sasctl signal --wait prints with -o json.
type signalWaited struct {
	operator.Signalled
	Verdict *operator.Verdict `json:"verdict,omitempty"`
}

// submitWaited is what sasctl submit --wait prints with -o json.
type submitWaited struct {
	operator.Submitted
	Verdicts []operator.Verdict `json:"verdicts,omitempty"`
}

// textOut is where a command's text goes besides its JSON: out for text,
// nowhere with -o json.
func (t *target) textOut(out io.Writer) io.Writer {
	if t.output == "json" {
		return io.Discard
	}
	return out
}

// printVerdict says a verdict on what was sent to an order: taken on out,
// else on stderr with where to look (dlq: the DLQ it would be in); it
// reports whether it was taken.
func printVerdict(out, stderr io.Writer, cmdPath, what, dlq string, v operator.Verdict, wait time.Duration) bool {
	switch v.Verdict {
	case operator.Taken:
		fmt.Fprintf(out, "%s: taken\n", what)
		return true
	case operator.Refused:
		r := v.Reason
		if r == "" {
			r = "no reason: SQS moved it after too many receives (see its consumer's log)"
		}
		fmt.Fprintf(stderr, "%s: %s refused: %s (in the %s DLQ: sasctl dlq show %[4]s %s)\n", cmdPath, what, oneLine(r), v.DLQ, v.MessageID)
	default:
		fmt.Fprintf(stderr, "%s: %s: no verdict within %s (sasctl status %s; if refused, it will be in sasctl dlq show %s)\n",
			cmdPath, what, wait, v.OrderID, dlq)
	}
	return false
}
