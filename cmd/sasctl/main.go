// Command sasctl is the operator and developer CLI. `sasctl demo` runs the
// whole pipeline locally against an emulator and prints what happened.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: sasctl <command> [flags]

commands:
  demo      run the pipeline locally (embedded moto_server unless AWS_ENDPOINT_URL
            is set) on a demo batch with faults switched on, with a summary
  dev       run the pipeline locally until Ctrl-C: moto_server, DynamoDB Local (its tables
            kept in .run/), the remote simulator and the console; prints the lines to
            paste to use it with your own tools; sasctl dev faults changes its faults
  console   serve the web console on 127.0.0.1 for the deployment the flags name
  submit    send orders from a file, stdin (-), or --generate N
  status    show an order: its task, each step and undo action, its timeline
  list      list orders, by --state, paged
  watch     live counts of orders by state
  resubmit  put a Failed or CompensationFailed order back to work
  cancel    cancel an order: what has not started does not, what completed is undone
  redrive   move messages from a dead-letter queue back to its queue
  chaos     run orders through the local stack with every fault injected,
            check every invariant; non-zero exit if one broke
  bench     count every AWS request of N orders (single-step and three-step,
            by batch size), price them, compare with Step Functions; writes
            JSON and an SVG chart
  workflow  validate workflow files as a deployment loads them, or show one's steps, undo
            chain and agents (--mermaid: a flowchart); no deployment, so no --endpoint

Every command but demo, dev, chaos and bench takes --endpoint, --prefix and --output text|json;
sasctl <command> -h lists its flags.
`

// run dispatches a command and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "demo":
		return demo(ctx, args[1:], stdout, stderr)
	case "dev":
		return dev(ctx, args[1:], stdout, stderr)
	case "console":
		return consoleCmd(ctx, args[1:], stdout, stderr)
	case "chaos":
		return chaosCmd(ctx, args[1:], stdout, stderr)
	case "bench":
		return benchCmd(ctx, args[1:], stdout, stderr)
	case "workflow":
		return workflowCmd(args[1:], stdout, stderr)
	case "submit":
		return submit(ctx, args[1:], stdin, stdout, stderr)
	case "status":
		return status(ctx, args[1:], stdout, stderr)
	case "list":
		return list(ctx, args[1:], stdout, stderr)
	case "watch":
		return watch(ctx, args[1:], stdout, stderr)
	case "resubmit":
		return resubmit(ctx, args[1:], stdout, stderr)
	case "cancel":
		return cancel(ctx, args[1:], stdout, stderr)
	case "redrive":
		return redrive(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "sasctl: unknown command %q\n%s", args[0], usage)
		return 2
	}
}
