package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/console"
)

func consoleCmd() *cobra.Command {
	var (
		t      target
		listen string
	)
	cmd := &cobra.Command{
		Use:   "console",
		Short: "serve the web console for a deployment, on 127.0.0.1, until Ctrl-C",
		Long: `console serves the web console on 127.0.0.1 (never another interface) for the deployment the
flags name, with your AWS credentials: the orders by state, an order's graph and timeline, resubmit,
cancel and send an event, the dead-letter queues and the alerts. Each action is a same-origin POST
carrying the process's random token.`,
		Example: "  sasctl console --prefix shop --listen 127.0.0.1:8090",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := console.CheckAddr(listen); err != nil {
				return usageError{err}
			}
			set, err := deployedWorkflows(t.WorkflowFiles)
			if err != nil {
				return err
			}
			op, err := t.connect(cmd.Context(), true)
			if err != nil {
				return err
			}
			op.Workflows = set.With(t.Overrides) // an order of another version offers a move to the one deployed
			c, err := console.New(console.Config{Operator: op, Who: operatorName() + " in the console"})
			if err != nil {
				return err
			}
			l, err := console.Listen(listen)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "console: %s (deployment %s); Ctrl-C stops it\n", console.URL(l), op.Topology.Prefix)
			return c.Serve(cmd.Context(), l)
		},
	}
	targetFlags(cmd, &t, false)
	t.bind(cmd.Flags(), "workflows", "stepTimeout", "maxFailures", "retryBackoff", "pickupTimeout", "orderDeadline")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "the console's address: 127.0.0.1 only (PORT 0 for a free one)")
	return cmd
}
