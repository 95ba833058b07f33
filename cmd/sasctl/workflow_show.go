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

// printShow prints the workflow: its deadlines, its orders' id field if it
// names one, a table of its steps each
// followed by its undo action, what the table leaves out of a step (its
// input, its hold on failure, the senders its wait takes), what the engine
// undoes if each step is refused, and its agents with their flow control.
func printShow(out io.Writer, d workflow.Definition) {
	fmt.Fprintf(out, "workflow %s v%s (%s)\n", d.Name, d.Version, d.File)
	fmt.Fprintf(out, "deadline %s (as long again for its undo actions), pickup timeout %s\n",
		deploy.ShortDuration(d.Deadline), deploy.ShortDuration(d.PickupTimeout))
	if d.IDField != "" {
		fmt.Fprintf(out, "an order's id: its %s\n", d.IDField)
	}
	fmt.Fprintln(out)
	printSteps(out, d)
	if details := stepDetails(d); len(details) > 0 {
		fmt.Fprintf(out, "\n%s\n", strings.Join(details, "\n"))
	}
	if !d.Linear() {
		fmt.Fprintf(out, "\n%s\n", levelsText(d))
	}
	fmt.Fprintf(out, "\n%s\n\n", undoText(d))
	printAgents(out, d)
	if limits := flowLimits(d); len(limits) > 0 {
		fmt.Fprintf(out, "\n%s\n", strings.Join(limits, "\n"))
	}
	if vars := d.Vars(); len(vars) > 0 {
		fmt.Fprintf(out, "\nneeds at deploy: %s\n", strings.Join(vars, ", "))
	}
}

// printSteps prints the table of steps, each followed by its undo action.
func printSteps(out io.Writer, d workflow.Definition) {
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tKIND\tNAME\tAGENT\tACTION\tTIMEOUT\tMAX FAILURES\tRETRY BACKOFF")
	for i, s := range d.Steps {
		n := strconv.Itoa(i + 1)
		if s.Kind() != workflow.KindAgent {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t%s\t%s\t-\t-\n", n, stepKind(s), s.Name, parkedAction(s), parkedTimeout(s))
			continue
		}
		printAction(tw, n, stepKind(s), &s.Action)
		switch {
		case s.NoUndo:
			fmt.Fprintf(tw, "\tundo\tnone (nothing to undo)\t\t\t\t\t\n")
		case s.Undo == nil:
			fmt.Fprintf(tw, "\tundo\t- (a pivot: the order cannot be undone past it once it ran)\t\t\t\t\t\n")
		default:
			printAction(tw, "", "undo", s.Undo)
		}
	}
	tw.Flush()
	for _, line := range strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n") {
		fmt.Fprintln(out, strings.TrimRight(line, " ")) // an undo-less row's empty cells
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
		fmt.Fprintf(tw, "%s\t%s\t-\t\t\t\t\t\n", n, kind) // every cell, or the columns below lose their alignment
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

// stepDetails are what the table of steps leaves out, a line each: a
// step's input, its hold on failure, and the senders a wait takes its event
// from.
func stepDetails(d workflow.Definition) []string {
	var out []string
	for _, s := range d.Steps {
		if s.Input != "" {
			out = append(out, fmt.Sprintf("%s: input %s", s.Name, oneLine(s.Input)))
		}
		if s.Undo != nil && s.Undo.Input != "" {
			out = append(out, fmt.Sprintf("%s: input %s", s.Undo.Name, oneLine(s.Undo.Input)))
		}
		if s.HoldFor > 0 {
			out = append(out, fmt.Sprintf("%s: onFailure hold: its failure holds the order for the operator, %s at most, then undoes it",
				s.Name, deploy.ShortDuration(s.HoldFor)))
		}
		if s.Wait != nil && len(s.Wait.Senders) > 0 {
			out = append(out, fmt.Sprintf("%s: takes event %s only from senders %s", s.Name, s.Wait.Event, strings.Join(s.Wait.Senders, ", ")))
		}
	}
	return out
}

// undoText says, for each step that calls an agent, what the engine undoes
// if its service refuses it for good (the steps started before it done),
// and how the order ends: workflow.Definition.UndoPlans, the engine's own
// rules run on a simulated order.
func undoText(d workflow.Definition) string {
	plans := d.UndoPlans()
	if len(plans) == 0 {
		return "undo: no step calls an agent, so none is refused and nothing is undone"
	}
	lines := []string{"undo, as the engine runs it if a step's service refuses it for good " +
		"(the steps started before it done; the latest completion is undone first):"}
	for _, p := range plans {
		lines = append(lines, fmt.Sprintf("  %s refused → %s", d.Steps[p.Step].Name, planText(d, p)))
	}
	return strings.Join(lines, "\n")
}

// planText is a plan on a line: the undo actions in the order they run,
// then how the order ends, and why when it ends CompensationFailed.
func planText(d workflow.Definition, p workflow.UndoPlan) string {
	steps := make([]string, 0, len(p.Undo)+1)
	for _, u := range p.Undo {
		steps = append(steps, d.UndoName(u))
	}
	end := string(p.End)
	switch {
	case p.Pivot != nil:
		end += fmt.Sprintf(" (%s has run and has no undo: the operator decides)", d.Steps[p.Pivot.Index].Name)
	case len(p.Undo) == 0 && p.End == workflow.Failed:
		end += " (nothing to undo)"
	}
	text := strings.Join(append(steps, end), " → ")
	if p.Held {
		return fmt.Sprintf("Held for the operator (%s at most); if undone: %s", deploy.ShortDuration(p.HoldFor), text)
	}
	return text
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

// flowLimits are what bounds each agent's calls beyond its timeout, a line
// each: its rate limit (and burst), its calls in flight per key, and its
// function's instances at once.
func flowLimits(d workflow.Definition) []string {
	var out []string
	for _, name := range d.Agents() {
		a := d.AgentSpecs[name]
		var limits []string
		if a.RateLimit.Calls > 0 {
			limits = append(limits, fmt.Sprintf("rateLimit %s (%s, as admitted)", a.RateLimit, a.RateLimit.Meaning()))
		}
		if k := a.PerKey; k != nil {
			limits = append(limits, fmt.Sprintf("perKey: %d in flight per %s", k.InFlight, oneLine(k.Key)))
		}
		if a.Concurrency > 0 {
			limits = append(limits, fmt.Sprintf("concurrency %d instances", a.Concurrency))
		}
		if len(limits) > 0 {
			out = append(out, fmt.Sprintf("%s: %s", name, strings.Join(limits, "; ")))
		}
	}
	return out
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
