package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/user"

	"github.com/sas-go/sas/shared/statestore"
)

func resubmit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var g globals
	fs := newFlags("resubmit", stderr, &g)
	step := fs.String("step", "", "the step (or undo action) that failed; default: the one in Error")
	if code := parse(fs, args, &g, stderr); code >= 0 {
		return code
	}
	id, ok := one(fs, "ORDER id", stderr)
	if !ok {
		return 2
	}
	op, err := connect(ctx, &g)
	if err != nil {
		return fail(stderr, "resubmit", &g, err)
	}
	res, err := op.Resubmit(ctx, id, *step)
	if errors.Is(err, statestore.ErrNotFound) {
		return fail(stderr, "resubmit", &g, fmt.Errorf("order %s not found", id))
	}
	if err != nil {
		return fail(stderr, "resubmit", &g, err)
	}
	emit(stdout, &g, res, func() {
		what := "step " + res.Step
		if res.Undo {
			what = "undo action " + res.Step
		}
		fmt.Fprintf(stdout, "order %s resubmitted: %s is Pending again (round %d); the Scheduler was told\n", res.OrderID, what, res.Round)
	})
	return 0
}

func cancel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var g globals
	fs := newFlags("cancel", stderr, &g)
	reason := fs.String("reason", "", "why, kept with the order and shown by status")
	if code := parse(fs, args, &g, stderr); code >= 0 {
		return code
	}
	id, ok := one(fs, "ORDER id", stderr)
	if !ok {
		return 2
	}
	op, err := connect(ctx, &g)
	if err != nil {
		return fail(stderr, "cancel", &g, err)
	}
	res, err := op.Cancel(ctx, id, operatorName(), *reason)
	if errors.Is(err, statestore.ErrNotFound) {
		return fail(stderr, "cancel", &g, fmt.Errorf("order %s not found", id))
	}
	if err != nil {
		return fail(stderr, "cancel", &g, err)
	}
	emit(stdout, &g, res, func() { fmt.Fprintf(stdout, "order %s: %s\n", res.OrderID, res.What) })
	return 0
}

// operatorName says who runs sasctl, for the records it writes.
func operatorName() string {
	name := "sasctl"
	if u, err := user.Current(); err == nil {
		name += " (" + u.Username + ")"
	}
	return name
}

func redrive(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var g globals
	fs := newFlags("redrive", stderr, &g)
	queueName := fs.String("queue", "orders", "the queue whose DLQ to empty back into it (orders, scheduler, agent-<name>-requests, agent-<name>-responses)")
	maxN := fs.Int("max", 1000, "move at most this many messages")
	if code := parse(fs, args, &g, stderr); code >= 0 {
		return code
	}
	if *maxN < 1 {
		fmt.Fprintln(stderr, "sasctl redrive: --max must be at least 1")
		return 2
	}
	op, err := connect(ctx, &g)
	if err != nil {
		return fail(stderr, "redrive", &g, err)
	}
	moved, err := op.Redrive(ctx, *queueName, *maxN)
	if err != nil {
		return fail(stderr, "redrive", &g, fmt.Errorf("%w (moved %d before that)", err, moved))
	}
	q := g.prefix + "-" + *queueName
	emit(stdout, &g, map[string]any{"moved": moved, "from": q + "-dlq", "to": q}, func() {
		fmt.Fprintf(stdout, "moved %d messages from %s-dlq to %s\n", moved, q, q)
	})
	return 0
}
