package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	deploy "github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/workflow"
)

// printShow prints the workflow: its deadlines, a table of its steps each
// followed by its undo action, the undo chain, and its agents.
func printShow(out io.Writer, d workflow.Definition) {
	fmt.Fprintf(out, "workflow %s v%s (%s)\n", d.Name, d.Version, d.File)
	fmt.Fprintf(out, "deadline %s (as long again for its undo actions), pickup timeout %s\n\n",
		deploy.ShortDuration(d.Deadline), deploy.ShortDuration(d.PickupTimeout))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tKIND\tNAME\tAGENT\tACTION\tTIMEOUT\tMAX FAILURES\tRETRY BACKOFF")
	for i, s := range d.Steps {
		n := strconv.Itoa(i + 1)
		if s.Kind() != workflow.KindAgent {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t%s\t%s\t-\t-\n", n, stepKind(s), s.Name, parkedAction(s), parkedTimeout(s))
			continue
		}
		printAction(tw, n, stepKind(s), &s.Action)
		printAction(tw, "", "undo", s.Undo)
	}
	tw.Flush()
	if !d.Linear() {
		fmt.Fprintf(out, "\n%s\n", levelsText(d))
	}
	fmt.Fprintf(out, "\n%s\n\n", undoChain(d))
	printAgents(out, d)
	if vars := d.Vars(); len(vars) > 0 {
		fmt.Fprintf(out, "\nneeds at deploy: %s\n", strings.Join(vars, ", "))
	}
}

// stepKind is what a step does, in a word: step (calls its agent), async
// (calls its agent, whose service answers later), wait (for an event) or
// timer.
func stepKind(s workflow.Step) string {
	switch s.Kind() {
	case workflow.KindEvent:
		return "wait"
	case workflow.KindTimer:
		return "timer"
	}
	if s.Async {
		return "async"
	}
	return "step"
}

// parkedAction is what a wait or a timer waits for.
func parkedAction(s workflow.Step) string {
	if w := s.Wait; w != nil {
		what := "event " + w.Event
		if w.Continue {
			what += " (at the timeout, goes on)"
		}
		return what
	}
	if s.Sleep.Until != "" {
		return "until " + s.Sleep.Until
	}
	return "sleep " + deploy.ShortDuration(s.Sleep.For)
}

// parkedTimeout is how long a wait may wait ("deadline": the order's
// bounds it); a timer has none.
func parkedTimeout(s workflow.Step) string {
	switch {
	case s.Wait == nil:
		return "-"
	case s.Wait.Timeout == 0:
		return "deadline"
	}
	return deploy.ShortDuration(s.Wait.Timeout)
}

func printAction(tw io.Writer, n, kind string, a *workflow.Action) {
	if a == nil {
		fmt.Fprintf(tw, "%s\t%s\t-\n", n, kind)
		return
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", n, kind, a.Name, a.Agent, a.DoName(),
		deploy.ShortDuration(a.Timeout), a.MaxFailures, deploy.ShortDuration(a.RetryBackoff))
}

// levelsText says which steps run at once: the steps of each level start
// together once those they need are done; a forEach step runs once per item.
func levelsText(d workflow.Definition) string {
	lines := []string{"runs at once, level by level (a step starts when all it needs is done):"}
	for l, level := range d.Levels() {
		var names []string
		for _, i := range level {
			name := d.Steps[i].Name
			if f := d.Steps[i].ForEach; f != "" {
				name += " (each of " + f + ")"
			}
			if n := d.Needs(i); len(n) > 0 && l > 0 {
				var by []string
				for _, j := range n {
					by = append(by, d.Steps[j].Name)
				}
				name += " after " + strings.Join(by, "+")
			}
			names = append(names, name)
		}
		lines = append(lines, fmt.Sprintf("  %d: %s", l+1, strings.Join(names, " | ")))
	}
	return strings.Join(lines, "\n")
}

// undoChain says what runs when a step fails for good: the undo actions of
// the steps before it, in reverse order, then the order is Failed.
func undoChain(d workflow.Definition) string {
	if !d.Linear() {
		return "undo: a step that fails for good stops what is ready, awaits what runs, then undoes what completed, " +
			"the latest completion first (a step without undo that completed: CompensationFailed)"
	}
	var chain []string
	for i := len(d.Steps) - 1; i >= 0; i-- {
		if u := d.Steps[i].Undo; u != nil {
			chain = append(chain, u.Name)
		}
	}
	if len(chain) == 0 {
		return "undo chain: none (no step has an undo action): a step that fails for good fails the order"
	}
	return "undo chain (a step that fails for good undoes the steps completed before it, the latest first): " +
		strings.Join(append(chain, string(workflow.Failed)), " → ")
}

// printAgents prints the agents the steps call, in step order: how each
// reaches its service, as written (${NAME}s unresolved, never a secret).
func printAgents(out io.Writer, d workflow.Definition) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tKIND\tENDPOINT\tTIMEOUT\tTRANSIENT\tREFUSE\tAUTH")
	for _, name := range d.Agents() {
		a := d.AgentSpecs[name]
		if a.Custom {
			fmt.Fprintf(tw, "%s\tcustom\t-\t-\t-\t-\tGo code in functions/%s\n", name, name)
			continue
		}
		fmt.Fprintf(tw, "%s\thttp\t%s\t%s\t%s\t%s\t%s\n", name, a.Endpoint, deploy.ShortDuration(a.Timeout), transientText(a.Transient),
			refuseText(a), authText(a.Auth))
	}
	tw.Flush()
}

func transientText(codes []int) string {
	if codes == nil {
		return "408,429,5xx (default)"
	}
	s := make([]string, len(codes))
	for i, c := range codes {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// refuseText says which statuses refuse a step for good beyond the ones
// neither 2xx nor transient: with credentials, 401 and 403 are taken as a
// refusal of the credentials unless listed.
func refuseText(a workflow.Agent) string {
	switch {
	case len(a.Refuse) > 0:
		return strings.Trim(strings.Join(strings.Fields(fmt.Sprint(a.Refuse)), ","), "[]")
	case a.Auth != nil:
		return "other 4xx (401,403: credentials)"
	}
	return "other 4xx"
}

// authText says how an agent authenticates: where its secret comes from,
// never the secret.
func authText(a *workflow.Auth) string {
	switch {
	case a == nil:
		return "none"
	case a.SigV4 != nil:
		s := fmt.Sprintf("sigv4 %s in %s", a.SigV4.Service, a.SigV4.Region)
		if a.SigV4.Resource != "" {
			s += ", resource " + a.SigV4.Resource
		}
		return s
	}
	from := "secret " + a.Secret
	if a.Parameter != "" {
		from = "parameter " + a.Parameter
	}
	header := a.Header
	if a.Prefix != "" {
		header += fmt.Sprintf(" (%q + value)", a.Prefix)
	}
	return fmt.Sprintf("header %s from %s", header, from)
}
