package supervisor_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/workflow"
)

// censusVersions are the deployed version of the single-step workflow, an
// earlier one (another pickup timeout) the deployment no longer runs, and a
// version derived from the deployed one (orders moved to it kept an undo of
// the version that ran a step: its Base is the deployed version).
func censusVersions(t *testing.T) (deployed, old, derived workflow.Definition) {
	deployed = workflow.Single(workflow.Settings{})
	old = workflow.Single(workflow.Settings{PickupTimeout: 2 * deployed.PickupTimeout})
	require.NotEqual(t, deployed.Version, old.Version)
	derived = deployed
	derived.Version, derived.Base = deployed.Version+"-kept", deployed.Version
	return deployed, old, derived
}

// censusCase is a sweepEnv holding orders of censusVersions, a deployment
// that runs the deployed one, and the census's alerts.
type censusCase struct {
	*sweepEnv
	deployed, old workflow.Definition
	set           workflow.Set
	alerts        *versionAlerts
}

// newCensusCase submits dep, old and der orders of the deployed, the
// earlier and the derived version (prefixes dep, old, der).
func newCensusCase(t *testing.T, c *awsclient.Clients, dep, old, der int) *censusCase {
	t.Helper()
	e := newSweepEnv(t, c, 0)
	d, o, derived := censusVersions(t)
	e.submitVersion(t, d, "dep", dep)
	e.submitVersion(t, o, "old", old)
	e.submitVersion(t, derived, "der", der)
	set, err := workflow.NewSet(d)
	require.NoError(t, err)
	return &censusCase{sweepEnv: e, deployed: d, old: o, set: set, alerts: &versionAlerts{}}
}

// submitVersion submits n orders of d, named prefix-0…, not yet due.
func (e *sweepEnv) submitVersion(t *testing.T, d workflow.Definition, prefix string, n int) {
	t.Helper()
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		_, err := e.store.Submit(context.Background(), statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`,
			Workflow: d, Now: e.now})
		require.NoError(t, err)
	}
}

// versionAlerts records the census's alerts.
type versionAlerts struct {
	mu  sync.Mutex
	got []alert.Undeployed
}

func (a *versionAlerts) VersionUndeployed(_ context.Context, u alert.Undeployed) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, u)
	return nil
}

// censusSupervisor is a Supervisor on e whose census judges by its set.
func (e *censusCase) censusSupervisor() *supervisor.Supervisor {
	m := metrics.New(e.tally, "supervisor")
	log := slog.New(slog.DiscardHandler)
	s := supervisor.New(e.cfg, supervisor.Deps{Store: e.store, Queues: e.queues, Alerts: noAlerts{},
		Notify: notify.New(e.queues, nil, m, log), Metrics: m, Log: log,
		Census: &supervisor.Census{Store: e.store, Workflows: e.set, Alerts: e.alerts}})
	s.Now = func() time.Time { return e.now }
	return s
}

// undeployedCounts are the OrdersOfUndeployedVersions values emitted, by
// workflow.
func (e *sweepEnv) undeployedCounts() map[string]float64 {
	out := map[string]float64{}
	for _, l := range e.tally.Lines(metrics.OrdersOfUndeployedVersions) {
		out[fmt.Sprint(l[metrics.DimensionWorkflow])] += l[metrics.OrdersOfUndeployedVersions].(float64)
	}
	return out
}

// Orders of a version the deployment no longer runs are counted, named in
// an alert (the version, the count, three of them, what to do) and in the
// metric an alarm watches; orders of the deployed version, or of a version
// derived from it, are not. A second sweep within the period counts nothing.
func TestCensusAlertsOnOrdersOfAVersionNoLongerDeployed(t *testing.T) {
	onEachEngine(t, func(t *testing.T, c *awsclient.Clients) {
		e := newCensusCase(t, c, 2, 4, 1)
		deployed, old, alerts := e.deployed, e.old, e.alerts
		sup := e.censusSupervisor()

		rep, err := sup.Sweep(context.Background())
		require.NoError(t, err)
		require.NotNil(t, rep.Census)
		require.True(t, rep.Census.Done, "seven orders: one page")
		require.Equal(t, 7, rep.Census.Orders)
		require.Len(t, rep.Census.Undeployed, 1)
		require.Len(t, alerts.got, 1)
		u := alerts.got[0]
		require.Equal(t, deployed.Name, u.Workflow)
		require.Equal(t, old.Version, u.Version)
		require.Equal(t, 4, u.Orders)
		require.Equal(t, []string{"old-0", "old-1", "old-2"}, u.Examples)
		require.Contains(t, u.Action, "sasctl migrate --to FILE")
		require.Equal(t, map[string]float64{deployed.Name: 4}, e.undeployedCounts())

		rep, err = sup.Sweep(context.Background())
		require.NoError(t, err)
		require.Nil(t, rep.Census, "this period's census is done")
		require.Len(t, alerts.got, 1)
	})
}

// With orders of the deployed version and of one derived from it only, a
// pass alerts on nothing and reports 0 for the workflow, so that its alarm
// clears.
func TestCensusOfDeployedVersionsReportsZero(t *testing.T) {
	onEachEngine(t, func(t *testing.T, c *awsclient.Clients) {
		e := newCensusCase(t, c, 2, 0, 2)
		deployed, alerts := e.deployed, e.alerts
		rep, err := e.censusSupervisor().Sweep(context.Background())
		require.NoError(t, err)
		require.NotNil(t, rep.Census)
		require.True(t, rep.Census.Done)
		require.Equal(t, 4, rep.Census.Orders)
		require.Empty(t, rep.Census.Undeployed)
		require.Empty(t, alerts.got)
		require.Equal(t, map[string]float64{deployed.Name: 0}, e.undeployedCounts())
	})
}

// A census of more orders than a sweep's share reads goes on in the next
// sweeps from its cursor, never past a page a sweep, and counts each order
// once: the alert comes when the pass ends.
func TestCensusSpansSweepsFromItsCursor(t *testing.T) {
	onEachEngine(t, func(t *testing.T, c *awsclient.Clients) {
		e := newCensusCase(t, c, 3, 4, 0)
		deployed, alerts := e.deployed, e.alerts
		e.cfg.PageSize, e.cfg.CensusBudget = 2, time.Nanosecond // a page a sweep
		sup := e.censusSupervisor()
		counted := 0
		for sweeps := 1; ; sweeps++ {
			require.LessOrEqual(t, sweeps, 4, "seven orders, two a page")
			rep, err := sup.Sweep(context.Background())
			require.NoError(t, err)
			require.NotNil(t, rep.Census)
			require.Equal(t, 1, rep.Census.Pages)
			require.Equal(t, sweeps > 1, rep.Census.Resumed)
			counted += rep.Census.Orders
			if rep.Census.Done {
				break
			}
			require.Empty(t, alerts.got, "no alert before the pass ends")
		}
		require.Equal(t, 7, counted, "each order once")
		require.Len(t, alerts.got, 1)
		require.Equal(t, 4, alerts.got[0].Orders)
		require.Equal(t, map[string]float64{deployed.Name: 4}, e.undeployedCounts())
	})
}
