package operator

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Migrated says what a move of one order did, or, dry, would do.
type Migrated struct {
	OrderID string `json:"orderId"`
	From    string `json:"from,omitempty"` // the version it ran
	To      string `json:"to,omitempty"`   // the version it runs after
	Base    string `json:"base,omitempty"` // To's base: the version moved to, when the order keeps an undo of the version that ran a step
	// Moves: it moves (moved, unless a dry run); Already: it ran To
	// already; otherwise Why says why it cannot move now.
	Moves   bool   `json:"moves"`
	Already bool   `json:"already,omitempty"`
	Why     string `json:"why,omitempty"`
	// Started are the steps it runs next (their requests sent, unless a
	// dry run or a held order), Skipped the new steps it was past,
	// Dropped the earlier version's steps it leaves behind, Kept those it
	// keeps, done, for their undo alone (migrate.keep), Undoes what its
	// undoing would run after the move, in order.
	Started []string `json:"started,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
	Dropped []string `json:"dropped,omitempty"`
	Kept    []string `json:"kept,omitempty"`
	Undoes  []string `json:"undoes,omitempty"`
	// Results is how many of its results changed key with their steps, or
	// were rewritten by the plan; Rewritten says its data was.
	Results   int  `json:"results,omitempty"`
	Rewritten bool `json:"rewritten,omitempty"`
}

// Effects say in words what a move does to the order, each part that is
// not empty: what it runs next, skips, leaves, keeps and would undo
// (sasctl migrate's lines, validate --from's and the console's dry run).
func (m Migrated) Effects() []string {
	var out []string
	for _, p := range []struct {
		what, then string
		names      []string
	}{{"runs next", "", m.Started}, {"skips", "", m.Skipped}, {"leaves", "", m.Dropped},
		{"keeps", " (done: for its undo only)", m.Kept}, {"would undo", "", m.Undoes}} {
		if len(p.names) > 0 {
			out = append(out, p.what+" "+strings.Join(p.names, ", ")+p.then)
		}
	}
	if m.Rewritten {
		out = append(out, "rewrites its data")
	}
	return out
}

// MigrateOrder moves one order to version to of its workflow (dry: says
// what the move would do, writing nothing), for by, and sends the requests
// of what it made ready. An order that cannot move now is no error: its
// Migrated says why.
func (o *Operator) MigrateOrder(ctx context.Context, orderID string, to workflow.Definition, by string, dry bool) (Migrated, error) {
	out := Migrated{OrderID: orderID}
	// What it keeps is read and kept again as its readers read it: opened
	// with the operator's own kms:Decrypt, in the bucket its claim checks
	// name (Beside), its deployment's whatever this operator was told.
	res, err := o.Store.Migrate(ctx, statestore.Move{OrderID: orderID, To: to, By: by, DryRun: dry, Pickup: o.PickupTimeout, Now: o.Now(),
		Kept: o.kept.Over(o.s3, o.PayloadBucket)})
	var nm *workflow.NotMovableError
	switch {
	case errors.As(err, &nm):
		out.From, out.Why = res.From, nm.Error()
		return out, nil
	case err != nil:
		return out, err
	}
	out.From, out.To, out.Base, out.Already, out.Results, out.Rewritten = res.From, res.To, res.Base, res.Already, res.Results, res.Rewritten
	if res.Already {
		return out, nil
	}
	out.Moves = true
	mv := res.Move
	def := mv.Definition
	for _, r := range mv.Ready {
		out.Started = append(out.Started, workflow.RecordName(def.Steps[r.Index].Name, r))
	}
	for ref, p := range mv.Recs {
		if p.Skipped {
			out.Skipped = append(out.Skipped, def.Steps[ref.Index].Name)
		}
	}
	out.Undoes, out.Kept = mv.Undoes(), mv.Kept()
	slices.Sort(out.Skipped)
	out.Dropped = mv.Dropped
	if dry || len(mv.Ready) == 0 {
		return out, nil
	}
	start, err := o.restarter(ctx)
	if err != nil {
		return out, err
	}
	// If a request is lost, its record's pickup deadline brings the Supervisor.
	return out, start.Start(ctx, orderID, mv.Ready, 0)
}

// MoveSelect picks the orders a migration moves, among those in flight of
// the workflow moved (an empty part keeps every order).
type MoveSelect struct {
	Orders    []string       // these orders only
	State     workflow.State // in this state (Pending, Held)
	OlderThan time.Duration  // created more than this long ago
	AtStep    string         // at this step: ready, waiting, at work or held on it
	Count     int            // at most this many move (a canary)
	// Share keeps the orders whose id falls in this share (0 < Share < 1),
	// the same ones whenever it is asked: a canary that a second run with a
	// larger share extends.
	Share float64
}

// MoveReport is what a migration did, or, dry, would do.
type MoveReport struct {
	Workflow string `json:"workflow"`
	To       string `json:"to"`
	DryRun   bool   `json:"dryRun"`
	Seen     int    `json:"seen"`    // orders looked at (in flight of the workflow, picked)
	Moves    int    `json:"moves"`   // moved, or, dry, that would move
	Already  int    `json:"already"` // at the version already
	Refused  int    `json:"refused"` // that cannot move now
	// Why counts the refusals by their first reason.
	Why    map[string]int `json:"why,omitempty"`
	Orders []Migrated     `json:"orders"`
}

// Migrate moves the orders sel picks to version to, one at a time, at most
// rate a second (0: no pacing), telling each one done to each (nil: none):
// the bulk action migrate (Bulk), whose name each order's history keeps.
// It is resumable: run again, it finds the orders moved already (a read
// each) and moves the rest. Stopped (ctx ended), it returns what it did
// and ctx's error.
func (o *Operator) Migrate(ctx context.Context, to workflow.Definition, sel MoveSelect, by string, dry bool, rate float64,
	each func(Migrated)) (MoveReport, error) {
	rep := MoveReport{Workflow: to.Name, To: to.Version, DryRun: dry, Why: map[string]int{}}
	if !dry {
		if err := o.agentsOf(ctx, to); err != nil {
			return rep, err
		}
	}
	ids, err := o.movable(ctx, to.Name, sel)
	if err != nil {
		return rep, err
	}
	picked := IDs(ids...)
	if sel.AtStep != "" {
		picked = o.atStepOf(picked, sel.AtStep)
	}
	done, err := o.Bulk(ctx, picked, o.migrateAction(to), BulkOptions{DryRun: dry, Rate: rate, Limit: sel.Count, By: by},
		func(r BulkResult) {
			m := r.Detail.(Migrated)
			rep.add(m)
			if each != nil {
				each(m)
			}
		})
	if err == nil && done.Stopped {
		err = fmt.Errorf("stopped with %d orders left (run it again to go on): %w", done.Left, context.Cause(ctx))
	}
	return rep, err
}

// add counts m in the report.
func (rep *MoveReport) add(m Migrated) {
	rep.Seen++
	switch {
	case m.Already:
		rep.Already++
	case m.Moves:
		rep.Moves++
	default:
		rep.Refused++
		rep.Why[firstReason(m.Why)]++
	}
	rep.Orders = append(rep.Orders, m)
}

// migrateAction is MigrateOrder to version to, as Bulk takes it.
func (o *Operator) migrateAction(to workflow.Definition) Action {
	return Action{Name: "migrate", Do: func(ctx context.Context, id, by string, dry bool) (Acted, error) {
		m, err := o.MigrateOrder(ctx, id, to, by, dry)
		if err != nil {
			return Acted{}, fmt.Errorf("move %s: %w", id, err)
		}
		a := Acted{Already: m.Already, Detail: m, What: strings.Join(m.Effects(), "; ")}
		if !m.Moves && !m.Already {
			a.Refused = m.Why
		}
		return a, nil
	}}
}

// atStepOf keeps, of what sel lists, the orders at step (atStep: a read
// each).
func (o *Operator) atStepOf(sel Selector, step string) Selector {
	return func(ctx context.Context, next string) ([]string, string, error) {
		ids, token, err := sel(ctx, next)
		if err != nil {
			return nil, "", err
		}
		var out []string
		for _, id := range ids {
			at, err := o.atStep(ctx, id, step)
			if err != nil {
				return nil, "", err
			}
			if at {
				out = append(out, id)
			}
		}
		return out, token, nil
	}
}

// agentsOf checks that the deployment has a queue for every agent to calls.
func (o *Operator) agentsOf(ctx context.Context, to workflow.Definition) error {
	r, err := o.restarter(ctx)
	if err != nil {
		return err
	}
	for _, a := range to.Agents() {
		if _, ok := r.AgentQueues[a]; !ok {
			return fmt.Errorf("version %s of workflow %s calls agent %q, which this deployment has no queue for: deploy it first", to.Version, to.Name, a)
		}
	}
	return nil
}

// movable lists the orders sel picks among the workflow's in flight.
func (o *Operator) movable(ctx context.Context, workflowName string, sel MoveSelect) ([]string, error) {
	keep := func(id string) bool { return sel.Share <= 0 || sel.Share >= 1 || inShare(id, sel.Share) }
	if len(sel.Orders) > 0 {
		return slices.DeleteFunc(slices.Clone(sel.Orders), func(id string) bool { return !keep(id) }), nil
	}
	var ids []string
	next := ""
	for {
		page, token, err := o.InFlight(ctx, Search{Workflow: workflowName, OlderThan: sel.OlderThan}, 500, next)
		if err != nil {
			return nil, err
		}
		for _, t := range page {
			if t.Workflow == workflowName && (sel.State == "" || t.State == sel.State) && keep(t.OrderID) {
				ids = append(ids, t.OrderID)
			}
		}
		if next = token; next == "" {
			break
		}
	}
	// The index is read page by page while the pipeline moves its entries
	// (an entry's due time changes): an order may be read twice.
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// atStep reports whether the order is at the named step: ready, waiting,
// at work, or held on it.
func (o *Operator) atStep(ctx context.Context, orderID, step string) (bool, error) {
	_, steps, err := o.Store.Load(ctx, orderID)
	if err != nil {
		return false, err
	}
	for _, st := range steps {
		if st.Name != step || st.Undo {
			continue
		}
		if st.State == workflow.Processing || st.State == workflow.Error || (st.State == workflow.Pending && !st.DueAt.IsZero()) {
			return true, nil
		}
	}
	return false, nil
}

// inShare reports whether id falls in share of the ids: the same answer
// whenever it is asked.
func inShare(id string, share float64) bool {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return float64(h.Sum32()%10000) < share*10000
}

// firstReason is a refusal's first reason, for counting.
func firstReason(why string) string {
	for i := 0; i+1 < len(why); i++ {
		if why[i] == ';' && why[i+1] == ' ' {
			return why[:i]
		}
	}
	return why
}

// VersionInFlight is one version of a workflow that orders in flight run,
// their count, and whether the deployment runs it (statestore.VersionCount,
// which the Supervisor's census also counts and judges).
type VersionInFlight = statestore.VersionCount

// Versions counts the orders in flight of each version of each workflow,
// and says, when the deployment's workflows are known, which versions it
// no longer runs: their orders go on from the definitions the state table
// keeps (sasctl migrate moves them).
func (o *Operator) Versions(ctx context.Context) ([]VersionInFlight, error) {
	tally := statestore.Tally{}
	seen := map[string]bool{} // the index moves under a listing: an order may be read twice
	next := ""
	for {
		page, token, err := o.InFlight(ctx, Search{}, 500, next)
		if err != nil {
			return nil, err
		}
		tally.Add(slices.DeleteFunc(page, func(t statestore.Task) bool {
			dup := seen[t.OrderID]
			seen[t.OrderID] = true
			return dup
		}))
		if next = token; next == "" {
			break
		}
	}
	out := tally.Counts()
	o.Store.Judge(ctx, out, o.Workflows)
	return out, nil
}
