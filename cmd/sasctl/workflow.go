package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// sasctl workflow checks and shows workflow files without deploying them.
// Validation is shared/workflow's own (LoadFiles, LoadFile): the same the
// synth and every function's cold start run.

func workflowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "validate workflow files as a deployment loads them, or show one's steps",
		Long: `workflow checks and shows workflow files, with the checks the synth and every function's cold
start run; it needs no deployment.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return usageErrorf("name a subcommand: validate, show, versions")
		},
	}
	cmd.AddCommand(workflowValidateCmd(), workflowShowCmd(), workflowVersionsCmd())
	return cmd
}

// wfFlags are the flags of sasctl workflow's subcommands.
type wfFlags struct {
	settingFlags
	output  output
	mermaid bool
	from    string // validate --from: an earlier version's file, whose orders would move
}

// register puts the flags on cmd.
func (f *wfFlags) register(cmd *cobra.Command) {
	f.Settings = deployment.DefaultSettings()
	outputFlag(cmd, &f.output)
	f.bind(cmd.Flags(), "functionTimeout")
	cmd.PreRunE = f.check
}

// options are the load options a deployment with these flags would use.
func (f wfFlags) options() workflow.Options {
	return workflow.Options{MaxStepTimeout: f.MaxStepTimeout()}
}

func workflowValidateCmd() *cobra.Command {
	var f wfFlags
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "check workflow files as a deployment loads them: every problem, with its file:line and field",
		Long: `validate checks workflow files together, as a deployment loads them: every problem of every file at
once, each with its file:line and field (exit 1 if any), or each workflow's summary and the ${NAME}s
a deploy must set. Warnings (a path into the order a file with no schema reads, unchecked) are
printed too, on stderr, and leave the exit code 0.`,
		Example: "  sasctl workflow validate shop.yaml returns.yaml",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("need at least one workflow FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, files []string) error {
			set, warnings, err := workflow.ValidateFiles(files, f.options())
			ps := workflow.AsProblems(err)
			if err != nil && ps == nil {
				return err
			}
			report := newValidateReport(set, ps, warnings)
			if f.from != "" && len(ps) == 0 {
				if report.Moves, ps, err = moveKinds(f.from, set, f.options()); err != nil {
					return err
				}
				report.Problems, report.Valid = views(ps), len(ps) == 0
			}
			out := cmd.OutOrStdout()
			if err := emit(out, f.output, report, func() { printValidate(out, cmd.ErrOrStderr(), report) }); err != nil {
				return err
			}
			if len(ps) > 0 {
				return errReported
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&f.from, "from", "", "an earlier version's workflow FILE: say what a move (sasctl migrate) does to its orders at each step, and what they would undo")
	return cmd
}

func workflowShowCmd() *cobra.Command {
	var f wfFlags
	cmd := &cobra.Command{
		Use:   "show FILE",
		Short: "show a file's steps, waits, undo and agents, or a Mermaid flowchart",
		Long: `show prints a workflow file's deadlines, a table of its steps (agent calls, event waits, timers,
async calls) each with its undo action, and what the table leaves out (inputs, a hold on failure, a
wait's senders); then, for each step that calls an agent, what the engine undoes if its service
refuses it for good and how the order ends (the engine's own rules, run on a simulated order); then
its agents as declared (never a credential's value) with their flow control (rateLimit, rateBurst,
perKey, concurrency). --mermaid prints a Mermaid flowchart instead.`,
		Example: "  sasctl workflow show shared/workflow/examples/approval.yaml --mermaid",
		Args:    exactly(1, "one workflow FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.mermaid && f.output == "json" {
				return usageErrorf("--mermaid prints a flowchart, not JSON: drop --output json")
			}
			d, err := workflow.LoadFile(args[0], f.options())
			if err != nil {
				return showFailed(cmd.ErrOrStderr(), args[0], err)
			}
			out := cmd.OutOrStdout()
			if f.mermaid {
				printMermaid(out, d)
				return nil
			}
			return emit(out, f.output, newShowView(d), func() { printShow(out, d) })
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.mermaid, "mermaid", false, "print a Mermaid flowchart of the steps and the undo the engine runs")
	return cmd
}

// showFailed says why a file cannot be shown: its problems, one a line,
// or why it cannot be read.
func showFailed(stderr io.Writer, file string, err error) error {
	if ps := workflow.AsProblems(err); ps != nil {
		fmt.Fprintln(stderr, ps.Error())
		return fmt.Errorf("%s is not valid: %d problem%s", file, len(ps), plural(len(ps)))
	}
	return err
}

// validateReport is what sasctl workflow validate found.
type validateReport struct {
	Valid     bool          `json:"valid"`
	Workflows []wfSummary   `json:"workflows"`
	Needs     []string      `json:"needs"`
	Problems  []problemView `json:"problems"`
	// Warnings leave the files valid.
	Warnings []problemView `json:"warnings"`
	// Moves, with --from, say what a move does to the earlier version's
	// orders at each of its steps.
	Moves []moveKindView `json:"moves,omitempty"`
}

// moveKindView is what a move does to the orders at one step of the
// earlier version.
type moveKindView struct {
	From    string   `json:"from"`
	To      string   `json:"to"`
	At      string   `json:"at"`
	Moves   bool     `json:"moves"`
	Why     string   `json:"why,omitempty"`
	Version string   `json:"version,omitempty"` // the version such an order runs after (To, or one keeping an undo of From)
	Started []string `json:"started,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	Dropped []string `json:"dropped,omitempty"`
	Kept    []string `json:"kept,omitempty"` // earlier steps it keeps, done, for their undo (migrate.keep)
	Undoes  []string `json:"undoes,omitempty"`
}

// moveKinds says what moving the orders of the workflow in file from to
// its version in set does, at each step of it, and what in its plan names
// no step of the earlier version (a kept step).
func moveKinds(file string, set workflow.Set, o workflow.Options) ([]moveKindView, workflow.Problems, error) {
	from, err := workflow.LoadFile(file, o)
	if err != nil {
		return nil, nil, fmt.Errorf("--from %s: %w", file, err)
	}
	to, ok := set.Get(from.Name)
	if !ok || from.Name == "" {
		return nil, nil, usageErrorf("--from %s is workflow %q, which none of the files is", file, from.Name)
	}
	var out []moveKindView
	for _, k := range (workflow.Moving{From: from, To: to}).Kinds() {
		v := moveKindView{From: from.Version, To: to.Version, At: k.At, Moves: k.Err == nil}
		if k.Err != nil {
			v.Why = k.Err.Error()
			out = append(out, v)
			continue
		}
		def := k.Moved.Definition
		v.Version, v.Dropped, v.Kept, v.Undoes = def.Version, k.Moved.Dropped, k.Moved.Kept(), k.Undoes
		for ref, p := range k.Moved.Recs {
			if p.Skipped {
				v.Skipped = append(v.Skipped, def.Steps[ref.Index].Name)
			}
		}
		for _, r := range k.Moved.Ready {
			v.Started = append(v.Started, workflow.RecordName(def.Steps[r.Index].Name, r))
		}
		out = append(out, v)
	}
	return out, workflow.Moving{From: from, To: to}.Problems(), nil
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

func newValidateReport(set workflow.Set, ps, warnings workflow.Problems) validateReport {
	r := validateReport{Valid: len(ps) == 0, Workflows: []wfSummary{}, Needs: []string{}, Problems: views(ps),
		Warnings: views(warnings)}
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

// tally counts the problems and warnings: "2 problems, 1 warning", "1
// warning (valid)", or "" if there are none.
func (r validateReport) tally() string {
	count := func(n int, what string) string { return fmt.Sprintf("%d %s%s", n, what, plural(n)) }
	switch {
	case !r.Valid && len(r.Warnings) > 0:
		return count(len(r.Problems), "problem") + ", " + count(len(r.Warnings), "warning")
	case !r.Valid:
		return count(len(r.Problems), "problem")
	case len(r.Warnings) > 0:
		return count(len(r.Warnings), "warning") + " (valid)"
	}
	return ""
}

// views are problems as JSON (an empty list if none).
func views(ps workflow.Problems) []problemView {
	out := []problemView{}
	for _, p := range ps {
		out = append(out, problemView{File: p.File, Line: p.Line, Field: p.Field, Problem: p.What})
	}
	return out
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

// printValidate prints each valid file's workflow and the ${NAME}s it
// needs, then the problems and warnings on stderr, one a line.
func printValidate(stdout, stderr io.Writer, r validateReport) {
	if r.Valid {
		printSummaries(stdout, r)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(stderr, workflow.Problem{File: p.File, Line: p.Line, Field: p.Field, What: p.Problem})
	}
	for _, p := range r.Warnings {
		fmt.Fprintln(stderr, workflow.Problem{File: p.File, Line: p.Line, Field: p.Field, What: p.Problem, Warning: true})
	}
	if tally := r.tally(); tally != "" {
		fmt.Fprintf(stderr, "sasctl workflow validate: %s\n", tally)
	}
	printMoveKinds(stdout, r.Moves)
}

// printMoveKinds says what a move does to the orders at each step.
func printMoveKinds(out io.Writer, kinds []moveKindView) {
	if len(kinds) == 0 {
		return
	}
	fmt.Fprintf(out, "\nOrders of version %s moved to %s (sasctl migrate), by the step they are at:\n", kinds[0].From, kinds[0].To)
	for _, k := range kinds {
		if !k.Moves {
			fmt.Fprintf(out, "  at %s: cannot move: %s\n", k.At, k.Why)
			continue
		}
		parts := []string{"moves"}
		if k.Version != k.To {
			parts[0] = fmt.Sprintf("moves to %s (keeping the undo its steps ran with)", k.Version)
			if len(k.Kept) > 0 {
				parts[0] = fmt.Sprintf("moves to %s (%s with the steps it keeps for their undo)", k.Version, k.To)
			}
		}
		parts = append(parts, operator.Migrated{Started: k.Started, Skipped: k.Skipped, Dropped: k.Dropped, Kept: k.Kept, Undoes: k.Undoes}.Effects()...)
		fmt.Fprintf(out, "  at %s: %s\n", k.At, strings.Join(parts, "; "))
	}
}

// printSummaries prints each file's workflow and the ${NAME}s it needs.
func printSummaries(stdout io.Writer, r validateReport) {
	for _, w := range r.Workflows {
		fmt.Fprintf(stdout, "%s: workflow %s v%s, %d step%s (%d with an undo action), agents %s\n", w.File, w.Name,
			w.Version, w.Steps, plural(w.Steps), w.UndoActions, strings.Join(w.Agents, ", "))
		if len(w.Needs) > 0 {
			fmt.Fprintf(stdout, "  needs at deploy: %s\n", strings.Join(w.Needs, ", "))
		}
	}
	if len(r.Workflows) > 1 {
		fmt.Fprintf(stdout, "%d workflows valid together; the default (an order naming none) is %s\n",
			len(r.Workflows), r.Workflows[0].Name)
	}
}
