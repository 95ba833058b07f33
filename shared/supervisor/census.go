package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// CensusStore is the part of the state store the census of versions in
// flight uses: its item, claimed, paged and saved, and the rule that judges
// a version deployed or not.
type CensusStore interface {
	ClaimVersionCensus(ctx context.Context, c statestore.VersionCensusClaim) (statestore.VersionCensus, bool, error)
	VersionCensusPage(ctx context.Context, c *statestore.VersionCensus, limit int) (bool, error)
	SaveVersionCensus(ctx context.Context, c statestore.VersionCensus, done bool, now time.Time) (statestore.VersionCensus, error)
	Judge(ctx context.Context, counts []statestore.VersionCount, set workflow.Set)
}

// VersionAlerter tells the operator that orders in flight run a version
// the deployment no longer runs.
type VersionAlerter interface {
	VersionUndeployed(ctx context.Context, u alert.Undeployed) error
}

// Census is what the census of versions in flight needs: once a period
// (Config.CensusEvery) it counts the orders in flight by workflow and
// version, and names and alerts those of a version Workflows does not run
// (nor its base), which would otherwise go on from their stored definition
// unseen.
type Census struct {
	Store     CensusStore
	Workflows workflow.Set // the deployment's: what it runs
	Alerts    VersionAlerter
}

// CensusReport is what a sweep's share of the census did; nil in a Report:
// the census was not due, or another supervisor held it.
type CensusReport struct {
	Started time.Time `json:"started"` // when the pass began
	Resumed bool      `json:"resumed"` // from the cursor a run before saved
	Pages   int       `json:"pages"`
	Orders  int       `json:"orders"`         // counted in this run
	Done    bool      `json:"done"`           // the pass ended in this run
	Lost    bool      `json:"lost,omitempty"` // another supervisor took it over: this run's count is dropped
	// Undeployed are the versions, at the pass's end, that the deployment
	// runs neither itself nor by its base, with orders in flight.
	Undeployed []statestore.VersionCount `json:"undeployed,omitempty"`
}

// censusLeaseMargin is the part of a census's lease beyond its share of the
// time budget: the save that ends its run.
const censusLeaseMargin = 30 * time.Second

// census starts the sweep's share of the census beside it, until
// CensusBudget has passed (stopAt at the latest); wait returns what it did.
func (s *Supervisor) census(ctx context.Context, stopAt time.Time) (wait func() (*CensusReport, error)) {
	if s.d.Census == nil {
		return func() (*CensusReport, error) { return nil, nil }
	}
	type result struct {
		rep *CensusReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := s.runCensus(ctx, stopAt)
		done <- result{rep, err}
	}()
	return func() (*CensusReport, error) { r := <-done; return r.rep, r.err }
}

// runCensus claims the census if it is due, reads pages of the orders in
// flight (one at least) within its share of the budget, saves what it
// counted with its cursor, and, when the pass ends, reports it.
func (s *Supervisor) runCensus(ctx context.Context, stopAt time.Time) (*CensusReport, error) {
	st := s.d.Census.Store
	c, ok, err := st.ClaimVersionCensus(ctx, statestore.VersionCensusClaim{Owner: s.owner, Now: s.Now(),
		Every: s.cfg.CensusEvery, Lease: s.cfg.CensusBudget + censusLeaseMargin})
	if err != nil || !ok {
		return nil, wrapCensus(err)
	}
	rep := &CensusReport{Started: c.Started, Resumed: c.Cursor != ""}
	end := time.Now().Add(s.cfg.CensusBudget)
	if stopAt.Before(end) {
		end = stopAt
	}
	before := c.Tally.Orders()
	var done bool
	for {
		if done, err = st.VersionCensusPage(ctx, &c, s.cfg.PageSize); err != nil {
			break // what was counted is saved; the rest waits for the next run
		}
		rep.Pages++
		if done || ctx.Err() != nil || !time.Now().Before(end) {
			break
		}
	}
	rep.Orders = c.Tally.Orders() - before
	c, serr := st.SaveVersionCensus(ctx, c, done && err == nil, s.Now())
	switch {
	case errors.Is(serr, statestore.ErrCensusLost):
		rep.Lost = true
		return rep, wrapCensus(err)
	case serr != nil:
		return rep, wrapCensus(errors.Join(err, serr))
	case err != nil:
		return rep, wrapCensus(err)
	}
	if rep.Done = done; done {
		return rep, wrapCensus(s.reportCensus(ctx, c, rep))
	}
	return rep, nil
}

func wrapCensus(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("census of versions in flight: %w", err)
}

// reportCensus tells what an ended pass found: for every workflow the
// deployment runs or orders run, the orders of its versions not deployed
// (OrdersOfUndeployedVersions, 0 for none, so that its alarm clears), and,
// for each such version, an error logged and an alert naming the version,
// the count, some orders and what to do.
func (s *Supervisor) reportCensus(ctx context.Context, c statestore.VersionCensus, rep *CensusReport) error {
	cen := s.d.Census
	counts := c.Tally.Counts()
	cen.Store.Judge(ctx, counts, cen.Workflows)
	per := map[string]int{}
	for _, name := range cen.Workflows.Names() {
		per[name] = 0
	}
	var errs []error
	for _, v := range counts {
		if v.Deployed == nil || *v.Deployed {
			continue
		}
		name := cmp.Or(v.Workflow, "unnamed")
		per[name] += v.Orders
		rep.Undeployed = append(rep.Undeployed, v)
		u := alert.Undeployed{Workflow: v.Workflow, Version: v.Version, Base: v.Base, Orders: v.Orders,
			Examples: v.Examples, Action: alert.UndeployedAction(v.Workflow, v.Version), At: s.Now()}
		s.d.Log.Error("orders in flight run a version no longer deployed", "workflow", u.Workflow, "version", u.Version,
			"base", u.Base, "orders", u.Orders, "examples", strings.Join(u.Examples, ","), "action", u.Action)
		if cen.Alerts != nil {
			if err := cen.Alerts.VersionUndeployed(ctx, u); err != nil {
				errs = append(errs, err) // the metric below still alarms; the next pass alerts again
			}
		}
	}
	s.d.Log.Info("census of versions in flight", "started", c.Started, "orders", c.Tally.Orders(), "versions", len(counts),
		"undeployed", len(rep.Undeployed))
	for _, name := range slices.Sorted(maps.Keys(per)) {
		s.d.Metrics.CountBy(metrics.OrdersOfUndeployedVersions, float64(per[name]), metrics.DimensionWorkflow, name,
			map[string]any{"CensusStarted": c.Started.UTC().Format(time.RFC3339)})
	}
	return errors.Join(errs...)
}
