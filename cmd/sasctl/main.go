// Command sasctl is the operator and developer CLI of the
// Scheduler-Agent-Supervisor pipeline: it inspects and acts on a deployment
// (status, list, watch, submit, signal, resubmit, cancel, redrive, dlq,
// console),
// runs one locally (demo, dev, chaos, bench) and checks workflow files
// (workflow validate, workflow show). Built on spf13/cobra: flags go before
// or after the arguments, `sasctl help CMD` explains a command, and
// `sasctl completion SHELL` prints a completion script.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// The exit codes, one convention for every command.
const (
	exitDone   = 0 // it did what was asked
	exitFailed = 1 // it could not: the deployment said no, or was not there; one line on stderr says why
	exitUsage  = 2 // the command line (or what the command needs to start) is wrong: nothing was done
)

// run runs sasctl with args and returns its exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitDone
	}
	if errors.Is(err, errReported) {
		return exitFailed
	}
	var u usageError
	if errors.As(err, &u) || strings.HasPrefix(err.Error(), "unknown command") {
		fmt.Fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", cmd.CommandPath(), err, cmd.CommandPath())
		return exitUsage
	}
	fmt.Fprintf(stderr, "%s: %s\n", cmd.CommandPath(), strings.ReplaceAll(err.Error(), "\n", " "))
	return exitFailed
}

// newRoot is the sasctl command with every subcommand.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "sasctl",
		Short: "operate and develop the Scheduler-Agent-Supervisor pipeline",
		Long: `sasctl inspects and acts on a deployment (on AWS, LocalStack or sasctl dev's emulators),
runs the pipeline locally, and checks workflow files.

Exit codes: 0 done; 1 failed (one line on stderr says why); 2 usage (a bad command
line, or what the command needs is missing: nothing was done).

A deployment is found by --prefix (default $SAS_PREFIX, else sas) with the AWS SDK's own
settings: credentials, region, and AWS_ENDPOINT_URL for an emulator. docs/cli.md has more.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return usageErrorf("name a command")
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddGroup(&cobra.Group{ID: "deployment", Title: "Commands on a deployment:"},
		&cobra.Group{ID: "local", Title: "Commands that run the pipeline locally:"},
		&cobra.Group{ID: "files", Title: "Commands on workflow files:"},
		&cobra.Group{ID: "plan", Title: "Commands that plan a deployment:"})
	for _, c := range append([]*cobra.Command{statusCmd(), listCmd(), watchCmd(), topCmd(), submitCmd(), signalCmd(), resubmitCmd(),
		cancelCmd(), migrateCmd(), redriveCmd(), dlqCmd(), consoleCmd(), agentCmd()}, holdCmds()...) {
		c.GroupID = "deployment"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{demoCmd(), devCmd(), chaosCmd(), benchCmd()} {
		c.GroupID = "local"
		root.AddCommand(c)
	}
	wf := workflowCmd()
	wf.GroupID = "files"
	capacity := capacityCmd()
	capacity.GroupID = "plan"
	root.AddCommand(wf, capacity, versionCmd())
	return root
}
