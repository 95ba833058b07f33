package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

func status(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var g globals
	fs := newFlags("status", stderr, &g)
	if code := parse(fs, args, &g, stderr); code >= 0 {
		return code
	}
	id, ok := one(fs, "ORDER id", stderr)
	if !ok {
		return 2
	}
	op, err := connect(ctx, &g)
	if err != nil {
		return fail(stderr, "status", &g, err)
	}
	st, err := op.Status(ctx, id)
	if errors.Is(err, statestore.ErrNotFound) {
		return fail(stderr, "status", &g, fmt.Errorf("order %s not found", id))
	}
	if err != nil {
		return fail(stderr, "status", &g, err)
	}
	emit(stdout, &g, st, func() { printStatus(stdout, st) })
	return 0
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}

func printStatus(out io.Writer, s operator.Status) {
	t := s.Task
	fmt.Fprintf(out, "Order %s: %s (workflow %s, round %d)\n", t.OrderID, t.State, t.Workflow, t.Round)
	fmt.Fprintf(out, "  created %s   updated %s   ended %s\n", t.CreatedAt.UTC().Format(time.RFC3339), clock(t.UpdatedAt), clock(t.CompletedAt))
	if t.LastError != "" {
		fmt.Fprintf(out, "  last error: %s\n", t.LastError)
	}
	if t.CancelledBy != "" {
		fmt.Fprintf(out, "  cancel asked by %s at %s", t.CancelledBy, t.CancelledAt.UTC().Format(time.RFC3339))
		if t.CancelReason != "" {
			fmt.Fprintf(out, ": %s", t.CancelReason)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tKIND\tSTATE\tATTEMPTS\tFAILURES\tCOMPLETE BY\tDUE\tLAST ERROR")
	for _, r := range s.Records {
		kind := "step"
		if r.Undo {
			kind = "undo"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\t%s\n", r.Name, kind, r.State, r.Attempt, r.FailureCount,
			r.MaxFailures, clock(r.CompleteBy), clock(r.DueAt), short(r.LastError, 70))
	}
	tw.Flush()
	fmt.Fprintln(out, "\nTimeline")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, e := range s.Timeline {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", clock(e.At), e.Record, short(e.What, 90))
	}
	tw.Flush()
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

var taskStates = []workflow.State{workflow.Pending, workflow.Compensating, workflow.Processed, workflow.Failed,
	workflow.CompensationFailed, workflow.Cancelled}

func parseState(s string) (workflow.State, error) {
	if s == "" {
		return "", nil
	}
	for _, st := range taskStates {
		if strings.EqualFold(s, string(st)) {
			return st, nil
		}
	}
	names := make([]string, len(taskStates))
	for i, st := range taskStates {
		names[i] = string(st)
	}
	return "", fmt.Errorf("unknown state %q; the states are %s", s, strings.Join(names, ", "))
}

func list(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var g globals
	fs := newFlags("list", stderr, &g)
	stateFlag := fs.String("state", "", "only orders in this state (Pending, Compensating, Processed, Failed, CompensationFailed, Cancelled)")
	limit := fs.Int("limit", 50, "orders per page")
	next := fs.String("next", "", "the page token a previous list printed")
	if code := parse(fs, args, &g, stderr); code >= 0 {
		return code
	}
	state, err := parseState(*stateFlag)
	if err != nil || *limit < 1 {
		if err == nil {
			err = errors.New("--limit must be at least 1")
		}
		fmt.Fprintf(stderr, "sasctl list: %v\n", err)
		return 2
	}
	op, err := connect(ctx, &g)
	if err != nil {
		return fail(stderr, "list", &g, err)
	}
	tasks, token, err := op.Store.ListTasks(ctx, state, *limit, *next)
	if err != nil {
		return fail(stderr, "list", &g, err)
	}
	page := struct {
		Orders []statestore.Task `json:"orders"`
		Next   string            `json:"next,omitempty"`
	}{tasks, token}
	if page.Orders == nil {
		page.Orders = []statestore.Task{}
	}
	emit(stdout, &g, page, func() {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ORDER\tSTATE\tROUND\tUPDATED\tLAST ERROR")
		for _, t := range tasks {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.OrderID, t.State, t.Round, t.UpdatedAt.UTC().Format(time.RFC3339), short(t.LastError, 70))
		}
		tw.Flush()
		if token != "" {
			fmt.Fprintf(stdout, "more: sasctl list --next %s\n", token)
		}
	})
	return 0
}

func watch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var g globals
	fs := newFlags("watch", stderr, &g)
	every := fs.Duration("every", time.Second, "refresh period")
	once := fs.Bool("once", false, "print one snapshot and exit")
	untilIdle := fs.Bool("until-idle", false, "exit when no order is in flight")
	if code := parse(fs, args, &g, stderr); code >= 0 {
		return code
	}
	op, err := connect(ctx, &g)
	if err != nil {
		return fail(stderr, "watch", &g, err)
	}
	tty := isTerminal(stdout) && g.output == "text"
	for {
		snap, err := takeSnapshot(ctx, op)
		if err != nil {
			return fail(stderr, "watch", &g, err)
		}
		emit(stdout, &g, snap, func() {
			if tty {
				fmt.Fprint(stdout, "\r\033[K")
			}
			fmt.Fprint(stdout, snap.line())
			if !tty {
				fmt.Fprintln(stdout)
			}
		})
		if *once || (*untilIdle && snap.InFlight == 0) {
			if tty {
				fmt.Fprintln(stdout)
			}
			return 0
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(stdout)
			}
			return 0
		case <-time.After(*every):
		}
	}
}

type watchSnapshot struct {
	At       time.Time      `json:"at"`
	Total    int            `json:"total"`
	InFlight int            `json:"inFlight"`
	ByState  map[string]int `json:"byState"`
	// Waiting are the ready steps not claimed yet, Running the claimed ones;
	// LongestWait (seconds) is how long the longest-waiting one has waited.
	Waiting     int            `json:"waitingSteps"`
	Running     int            `json:"runningSteps"`
	LongestWait float64        `json:"longestWaitSeconds"`
	Queues      map[string]int `json:"queueDepths"` // messages waiting, by work queue
}

func takeSnapshot(ctx context.Context, op *operator.Operator) (watchSnapshot, error) {
	c, err := op.Store.Census(ctx, time.Now())
	if err != nil {
		return watchSnapshot{}, err
	}
	s := snapshot(c.ByState)
	s.Waiting, s.Running, s.LongestWait = c.Waiting, c.Running, c.LongestWait.Round(100*time.Millisecond).Seconds()
	s.Queues, err = op.QueueDepths(ctx)
	return s, err
}

func snapshot(counts map[workflow.State]int) watchSnapshot {
	s := watchSnapshot{At: time.Now().UTC(), ByState: map[string]int{}}
	for st, n := range counts {
		s.ByState[string(st)] = n
		s.Total += n
		if !st.Ended() {
			s.InFlight += n
		}
	}
	return s
}

func (s watchSnapshot) line() string {
	const width = 30
	filled := 0
	if s.Total > 0 {
		filled = width * (s.Total - s.InFlight) / s.Total
	}
	var parts []string
	for _, st := range taskStates {
		parts = append(parts, fmt.Sprintf("%s %d", st, s.ByState[string(st)]))
	}
	extra := slices.Sorted(func(yield func(string) bool) {
		for k := range s.ByState {
			if _, err := parseState(k); err != nil && !yield(k) {
				return
			}
		}
	})
	for _, k := range extra {
		parts = append(parts, fmt.Sprintf("%s %d", k, s.ByState[k]))
	}
	line := fmt.Sprintf("[%s%s] %d orders, %d in flight | %s | steps: %d waiting for a claim (longest %gs), %d running",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), s.Total, s.InFlight, strings.Join(parts, ", "),
		s.Waiting, s.LongestWait, s.Running)
	var queued []string
	for _, q := range slices.Sorted(maps.Keys(s.Queues)) {
		if s.Queues[q] > 0 {
			queued = append(queued, fmt.Sprintf("%s %d", q, s.Queues[q]))
		}
	}
	if len(queued) > 0 {
		line += " | queued: " + strings.Join(queued, ", ")
	}
	return line
}
