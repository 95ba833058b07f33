package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/operator"
)

// refreshing is what top and watch share: the deployment they read, and
// how often they print what they read (--every) until --once (or until the
// command's own end, or Ctrl-C).
type refreshing struct {
	t     target
	every time.Duration
	once  bool
}

// refreshCmd is a command that connects to the deployment (its agents
// found) and runs run with what it connected to; it has the target's
// flags, --every (every by default) and --once (onceUsage).
func refreshCmd(cmd *cobra.Command, r *refreshing, every time.Duration, onceUsage string,
	run func(cmd *cobra.Command, op *operator.Operator) error) *cobra.Command {
	cmd.Args = noArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if r.every <= 0 {
			return usageErrorf("--every must be positive")
		}
		op, err := r.t.connect(cmd.Context(), true)
		if err != nil {
			return err
		}
		return run(cmd, op)
	}
	targetFlags(cmd, &r.t, true)
	cmd.Flags().DurationVar(&r.every, "every", every, "refresh period")
	cmd.Flags().BoolVar(&r.once, "once", false, onceUsage)
	return cmd
}

// loop calls look every period, from now, until it says it is done (or
// fails) or ctx ends.
func (r *refreshing) loop(ctx context.Context, look func() (done bool, err error)) error {
	for {
		if done, err := look(); done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.every):
		}
	}
}
