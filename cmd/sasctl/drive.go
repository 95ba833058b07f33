package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/statestore"
)

// malformedSamples are the bad orders the demo sends with the good ones.
var malformedSamples = []string{
	`{"orderId": "broken-json",`,
	`{"orderId":"no-customer","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}`,
	`{"orderId":"wrong-type","customerId":"c","items":[{"sku":"A","quantity":"two","unitPriceCents":1}]}`,
	`{"orderId":"unknown-field","customerId":"c","items":[{"sku":"A","quantity":1,"unitPriceCents":1}],"coupon":"FREE"}`,
	`{"orderId":"oversized","customerId":"c","items":[],"note":"` + strings.Repeat("x", 40_000) + `"}`,
}

// drive submits the demo batch, shows progress until every order ended, and
// prints the summary. It fails if any order was lost or did not end.
func drive(ctx context.Context, stack *localrun.Stack, sim *remotesim.Simulator, f demoFlags, out io.Writer) error {
	run := time.Now().UTC().Format("150405")
	names := stack.Deployment.Config.Workflows.Names() // the orders take turns, when there are several
	var ids, bodies []string
	for i := range f.orders {
		id := fmt.Sprintf("demo-%s-%05d", run, i)
		ids = append(ids, id)
		o := localrun.DemoOrder(id, i)
		if len(names) > 1 {
			o.Workflow = names[i%len(names)]
		}
		bodies = append(bodies, o.JSON())
	}
	for i := range f.malformed {
		bodies = append(bodies, malformedSamples[i%len(malformedSamples)])
	}
	rng := remotesimShuffle(f.seed)
	rng(bodies)
	cpu := startCPU()
	start := time.Now()
	if err := stack.SendOrders(ctx, bodies...); err != nil {
		return err
	}
	fmt.Fprintf(out, "submitted %d orders and %d malformed ones; faults: %.0f%% transient, %.0f%% stalled first calls, %.0f%% refused for good\n",
		f.orders, f.malformed, 100*f.transient, 100*f.stall, 100*f.permanent)

	p := newProgress(out, isTerminal(out))
	wctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if stack.Waits() {
		fmt.Fprintln(out, "a workflow waits for events: the demo sends each parked order its event (amountCents: the order's total, by: sasctl demo)")
		go approve(wctx, stack, ids)
	}
	tasks, err := stack.WaitEnded(wctx, ids, 250*time.Millisecond, func(c localrun.Counts) {
		p.show(time.Since(start), c, stack.Tally)
	})
	p.done()
	elapsed := time.Since(start)
	used := cpu.uses() // before the wait for the malformed ones
	// Let the malformed ones reach their DLQ before counting them.
	waitFor(ctx, 10*time.Second, func() bool { return int(stack.Tally.Sum(metrics.MalformedMessages)) >= f.malformed })
	s := summarize(ctx, stack, sim, ids, tasks, elapsed)
	s.print(out, f)
	printCPU(out, used, f.orders)
	printInvocations(out, stack)
	if err != nil {
		return fmt.Errorf("not every order ended: %w", err)
	}
	if s.lost > 0 || s.twice > 0 {
		return fmt.Errorf("%d orders lost, %d effects applied twice", s.lost, s.twice)
	}
	return nil
}

// approve plays the approver of orders that wait for an event: each gets
// it once parked, its data the order's total and who approved it.
func approve(ctx context.Context, stack *localrun.Stack, ids []string) {
	totals := map[string]int64{}
	for i, id := range ids {
		for _, it := range localrun.DemoOrder(id, i).Items {
			totals[id] += int64(it.Quantity) * it.UnitPriceCents
		}
	}
	a := localrun.Approver{Stack: stack, Data: func(id, _ string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"amountCents":%d,"by":"sasctl demo"}`, totals[id]))
	}}
	a.Run(ctx, ids, time.Second)
}

type summary struct {
	processed, failed, compFailed  int
	lost, pending                  int
	malformed, retries, recoveries int
	resent, held                   int
	alerts, inbox, effects, twice  int
	undone                         int
	p50, p95, elapsed              time.Duration
	dlq                            string
}

func summarize(ctx context.Context, stack *localrun.Stack, sim *remotesim.Simulator, ids []string,
	tasks map[string]statestore.Task, elapsed time.Duration) summary {
	c := localrun.CountTasks(ids, tasks)
	s := summary{elapsed: elapsed, dlq: stack.Topology().OrdersQueue().DLQName, processed: c.Processed,
		failed: c.Failed, compFailed: c.CompensationFailed, lost: c.Missing, pending: c.Running + c.Compensating}
	var lat []time.Duration
	for _, t := range tasks {
		if !t.CompletedAt.IsZero() {
			lat = append(lat, t.CompletedAt.Sub(t.CreatedAt))
		}
	}
	slices.Sort(lat)
	s.p50, s.p95 = percentile(lat, 0.50), percentile(lat, 0.95)
	t := stack.Tally
	if msgs, err := stack.Peek(ctx, stack.QueueURL(s.dlq)); err == nil {
		distinct := map[string]bool{} // SQS delivers at least once: a rejection can repeat
		for _, m := range msgs {
			distinct[aws.ToString(m.Body)] = true
		}
		s.malformed = len(distinct)
	}
	s.retries = int(t.Sum(metrics.AgentRetries))
	s.recoveries = int(t.Sum(metrics.SupervisorRecoveries))
	s.resent, s.held = int(t.Sum(metrics.MessagesResent)), int(t.Sum(metrics.WaitsHeld))
	s.alerts = int(t.Sum(metrics.AlertsPublished))
	if a, err := stack.Alerts(ctx); err == nil {
		s.inbox = len(a)
	}
	undos := map[string]bool{} // the undo actions' names
	for _, d := range stack.Deployment.Config.Workflows.Definitions() {
		for _, st := range d.Steps {
			if st.Undo != nil {
				undos[st.Undo.Name] = true
			}
		}
	}
	per := map[string]int{} // by order and record (the idempotency key's name, any round): each may take effect once
	for _, e := range sim.Ledger() {
		record, _, _ := strings.Cut(strings.TrimPrefix(e.Key, e.OrderID+"/"), "/r")
		per[e.OrderID+"/"+record]++
		s.effects++
		if name, _, _ := strings.Cut(record, "#"); undos[name] {
			s.undone++
		}
	}
	for _, n := range per {
		if n > 1 {
			s.twice += n - 1
		}
	}
	return s
}

func (s summary) print(out io.Writer, f demoFlags) {
	fmt.Fprintf(out, "\nSummary: %d orders in %.1fs (seed %d)\n", f.orders, s.elapsed.Seconds(), f.seed)
	row := func(name string, v any, note string) { fmt.Fprintf(out, "  %-24s %8v   %s\n", name, v, note) }
	row("Processed", s.processed, "")
	row("Failed", s.failed, "a step failed for good; the completed steps were undone")
	row("CompensationFailed", s.compFailed, "an undo failed for good too: the operator must act")
	row("Alerts", s.alerts, fmt.Sprintf("published; %d in the alert inbox", s.inbox))
	row("Not ended", s.pending, "")
	row("Lost", s.lost, lostNote(s.lost))
	row("Malformed rejected", s.malformed, "sent to "+s.dlq+" with their reasons")
	row("Agent retries", s.retries, "transient faults absorbed by the agent")
	row("Attempts recovered", s.recoveries, "not completed by CompleteBy: sent back to Pending by the supervisor")
	row("Messages re-sent", s.resent, fmt.Sprintf("ready steps not claimed in time (no failure); %d waits held for a backlog", s.held))
	row("Remote effects", s.effects, fmt.Sprintf("%d of them undo actions; %d applied twice", s.undone, s.twice))
	row("Latency p50 / p95", fmt.Sprintf("%.2fs", s.p50.Seconds()), fmt.Sprintf("/ %.2fs (submission to end state)", s.p95.Seconds()))
}

func lostNote(n int) string {
	if n == 0 {
		return "none lost: every accepted order reached an end state"
	}
	return "ORDERS LOST"
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func waitFor(ctx context.Context, limit time.Duration, cond func() bool) {
	deadline := time.Now().Add(limit)
	for !cond() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func printInvocations(out io.Writer, stack *localrun.Stack) {
	stats := stack.Stats.Snapshot()
	names := slices.Sorted(maps.Keys(stats))
	fmt.Fprintf(out, "\n  %-18s %11s %9s %14s\n", "function", "invocations", "messages", "avg duration")
	for _, n := range names {
		s := stats[n]
		fmt.Fprintf(out, "  %-18s %11d %9d %13.0fms\n", n, s.Invocations, s.Messages,
			float64(s.HandlerTime.Milliseconds())/float64(max(s.Invocations, 1)))
	}
}
