package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sas-go/sas/shared/client"
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

func listCmd() *cobra.Command {
	var (
		t     target
		state stateFlag
		limit int
		next  string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list orders, by state, a page at a time",
		Long: `list lists orders, optionally in one state, a page at a time, each page newest first: it
scans the state table, so its cost grows with the table, and pages follow the table's order (the
newest order is on the first page only if the table is small enough for one).`,
		Example: "  sasctl list --state Failed\n  sasctl list --limit 100 --next TOKEN",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usageErrorf("--limit must be at least 1")
			}
			op, err := t.connect(cmd.Context(), false)
			if err != nil {
				return err
			}
			orders, token, err := client.Of(op).List(cmd.Context(), state.state, limit, next)
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
				fmt.Fprintln(tw, "ORDER\tSTATE\tROUND\tCREATED\tUPDATED\tLAST ERROR")
				for _, o := range page.Orders {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", o.OrderID, o.State, o.Round, stamp(o.CreatedAt), stamp(o.UpdatedAt), short(o.LastError, 70))
				}
				tw.Flush()
				if token != "" {
					fmt.Fprintf(out, "more: sasctl list --next %s\n", token)
				}
			})
		},
	}
	targetFlags(cmd, &t, true)
	cmd.Flags().Var(&state, "state", "only orders in this state: "+strings.Join(stateNames(), ", "))
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(stateNames(), cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().IntVar(&limit, "limit", 50, "orders per page")
	cmd.Flags().StringVar(&next, "next", "", "the page token a previous list printed")
	return cmd
}
