package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sas-go/sas/shared/console"
)

// consoleCmd serves the web console for the deployment the flags name,
// on 127.0.0.1, until Ctrl-C.
func consoleCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var g globals
	fs := newFlags("console", stderr, &g)
	listen := fs.String("listen", "127.0.0.1:0", "the console's address: 127.0.0.1 only (PORT 0 for a free one)")
	if code := parse(fs, args, &g, stderr); code >= 0 {
		return code
	}
	if err := console.CheckAddr(*listen); err != nil {
		fmt.Fprintln(stderr, "sasctl console:", err)
		return 2
	}
	op, err := connect(ctx, &g)
	if err != nil {
		return fail(stderr, "console", &g, err)
	}
	c, err := console.New(console.Config{Operator: op, Who: operatorName() + " in the console"})
	if err != nil {
		return fail(stderr, "console", &g, err)
	}
	l, err := console.Listen(*listen)
	if err != nil {
		fmt.Fprintln(stderr, "sasctl console:", err)
		return 2
	}
	fmt.Fprintf(stdout, "console: %s (deployment %s); Ctrl-C stops it\n", console.URL(l), g.prefix)
	if err := c.Serve(ctx, l); err != nil {
		return fail(stderr, "console", &g, err)
	}
	return 0
}
