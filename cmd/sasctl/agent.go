package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/operator"
)

func agentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "pause, resume or show an agent's calls to its service",
		Long: `agent pauses an agent's calls to its service (for a provider's planned maintenance), resumes
them, or shows its flow control. While it is paused its requests wait, sent again every 30 s: no
order fails, no failure is counted, the Supervisor does not count the wait against anything. A
resume reaches every instance within about a second.`,
	}
	var t target
	run := func(use, short string, do func(cmd *cobra.Command, op *operator.Operator, agent string) (operator.AgentFlow, error)) *cobra.Command {
		c := &cobra.Command{
			Use: use + " AGENT", Short: short, Args: exactly(1, "one AGENT name"),
			Example: "  sasctl agent " + use + " payment",
			RunE: func(cmd *cobra.Command, args []string) error {
				op, err := t.connect(cmd.Context(), true) // its agents, found from its queues
				if err != nil {
					return err
				}
				f, err := do(cmd, op, args[0])
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				return emit(out, t.output, f, func() { printAgentFlow(out, use, f) })
			},
		}
		targetFlags(c, &t, true)
		return c
	}
	cmd.AddCommand(
		run("pause", "pause the agent's calls: its orders wait, none fails", func(cmd *cobra.Command, op *operator.Operator, a string) (operator.AgentFlow, error) {
			return op.PauseAgent(cmd.Context(), a, operatorName())
		}),
		run("resume", "let a paused agent's calls go on", func(cmd *cobra.Command, op *operator.Operator, a string) (operator.AgentFlow, error) {
			return op.ResumeAgent(cmd.Context(), a)
		}),
		run("show", "show whether the agent is paused or slowed down by its service, and its keys in use", func(cmd *cobra.Command, op *operator.Operator, a string) (operator.AgentFlow, error) {
			return op.AgentFlow(cmd.Context(), a)
		}))
	return cmd
}

// printAgentFlow says what an agent command did, and where the agent stands.
func printAgentFlow(out io.Writer, verb string, f operator.AgentFlow) {
	switch {
	case verb == "pause" && !f.Changed:
		fmt.Fprintf(out, "agent %s was paused already (by %s since %s)\n", f.Agent, f.PausedBy, f.PausedAt.Format(time.RFC3339))
	case verb == "pause":
		fmt.Fprintf(out, "agent %s paused: its calls wait until sasctl agent resume %s\n", f.Agent, f.Agent)
	case verb == "resume" && !f.Changed:
		fmt.Fprintf(out, "agent %s was not paused\n", f.Agent)
	case verb == "resume":
		fmt.Fprintf(out, "agent %s resumed: its waiting calls go on within 30 s\n", f.Agent)
	case f.Paused:
		fmt.Fprintf(out, "agent %s: paused by %s since %s\n", f.Agent, f.PausedBy, f.PausedAt.Format(time.RFC3339))
	default:
		fmt.Fprintf(out, "agent %s: running\n", f.Agent)
	}
	if f.SlowUntil.After(time.Now()) {
		fmt.Fprintf(out, "its service asked for no calls before %s (Retry-After)\n", f.SlowUntil.Format(time.RFC3339))
	}
	if f.KeysInUse > 0 {
		fmt.Fprintln(out, keysPart(f)+" (--output json lists them)")
	}
}
