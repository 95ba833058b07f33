package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// submitLong is sasctl submit's help.
const submitLong = `submit sends orders to the deployment's orders queue: JSON lines, or one JSON array, from FILE
or stdin (-); or, with --generate N, N made-up orders. Each is checked as Submission checks it
first: one that would be refused is not sent, and is named on stderr with the reason (exit 1). With
the deployment's workflow files (--workflows, default $SAS_WORKFLOWS, which sasctl dev exports), that
includes the workflow the order names, its schema and its forEach items; without them, the order's
envelope only.

Submission takes the orders sent asynchronously: with --wait DURATION, submit waits for each one's
verdict: taken (stored as sent), or refused (found in the orders DLQ: its reason on stderr, exit 1);
no verdict within DURATION is exit 1 too. Without it, sasctl status ORDER says whether an order was
taken, and sasctl dlq show orders lists those refused, with the reason.`

// submitFlags are sasctl submit's flags.
type submitFlags struct {
	t        target
	generate int
	reply    string
	wait     time.Duration
}

func submitCmd() *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit FILE|-",
		Short: "send orders from a file, stdin (-), or --generate N",
		Long:  submitLong,
		Example: "  sasctl submit orders.jsonl\n  sasctl submit --generate 100\n" +
			"  sasctl submit --workflows workflows/order.yaml,workflows/approval.yaml orders.jsonl",
		Args: func(cmd *cobra.Command, args []string) error {
			if f.generate > 0 {
				return noArgs(cmd, args)
			}
			return exactly(1, "one FILE (or - for stdin), or --generate N")(cmd, args)
		},
		RunE: f.run,
	}
	targetFlags(cmd, &f.t, true)
	f.t.bind(cmd.Flags(), "workflows")
	cmd.Flags().IntVar(&f.generate, "generate", 0, "send N made-up orders instead of reading any")
	waitFlag(cmd, &f.wait, "each order")
	cmd.Flags().StringVar(&f.reply, "reply-queue", "", "with --generate: the reply queue the orders name")
	return cmd
}

// run checks and sends the orders, and with --wait waits for their
// verdicts.
func (f *submitFlags) run(cmd *cobra.Command, args []string) error {
	workflows, err := deployedWorkflows(f.t.WorkflowFiles)
	if err != nil {
		return err
	}
	bodies, err := orderBodies(args, f.generate, f.reply, workflows.IDField(""), cmd.InOrStdin())
	if err != nil {
		return err
	}
	op, err := f.t.connect(cmd.Context(), false)
	if err != nil {
		return err
	}
	op.Workflows = workflows
	since := time.Now()
	res, err := op.Submit(cmd.Context(), bodies)
	if err != nil {
		return f.t.explain(err)
	}
	out := cmd.OutOrStdout()
	sent := func() { fmt.Fprintf(out, "sent %d orders to %s\n", res.Sent, res.Queue) }
	if f.wait <= 0 {
		if err := emit(out, f.t.output, res, sent); err != nil {
			return err
		}
		err := rejected(cmd, res)
		if res.Sent > 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), submitHint)
		}
		return err
	}
	verdicts, err := op.AwaitOrders(cmd.Context(), sentBodies(bodies, res), since, f.wait, verdictEvery)
	if err != nil {
		return f.t.explain(err)
	}
	if err := emit(out, f.t.output, submitWaited{res, verdicts}, sent); err != nil {
		return err
	}
	err = rejected(cmd, res)
	for _, v := range verdicts {
		if !printVerdict(f.t.textOut(out), cmd.ErrOrStderr(), cmd.CommandPath(), "order "+v.OrderID, "orders", v, f.wait) {
			err = errReported
		}
	}
	return err
}

// submitHint says where to look for what Submission made of the orders.
const submitHint = "whether Submission took them: sasctl status ORDER; an order it refused is in the orders DLQ " +
	"with the reason: sasctl dlq show orders (or submit with --wait 10s)"

// rejected names on stderr each order submit did not send: errReported if
// any.
func rejected(cmd *cobra.Command, res operator.Submitted) error {
	for _, r := range res.Rejected {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: order %d not sent: %s\n", cmd.CommandPath(), r.Item, r.Reason)
	}
	if len(res.Rejected) > 0 {
		return errReported
	}
	return nil
}

// sentBodies are the bodies submit sent: those it did not reject.
func sentBodies(bodies []string, res operator.Submitted) []string {
	out := make([]string, 0, res.Sent)
	for i, b := range bodies {
		if !slices.ContainsFunc(res.Rejected, func(r operator.Rejected) bool { return r.Item == i+1 }) {
			out = append(out, b)
		}
	}
	return out
}

// deployedWorkflows are the deployment's workflows, loaded from its files
// (--workflows) as a deployment loads them; none named: none known (the
// zero Set), and orders are checked without them.
func deployedWorkflows(files []string) (workflow.Set, error) {
	if len(files) == 0 {
		return workflow.Set{}, nil
	}
	set, err := deployment.LoadWorkflows(files, "", 0)
	if err != nil {
		return set, usageErrorf("--workflows: %w", err)
	}
	return set, nil
}

// orderBodies are the orders to send: made up (their id named idField,
// the default workflow's), or read from the file.
func orderBodies(args []string, generate int, reply, idField string, stdin io.Reader) ([]string, error) {
	if generate <= 0 {
		return readOrders(args[0], stdin)
	}
	stamp := time.Now().UTC().Format("150405")
	bodies := make([]string, 0, generate)
	for i := range generate {
		o := localrun.DemoOrder(fmt.Sprintf("gen-%s-%05d", stamp, i), i)
		o.ReplyQueue = reply
		bodies = append(bodies, shapes.WithIDField(o.JSON(), idField))
	}
	return bodies, nil
}
