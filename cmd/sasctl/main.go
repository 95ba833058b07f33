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
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: sasctl <command> [flags]

commands:
  demo    run the pipeline locally (embedded moto_server unless AWS_ENDPOINT_URL
          is set), submit a demo batch with faults switched on, show progress and
          a summary; see sasctl demo -h
`

// run dispatches a command and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "demo":
		return demo(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "sasctl: unknown command %q\n%s", args[0], usage)
		return 2
	}
}
