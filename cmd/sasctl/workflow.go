package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	deploy "github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// sasctl workflow checks and shows workflow files without deploying them.
// Validation is shared/workflow's own (LoadFiles, LoadFile): the same the
// synth and every function's cold start run.

const workflowUsage = `usage: sasctl workflow <subcommand> [flags]

subcommands:
  validate FILE...          check workflow files as a deployment loads them: every
                            problem with its file:line and field; exit 1 if any
  show FILE [--mermaid]     the steps, undo actions, deadlines and agents of a file;
                            --mermaid prints a Mermaid flowchart instead

sasctl workflow <subcommand> -h lists its flags.
`

// workflowCmd dispatches sasctl workflow's subcommands.
func workflowCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, workflowUsage)
		return 2
	}
	switch args[0] {
	case "validate":
		return workflowValidate(args[1:], stdout, stderr)
	case "show":
		return workflowShow(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, workflowUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "sasctl workflow: unknown subcommand %q\n%s", args[0], workflowUsage)
		return 2
	}
}

// wfFlags are the flags of sasctl workflow's subcommands.
type wfFlags struct {
	output    string
	fnTimeout time.Duration
	mermaid   bool
}

// options are the load options a deployment with these flags would use.
func (f wfFlags) options() workflow.Options {
	return workflow.Options{MaxStepTimeout: f.fnTimeout - deploy.StepTimeoutMargin}
}

// newWorkflowFlags returns a subcommand's flag set with its flags on it.
func newWorkflowFlags(name, synopsis string, stderr io.Writer, f *wfFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("sasctl workflow "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.output, "output", "text", "text or json")
	fs.DurationVar(&f.fnTimeout, "function-timeout", topology.Default("").FunctionTimeout,
		fmt.Sprintf("the agent functions' timeout ($%s); a step's timeout may be at most this less %s",
			deploy.EnvFunctionTimeout, deploy.StepTimeoutMargin))
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: sasctl workflow %s [flags]\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseWorkflowFlags parses flags written before, between or after the
// file arguments, and returns the files; code >= 0 when the command must
// stop with it.
func parseWorkflowFlags(fs *flag.FlagSet, args []string, f *wfFlags, stderr io.Writer) (files []string, code int) {
	if v := os.Getenv(deploy.EnvFunctionTimeout); v != "" {
		if err := fs.Set("function-timeout", v); err != nil {
			fmt.Fprintf(stderr, "%s: $%s=%q: %v\n", fs.Name(), deploy.EnvFunctionTimeout, v, err)
			return nil, 2
		}
	}
	files, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, 0
	}
	if err != nil {
		return nil, 2
	}
	if f.output != "text" && f.output != "json" {
		fmt.Fprintf(stderr, "%s: --output must be text or json, not %q\n", fs.Name(), f.output)
		return nil, 2
	}
	if f.fnTimeout <= deploy.StepTimeoutMargin {
		fmt.Fprintf(stderr, "%s: --function-timeout must be longer than %s\n", fs.Name(), deploy.StepTimeoutMargin)
		return nil, 2
	}
	return files, -1
}

// parseInterspersed parses args whose flags may follow the positional
// arguments (show FILE --mermaid); after "--" everything is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// workflowValidate is sasctl workflow validate FILE...
func workflowValidate(args []string, stdout, stderr io.Writer) int {
	var f wfFlags
	fs := newWorkflowFlags("validate", "validate FILE...", stderr, &f)
	files, code := parseWorkflowFlags(fs, args, &f, stderr)
	if code >= 0 {
		return code
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "sasctl workflow validate: need at least one workflow FILE")
		fs.Usage()
		return 2
	}
	set, err := workflow.LoadFiles(files, f.options())
	ps := workflow.AsProblems(err)
	if err != nil && ps == nil {
		fmt.Fprintf(stderr, "sasctl workflow validate: %v\n", err)
		return 1
	}
	report := newValidateReport(set, ps)
	emitAs(stdout, f.output, report, func() { printValidate(stdout, stderr, report) })
	if len(ps) > 0 {
		return 1
	}
	return 0
}

// validateReport is what sasctl workflow validate found.
type validateReport struct {
	Valid     bool          `json:"valid"`
	Workflows []wfSummary   `json:"workflows"`
	Needs     []string      `json:"needs"`
	Problems  []problemView `json:"problems"`
}

// wfSummary is one valid file's workflow.
type wfSummary struct {
	File        string   `json:"file"`
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	Steps       int      `json:"steps"`
	UndoActions int      `json:"undoActions"`
	Agents      []string `json:"agents"`
	Needs       []string `json:"needs"`
}

// problemView is a workflow.Problem as JSON.
type problemView struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Field   string `json:"field,omitempty"`
	Problem string `json:"problem"`
}

func newValidateReport(set workflow.Set, ps workflow.Problems) validateReport {
	r := validateReport{Valid: len(ps) == 0, Workflows: []wfSummary{}, Needs: []string{}, Problems: []problemView{}}
	for _, p := range ps {
		r.Problems = append(r.Problems, problemView{File: p.File, Line: p.Line, Field: p.Field, Problem: p.What})
	}
	if set.IsZero() {
		return r
	}
	for _, d := range set.Definitions() {
		r.Workflows = append(r.Workflows, wfSummary{File: d.File, Name: d.Name, Version: d.Version,
			Steps: len(d.Steps), UndoActions: undoCount(d), Agents: d.Agents(), Needs: orEmpty(d.Vars())})
	}
	r.Needs = orEmpty(set.Vars())
	return r
}

func undoCount(d workflow.Definition) int {
	n := 0
	for _, s := range d.Steps {
		if s.Undo != nil {
			n++
		}
	}
	return n
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// printValidate prints the problems on stderr, one a line, or each file's
// workflow and the ${NAME}s it needs.
func printValidate(stdout, stderr io.Writer, r validateReport) {
	if !r.Valid {
		for _, p := range r.Problems {
			fmt.Fprintln(stderr, workflow.Problem{File: p.File, Line: p.Line, Field: p.Field, What: p.Problem})
		}
		fmt.Fprintf(stderr, "sasctl workflow validate: %d problem%s\n", len(r.Problems), pluralS(len(r.Problems)))
		return
	}
	for _, w := range r.Workflows {
		fmt.Fprintf(stdout, "%s: workflow %s v%s, %d step%s (%d with an undo action), agents %s\n", w.File, w.Name,
			w.Version, w.Steps, pluralS(w.Steps), w.UndoActions, strings.Join(w.Agents, ", "))
		if len(w.Needs) > 0 {
			fmt.Fprintf(stdout, "  needs at deploy: %s\n", strings.Join(w.Needs, ", "))
		}
	}
	if len(r.Workflows) > 1 {
		fmt.Fprintf(stdout, "%d workflows valid together; the default (an order naming none) is %s\n",
			len(r.Workflows), r.Workflows[0].Name)
	}
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// emitAs writes v as JSON, or calls text.
func emitAs(out io.Writer, output string, v any, text func()) {
	emit(out, &globals{output: output}, v, text)
}

// workflowShow is sasctl workflow show FILE [--mermaid].
func workflowShow(args []string, stdout, stderr io.Writer) int {
	var f wfFlags
	fs := newWorkflowFlags("show", "show FILE [--mermaid]", stderr, &f)
	fs.BoolVar(&f.mermaid, "mermaid", false, "print a Mermaid flowchart of the steps and the undo chain")
	files, code := parseWorkflowFlags(fs, args, &f, stderr)
	if code >= 0 {
		return code
	}
	if len(files) != 1 {
		fmt.Fprintln(stderr, "sasctl workflow show: need exactly one workflow FILE")
		fs.Usage()
		return 2
	}
	if f.mermaid && f.output == "json" {
		fmt.Fprintln(stderr, "sasctl workflow show: --mermaid prints a flowchart, not JSON: drop --output json")
		return 2
	}
	d, err := workflow.LoadFile(files[0], f.options())
	if err != nil {
		return showFailed(stderr, files[0], err)
	}
	if f.mermaid {
		printMermaid(stdout, d)
		return 0
	}
	emitAs(stdout, f.output, newShowView(d), func() { printShow(stdout, d) })
	return 0
}

// showFailed prints why a file cannot be shown: its problems, one a line,
// or why it cannot be read.
func showFailed(stderr io.Writer, file string, err error) int {
	if ps := workflow.AsProblems(err); ps != nil {
		fmt.Fprintln(stderr, ps.Error())
		err = fmt.Errorf("%s is not valid: %d problem%s", file, len(ps), pluralS(len(ps)))
	}
	fmt.Fprintf(stderr, "sasctl workflow show: %v\n", err)
	return 1
}

// printShow prints the workflow: its deadlines, a table of its steps each
// followed by its undo action, the undo chain, and its agents.
func printShow(out io.Writer, d workflow.Definition) {
	fmt.Fprintf(out, "workflow %s v%s (%s)\n", d.Name, d.Version, d.File)
	fmt.Fprintf(out, "deadline %s (as long again for its undo actions), pickup timeout %s\n\n",
		deploy.ShortDuration(d.Deadline), deploy.ShortDuration(d.PickupTimeout))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tKIND\tNAME\tAGENT\tACTION\tTIMEOUT\tMAX FAILURES\tRETRY BACKOFF")
	for i, s := range d.Steps {
		printAction(tw, strconv.Itoa(i+1), "step", &s.Action)
		printAction(tw, "", "undo", s.Undo)
	}
	tw.Flush()
	fmt.Fprintf(out, "\n%s\n\n", undoChain(d))
	printAgents(out, d)
	if vars := d.Vars(); len(vars) > 0 {
		fmt.Fprintf(out, "\nneeds at deploy: %s\n", strings.Join(vars, ", "))
	}
}

func printAction(tw io.Writer, n, kind string, a *workflow.Action) {
	if a == nil {
		fmt.Fprintf(tw, "%s\t%s\t-\n", n, kind)
		return
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", n, kind, a.Name, a.Agent, a.DoName(),
		deploy.ShortDuration(a.Timeout), a.MaxFailures, deploy.ShortDuration(a.RetryBackoff))
}

// undoChain says what runs when a step fails for good: the undo actions of
// the steps before it, in reverse order, then the order is Failed.
func undoChain(d workflow.Definition) string {
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
	fmt.Fprintln(tw, "AGENT\tKIND\tENDPOINT\tTIMEOUT\tTRANSIENT\tAUTH")
	for _, name := range d.Agents() {
		a := d.AgentSpecs[name]
		if a.Custom {
			fmt.Fprintf(tw, "%s\tcustom\t-\t-\t-\tGo code in functions/%s\n", name, name)
			continue
		}
		fmt.Fprintf(tw, "%s\thttp\t%s\t%s\t%s\t%s\n", name, a.Endpoint, deploy.ShortDuration(a.Timeout), transientText(a.Transient), authText(a.Auth))
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

// printMermaid prints a flowchart: the steps left to right, the last to
// Processed; each step's undo action on a dashed edge; the undo chain in
// reverse order, ending in Failed.
func printMermaid(out io.Writer, d workflow.Definition) {
	fmt.Fprintln(out, "flowchart LR")
	for i, s := range d.Steps {
		fmt.Fprintf(out, "  s%d[%s]\n", i+1, mermaidLabel(s.Action))
		if s.Undo != nil {
			fmt.Fprintf(out, "  u%d[%s]\n", i+1, mermaidLabel(*s.Undo))
		}
	}
	fmt.Fprintf(out, "  processed([\"%s\"])\n", workflow.Processed)
	for i := 1; i < len(d.Steps); i++ {
		fmt.Fprintf(out, "  s%d --> s%d\n", i, i+1)
	}
	fmt.Fprintf(out, "  s%d --> processed\n", len(d.Steps))
	printMermaidUndo(out, d)
}

// printMermaidUndo draws each undo action on a dashed edge from its step,
// then the undo chain from the last undo action back to the first, to Failed.
func printMermaidUndo(out io.Writer, d workflow.Definition) {
	var chain []string
	for i, s := range d.Steps {
		if s.Undo != nil {
			fmt.Fprintf(out, "  s%d -. undo .-> u%d\n", i+1, i+1)
			chain = append([]string{fmt.Sprintf("u%d", i+1)}, chain...)
		}
	}
	if len(chain) == 0 {
		return
	}
	fmt.Fprintf(out, "  failed([\"%s\"])\n", workflow.Failed)
	for i, id := range chain {
		next := "failed"
		if i+1 < len(chain) {
			next = chain[i+1]
		}
		fmt.Fprintf(out, "  %s --> %s\n", id, next)
	}
}

// mermaidLabel is an action's node label: its name, agent and, if it asks
// for another, the action its agent asks its service for.
func mermaidLabel(a workflow.Action) string {
	label := a.Name + "<br/>" + a.Agent
	if a.DoName() != a.Name {
		label += ": " + a.DoName()
	}
	return `"` + strings.ReplaceAll(label, `"`, "#quot;") + `"`
}

// showView is a workflow as sasctl workflow show --output json prints it.
type showView struct {
	File          string       `json:"file"`
	Name          string       `json:"name"`
	Version       string       `json:"version"`
	Deadline      string       `json:"deadline"`
	PickupTimeout string       `json:"pickupTimeout"`
	Steps         []actionView `json:"steps"`
	Agents        []agentView  `json:"agents"`
	Needs         []string     `json:"needs"`
}

// actionView is a step or undo action.
type actionView struct {
	Name         string      `json:"name"`
	Agent        string      `json:"agent"`
	Action       string      `json:"action"`
	Timeout      string      `json:"timeout"`
	MaxFailures  int         `json:"maxFailures"`
	RetryBackoff string      `json:"retryBackoff"`
	Undo         *actionView `json:"undo,omitempty"`
}

// agentView is an agent as declared: ${NAME}s unresolved, no secret.
type agentView struct {
	Name      string    `json:"name"`
	Custom    bool      `json:"custom,omitempty"`
	Endpoint  string    `json:"endpoint,omitempty"`
	Timeout   string    `json:"timeout,omitempty"`
	Transient []int     `json:"transient,omitempty"`
	Auth      *authView `json:"auth,omitempty"`
}

// authView is an agent's auth as declared: where its secret is, not the
// secret.
type authView struct {
	Header    string     `json:"header,omitempty"`
	Prefix    string     `json:"prefix,omitempty"`
	Secret    string     `json:"secret,omitempty"`
	Parameter string     `json:"parameter,omitempty"`
	SigV4     *sigV4View `json:"sigv4,omitempty"`
}

// sigV4View is how an agent signs its requests.
type sigV4View struct {
	Service  string `json:"service"`
	Region   string `json:"region"`
	Resource string `json:"resource,omitempty"`
}

func newShowView(d workflow.Definition) showView {
	v := showView{File: d.File, Name: d.Name, Version: d.Version, Deadline: deploy.ShortDuration(d.Deadline),
		PickupTimeout: deploy.ShortDuration(d.PickupTimeout), Needs: orEmpty(d.Vars())}
	for _, s := range d.Steps {
		st := newActionView(s.Action)
		if s.Undo != nil {
			u := newActionView(*s.Undo)
			st.Undo = &u
		}
		v.Steps = append(v.Steps, st)
	}
	for _, name := range d.Agents() {
		a := d.AgentSpecs[name]
		av := agentView{Name: name, Custom: a.Custom, Endpoint: a.Endpoint, Transient: a.Transient}
		if a.Auth != nil {
			av.Auth = newAuthView(*a.Auth)
		}
		if !a.Custom {
			av.Timeout = deploy.ShortDuration(a.Timeout)
		}
		v.Agents = append(v.Agents, av)
	}
	return v
}

func newActionView(a workflow.Action) actionView {
	return actionView{Name: a.Name, Agent: a.Agent, Action: a.DoName(), Timeout: deploy.ShortDuration(a.Timeout),
		MaxFailures: a.MaxFailures, RetryBackoff: deploy.ShortDuration(a.RetryBackoff)}
}

func newAuthView(a workflow.Auth) *authView {
	v := &authView{Header: a.Header, Prefix: a.Prefix, Secret: a.Secret, Parameter: a.Parameter}
	if a.SigV4 != nil {
		v.SigV4 = &sigV4View{Service: a.SigV4.Service, Region: a.SigV4.Region, Resource: a.SigV4.Resource}
	}
	return v
}
