package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
)

// holdCmds are the operator's decisions on an order a step's failure holds
// (onFailure: hold): retry, skip, undo.
func holdCmds() []*cobra.Command {
	type spec struct {
		action        outcome.HoldAction
		short, long   string
		example       string
		step, results bool
	}
	specs := []spec{
		{outcome.HoldRetry, "run the step that holds a Held order again, its failures forgotten",
			`retry runs the step whose failure holds the order (onFailure: hold) again, once its cause is fixed
(a card replaced, an account unlocked): a new attempt, its failure count reset, with the same
idempotency key. The order goes on where it stood; its deadline did not run while it was held.`,
			"  sasctl retry o-1\n  sasctl retry --step charge-payment o-1", true, false},
		{outcome.HoldSkip, "take the step that holds a Held order as done, with a result given by hand",
			`skip takes the step whose failure holds the order as done, with the result you give (what its
service would have answered, JSON; none: null), and the order goes on as if it had answered: use it
when the step's work was done another way (charged by phone). Its undo action runs if the order is
later undone.`,
			`  sasctl skip --result '{"charged":"by phone"}' o-1`, true, true},
		{outcome.HoldUndo, "undo a Held order now, as its step's failure would have",
			`undo undoes a Held order now: what completed is undone, the latest first, and it ends Failed (or
CompensationFailed), as the failure would have done had its step not held it. It is what happens by
itself when the hold ends.`,
			"  sasctl undo o-1", false, false},
	}
	var out []*cobra.Command
	for _, sp := range specs {
		var (
			t      target
			step   string
			result string
			b      bulkFlags
		)
		c := &cobra.Command{
			Use: string(sp.action) + " ORDER...|--state Held [QUERY]", Short: sp.short, Long: sp.long + fmt.Sprintf(bulkHelp, "the Held ones"),
			Example: sp.example + fmt.Sprintf("\n  sasctl %s --workflow order --older-than 1h --dry-run", sp.action),
			RunE: func(cmd *cobra.Command, args []string) error {
				if result != "" && !message.ValidJSON([]byte(result)) {
					return usageError{fmt.Errorf("--result: %s: %s", operator.ResultNotJSON, result)}
				}
				if b.many(cmd, args) {
					return runBulk(cmd, &t, &b, args, operator.ActionSpec{Name: string(sp.action), Step: step, Result: json.RawMessage(result)})
				}
				if len(args) != 1 {
					return exactly(1, "one ORDER id, or a query")(cmd, args)
				}
				d := outcome.HoldDecision{OrderID: args[0], Action: sp.action, Step: step, By: operatorName()}
				if result != "" {
					d.Result = json.RawMessage(result)
				}
				op, err := t.connect(cmd.Context(), true) // its agents' queues: where the requests go
				if err != nil {
					return err
				}
				res, err := op.DecideHeld(cmd.Context(), d)
				if err != nil {
					return t.explainOrder(args[0], err)
				}
				w := cmd.OutOrStdout()
				return emit(w, t.output, res, func() { printHeld(w, sp.action, res) })
			},
		}
		targetFlags(c, &t, true)
		b.bind(c)
		t.bind(c.Flags(), "workflows") // a field no workflow declares is told so
		if sp.step {
			c.Flags().StringVar(&step, "step", "", "the step that holds the order (a forEach item's: step#N); default: the one")
		}
		if sp.results {
			c.Flags().StringVar(&result, "result", "", "the step's result, JSON, as its service would have answered")
		}
		out = append(out, c)
	}
	return out
}

// printHeld says what a decision on a held order did.
func printHeld(w io.Writer, a outcome.HoldAction, res outcome.HoldDecided) {
	switch a {
	case outcome.HoldRetry:
		fmt.Fprintf(w, "order %s: step %s runs again; the order is %s\n", res.OrderID, res.Step, res.State)
	case outcome.HoldSkip:
		fmt.Fprintf(w, "order %s: step %s taken as done; the order is %s\n", res.OrderID, res.Step, res.State)
	default:
		fmt.Fprintf(w, "order %s is being undone; it is %s\n", res.OrderID, res.State)
	}
}
