package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/devkit/localrun"
)

func submit(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var g globals
	fs := newFlags("submit", stderr, &g)
	generate := fs.Int("generate", 0, "send N generated orders instead of reading any")
	reply := fs.String("reply-queue", "", "with --generate: the reply queue the orders name")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: sasctl submit [flags] FILE|-   (JSON lines, or one JSON array; - reads stdin)\n       sasctl submit [flags] --generate N")
		fs.PrintDefaults()
	}
	if code := parse(fs, args, &g, stderr); code >= 0 {
		return code
	}
	var bodies []string
	switch {
	case *generate > 0 && fs.NArg() == 0:
		stamp := time.Now().UTC().Format("150405")
		for i := range *generate {
			o := localrun.DemoOrder(fmt.Sprintf("gen-%s-%05d", stamp, i), i)
			o.ReplyQueue = *reply
			bodies = append(bodies, o.JSON())
		}
	case *generate == 0 && fs.NArg() == 1:
		var err error
		if bodies, err = readOrders(fs.Arg(0), stdin); err != nil {
			return fail(stderr, "submit", &g, err)
		}
	default:
		fs.Usage()
		return 2
	}
	op, err := connect(ctx, &g)
	if err != nil {
		return fail(stderr, "submit", &g, err)
	}
	res, err := op.Submit(ctx, bodies)
	if err != nil {
		return fail(stderr, "submit", &g, err)
	}
	emit(stdout, &g, res, func() {
		fmt.Fprintf(stdout, "sent %d orders to %s\n", res.Sent, res.Queue)
	})
	for _, r := range res.Rejected {
		fmt.Fprintf(stderr, "sasctl submit: order %d not sent: %s\n", r.Item, r.Reason)
	}
	if len(res.Rejected) > 0 {
		return 1
	}
	return 0
}

// readOrders reads order bodies: a JSON array of orders, or one per line.
func readOrders(path string, stdin io.Reader) ([]string, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read orders: %w", err)
	}
	if t := strings.TrimSpace(string(data)); strings.HasPrefix(t, "[") {
		var raw []json.RawMessage
		if err := json.Unmarshal([]byte(t), &raw); err != nil {
			return nil, fmt.Errorf("read orders: the input starts like a JSON array but is not one: %w", err)
		}
		out := make([]string, len(raw))
		for i, m := range raw {
			out[i] = string(m)
		}
		return out, nil
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read orders: no orders in %s", path)
	}
	return out, sc.Err()
}
