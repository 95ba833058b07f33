package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// taskStates are the states an order can be in.
var taskStates = []workflow.State{workflow.Pending, workflow.Held, workflow.Compensating, workflow.Processed, workflow.Failed,
	workflow.CompensationFailed, workflow.Cancelled}

func stateNames() []string {
	names := make([]string, len(taskStates))
	for i, st := range taskStates {
		names[i] = string(st)
	}
	return names
}

// stateFlag is list's --state: an order's state, in any case.
type stateFlag struct{ state workflow.State }

func (s *stateFlag) String() string { return string(s.state) }
func (s *stateFlag) Type() string   { return "state" }

// Set implements pflag.Value.
func (s *stateFlag) Set(v string) error {
	for _, st := range taskStates {
		if strings.EqualFold(v, string(st)) {
			s.state = st
			return nil
		}
	}
	return fmt.Errorf("unknown state %q; the states are %s", v, strings.Join(stateNames(), ", "))
}

// listPage is what sasctl list prints with --output json.
type listPage struct {
	Orders []operator.Order `json:"orders"`
	Next   string           `json:"next,omitempty"` // the next page's token
}

// listLong is sasctl list's help.
const listLong = `list lists orders, optionally searched (in one state, by orderId prefix (--id-prefix), by workflow and
version, older or newer than an age, ended after or before a time, by the step, agent or reason an
order is at or failed with, and by a field its workflow declares searchable (--field name=value)), a
page at a time, each page newest first.

With --field it reads that field's index: the orders of that value and no others (in a deployment
that seals its orders' data the value is looked up by its keyed hash). Without it, it scans the state
table, so its cost grows with the table, and pages follow the table's order. The scan's
FilterExpression holds the state, prefix, workflow, version, ages and end times: only the orders
that match come back, but DynamoDB bills every item read, so a page of a narrow search may read much
of the table, or all of it; --step, --agent and --reason are tested on the items read.

--reason takes a class (timeout, refused, oversized, pause, line: a key's line, rate, 503) or text
found in a record's cause, wait or error, in any case. A page's token must be used with the same
search.`

// searchOf completes search with the state, the ages, the end times and
// the field the flags gave (--older-than, --newer-than, --ended-after,
// --ended-before, --field), and checks it: a usage error if it cannot be
// run.
func searchOf(search *operator.Search, state workflow.State, older, newer string, more moreFlags) error {
	for _, a := range []struct {
		flag, v string
		to      *time.Duration
	}{{"--older-than", older, &search.OlderThan}, {"--newer-than", newer, &search.NewerThan}} {
		if a.v == "" {
			continue
		}
		d, err := operator.ParseAge(a.v)
		if err != nil {
			return usageErrorf("%s: %v", a.flag, err)
		}
		*a.to = d
	}
	if err := more.apply(search); err != nil {
		return err
	}
	search.State = state
	if err := search.Check(); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

func listCmd() *cobra.Command {
	var (
		t            target
		state        stateFlag
		limit        int
		next         string
		search       operator.Search
		older, newer string
		more         moreFlags
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list orders, by state, id prefix, workflow or age, a page at a time",
		Long:  listLong,
		Example: "  sasctl list --state Failed\n  sasctl list --id-prefix web- --workflow order --newer-than 1h\n" +
			"  sasctl list --state Held --older-than 2d\n  sasctl list --limit 100 --next TOKEN",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usageErrorf("--limit must be at least 1")
			}
			if err := searchOf(&search, state.state, older, newer, more); err != nil {
				return err
			}
			op, err := t.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			if op.Workflows, err = deployedWorkflows(t.WorkflowFiles); err != nil {
				return err // a field no workflow declares is told so
			}
			orders, token, err := op.List(cmd.Context(), search, limit, next)
			if err != nil {
				return t.explain(err)
			}
			// Newest first within the page: a scan reads the table in its
			// own order, and a global order would read all of it (or an
			// index every write pays for).
			slices.SortStableFunc(orders, func(a, b operator.Order) int { return b.CreatedAt.Compare(a.CreatedAt) })
			page := listPage{Orders: append([]operator.Order{}, orders...), Next: token}
			out := cmd.OutOrStdout()
			return emit(out, t.output, page, func() {
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ORDER\tWORKFLOW\tSTATE\tROUND\tCREATED\tUPDATED\tAT\tWAITING\tLAST ERROR")
				for _, o := range page.Orders {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", o.OrderID, o.Workflow, o.State, o.Round, stamp(o.CreatedAt),
						stamp(o.UpdatedAt), atWords(o.At), flowWaiting(o), short(o.LastError, 60))
				}
				tw.Flush()
				if token != "" {
					fmt.Fprintf(out, "more: sasctl list%s --next %s\n", searchArgs(state.state, search, older, newer, more), token)
				}
			})
		},
	}
	targetFlags(cmd, &t, true)
	t.bind(cmd.Flags(), "workflows") // a field no workflow declares is told so
	cmd.Flags().Var(&state, "state", "only orders in this state: "+strings.Join(stateNames(), ", "))
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(stateNames(), cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().IntVar(&limit, "limit", 50, "orders per page")
	cmd.Flags().StringVar(&next, "next", "", "the page token a previous list printed (with the same search)")
	cmd.Flags().StringVar(&search.Prefix, "id-prefix", "", "only orders whose orderId starts with this (--prefix is the deployment's)")
	cmd.Flags().StringVar(&search.Workflow, "workflow", "", "only orders of this workflow (its name)")
	cmd.Flags().StringVar(&older, "older-than", "", "only orders created longer ago than this (10m, 1h, 2d)")
	cmd.Flags().StringVar(&newer, "newer-than", "", "only orders created less long ago than this (10m, 1h, 2d)")
	findFlags(cmd, &search, &more)
	return cmd
}

// flowWaiting is what an order's steps wait for from their agents' flow
// control, in a few words ("-" if nothing).
func flowWaiting(o operator.Order) string {
	if o.FlowWaiting == 0 {
		return "-"
	}
	what := short(o.FlowWhy, 50)
	if o.FlowWaiting > 1 {
		what += fmt.Sprintf(" (+%d more)", o.FlowWaiting-1)
	}
	return what
}

// searchArgs are the flags that repeat a search, for the next page's command.
func searchArgs(state workflow.State, s operator.Search, older, newer string, more moreFlags) string {
	var b strings.Builder
	for _, f := range []struct{ name, v string }{{"state", string(state)}, {"id-prefix", s.Prefix},
		{"workflow", s.Workflow}, {"older-than", older}, {"newer-than", newer}, {"version", s.Version},
		{"step", s.Step}, {"agent", s.Agent}, {"reason", s.Reason}, {"ended-after", more.endedAfter},
		{"ended-before", more.endedBefore}, {"field", more.field}} {
		if f.v != "" {
			fmt.Fprintf(&b, " --%s %s", f.name, shellQuote(f.v))
		}
	}
	return b.String()
}

// shellQuote quotes v for a shell if it needs it.
func shellQuote(v string) string {
	if strings.IndexFunc(v, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// atWords is where an order is, in words: its first record at work or
// failed, and how many more ("-" for none).
func atWords(at []operator.At) string {
	if len(at) == 0 {
		return "-"
	}
	s := short(at[0].String(), 50)
	if len(at) > 1 {
		s += fmt.Sprintf(" (+%d more)", len(at)-1)
	}
	return s
}
