package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

func watchCmd() *cobra.Command {
	var (
		r         refreshing
		untilIdle bool
	)
	cmd := refreshCmd(&cobra.Command{
		Use:   "watch",
		Short: "live counts of orders by state, steps at work and queue depths",
		Long: `watch prints, every --every, the orders by state, the steps waiting for a claim (and the longest
wait), running and parked (waiting for an event or a time), each work queue's depth, and each agent
whose calls are held (paused, slowed down by its service, queueing for its rate limit) or that has
keys in use (perKey: how many, and how many calls wait in their lines). It scans the state table at
each refresh. On a terminal it redraws one line.`,
		Example: "  sasctl watch\n  sasctl watch --once -o json",
	}, &r, time.Second, "print one snapshot and exit", func(cmd *cobra.Command, op *operator.Operator) error {
		return r.watch(cmd.Context(), op, cmd.OutOrStdout(), func(s snapshot) bool {
			return r.once || (untilIdle && s.InFlight == 0)
		})
	})
	cmd.Flags().BoolVar(&untilIdle, "until-idle", false, "exit when no order is in flight")
	return cmd
}

// watch prints a snapshot every period until done says so or ctx ends.
func (r *refreshing) watch(ctx context.Context, op *operator.Operator, out io.Writer, done func(snapshot) bool) error {
	tty := isTerminal(out) && r.t.output == "text"
	defer func() {
		if tty {
			fmt.Fprintln(out)
		}
	}()
	return r.loop(ctx, func() (bool, error) {
		snap, err := takeSnapshot(ctx, op)
		if err != nil {
			return false, r.t.explain(err)
		}
		return done(snap), emit(out, r.t.output, snap, func() { snap.print(out, tty) })
	})
}

// snapshot is one look at the deployment (watch's --output json).
type snapshot struct {
	At       time.Time      `json:"at"`
	Total    int            `json:"total"`
	InFlight int            `json:"inFlight"`
	ByState  map[string]int `json:"byState"`
	// Waiting are the ready steps not claimed yet, Running the claimed
	// ones, Parked the waits and timers armed; LongestWait is how long the
	// longest-waiting ready step has waited.
	Waiting     int               `json:"waitingSteps"`
	Running     int               `json:"runningSteps"`
	Parked      int               `json:"parkedSteps"`
	LongestWait operator.Duration `json:"longestWait"`
	Queues      map[string]int    `json:"queueDepths"` // messages waiting, by work queue
	// Agents are those whose calls are held (paused, slowed down by their
	// service, or queueing for their rate limit) or that have keys in use
	// (perKey).
	Agents []operator.AgentFlow `json:"agents,omitempty"`
}

func takeSnapshot(ctx context.Context, op *operator.Operator) (snapshot, error) {
	c, err := op.Store.Census(ctx, time.Now())
	if err != nil {
		return snapshot{}, err
	}
	s := snapshot{At: time.Now().UTC(), ByState: map[string]int{}, Waiting: c.Waiting, Running: c.Running, Parked: c.Parked,
		LongestWait: operator.Duration(c.LongestWait.Round(100 * time.Millisecond))}
	for st, n := range c.ByState {
		s.ByState[string(st)] = n
		s.Total += n
		if !st.Ended() {
			s.InFlight += n
		}
	}
	if s.Queues, err = op.QueueDepths(ctx); err != nil {
		return s, err
	}
	for _, a := range op.Topology.Agents {
		f, err := op.AgentFlow(ctx, a)
		if err != nil {
			return s, err
		}
		if f.Paused || f.SlowUntil.After(s.At) || f.BookedUntil.After(s.At) || f.KeysInUse > 0 {
			s.Agents = append(s.Agents, f)
		}
	}
	return s, nil
}

// print prints the snapshot as a line: redrawn on a terminal.
func (s snapshot) print(out io.Writer, tty bool) {
	if tty {
		fmt.Fprint(out, "\r\033[K"+s.line())
		return
	}
	fmt.Fprintln(out, s.line())
}

func (s snapshot) line() string {
	const width = 30
	filled := 0
	if s.Total > 0 {
		filled = width * (s.Total - s.InFlight) / s.Total
	}
	var parts []string
	for _, st := range taskStates {
		parts = append(parts, fmt.Sprintf("%s %d", st, s.ByState[string(st)]))
	}
	for _, k := range slices.Sorted(maps.Keys(s.ByState)) {
		if !slices.Contains(taskStates, workflow.State(k)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, s.ByState[k]))
		}
	}
	line := fmt.Sprintf("[%s%s] %d orders, %d in flight | %s | steps: %d waiting for a claim (longest %s), %d running, %d parked",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), s.Total, s.InFlight, strings.Join(parts, ", "),
		s.Waiting, s.LongestWait, s.Running, s.Parked)
	var queued []string
	for _, q := range slices.Sorted(maps.Keys(s.Queues)) {
		if s.Queues[q] > 0 {
			queued = append(queued, fmt.Sprintf("%s %d", q, s.Queues[q]))
		}
	}
	if len(queued) > 0 {
		line += " | queued: " + strings.Join(queued, ", ")
	}
	for _, f := range s.Agents {
		for _, part := range agentParts(f, s.At) {
			line += " | " + part
		}
	}
	return line
}

// agentParts say what holds f's calls at at, if anything, and how many of
// its keys are in use, if any.
func agentParts(f operator.AgentFlow, at time.Time) []string {
	var parts []string
	switch {
	case f.Paused:
		parts = append(parts, fmt.Sprintf("agent %s paused", f.Agent))
	case f.SlowUntil.After(at):
		parts = append(parts, fmt.Sprintf("agent %s slowed down by its service for %s", f.Agent, f.SlowUntil.Sub(at).Round(time.Second)))
	case f.BookedUntil.After(at):
		parts = append(parts, fmt.Sprintf("agent %s's rate limit %s booked %s ahead", f.Agent, f.RateLimit, f.BookedUntil.Sub(at).Round(100*time.Millisecond)))
	}
	if f.KeysInUse > 0 {
		parts = append(parts, keysPart(f))
	}
	return parts
}

// keysPart is f's keys in use: "agent ocr: 3 keys in use, 7 calls waiting
// in line (longest 12s)".
func keysPart(f operator.AgentFlow) string {
	part := fmt.Sprintf("agent %s: %d key%s in use, ", f.Agent, f.KeysInUse, plural(f.KeysInUse))
	if f.KeyWaiters == 0 {
		return part + "no call waiting in line"
	}
	return part + fmt.Sprintf("%d call%s waiting in line (longest %s)", f.KeyWaiters, plural(f.KeyWaiters), f.LongestKeyWait)
}
