package localrun_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The local pipeline's Supervisor runs the census (every 500 ms here).
// Orders waiting for their approval count 0 while their version is
// deployed; once a version with a fraud check is deployed in its place,
// they are named in an alert on the alert topic and counted in
// OrdersOfUndeployedVersions; moved to it (sasctl migrate's operator), the
// next pass reports 0 again, which clears the alarm.
func TestTheLocalSupervisorAlertsOnOrdersOfAVersionNoLongerDeployed(t *testing.T) {
	t.Parallel()
	settings := workflow.Settings{StepTimeout: 20 * time.Second, MaxFailures: 3, PickupTimeout: 30 * time.Second}
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		running(t, approval("72h", ""))(o)
		o.Settings, o.CensusEvery = settings, 500*time.Millisecond
	})
	ids := e.orders(3)
	for _, id := range ids {
		e.parked(id, 1)
	}
	v1, ok := e.stack.Deployment.Config.Workflows.Get("approval")
	require.True(t, ok)
	e.eventually("a pass that found them", 30*time.Second, func() bool { return len(e.undeployedReports()) > 0 })
	require.Zero(t, e.stack.Tally.Max(metrics.OrdersOfUndeployedVersions), "their version is deployed")

	v2, err := workflow.ParseFile("approval.yaml", []byte(strings.Replace(approval("96h", ""), "  - name: await-approval\n",
		"  - name: fraud-check\n    agent: payment\n    undo: none\n  - name: await-approval\n", 1)), workflow.Options{})
	require.NoError(t, err)
	v2 = v2.With(settings)
	e.stop() // deploy v2: the functions start again with it
	e.stack.Deployment.Config.Workflows = workflow.MustSet(v2)
	e.start()
	var got alert.Undeployed
	e.eventually("the alert", 60*time.Second, func() bool {
		got = e.undeployedAlert()
		return got.Orders == len(ids)
	})
	require.Equal(t, v1.Version, got.Version)
	require.Equal(t, ids, got.Examples)
	require.Contains(t, got.Action, "sasctl migrate --to FILE")
	require.EqualValues(t, len(ids), e.stack.Tally.Max(metrics.OrdersOfUndeployedVersions))

	op := operator.New(e.stack.Deployment.Clients, e.stack.Topology())
	op.PickupTimeout = settings.PickupTimeout
	rep, err := op.Migrate(context.Background(), v2, operator.MoveSelect{}, "the test", false, 0, nil)
	require.NoError(t, err)
	require.Equal(t, len(ids), rep.Moves)
	e.eventually("a pass that found none", 30*time.Second, func() bool {
		r := e.undeployedReports()
		return r[len(r)-1] == 0
	})
}

// undeployedReports are the census's OrdersOfUndeployedVersions values of
// the approval workflow, in the order emitted.
func (e *env) undeployedReports() []float64 {
	var out []float64
	for _, l := range e.stack.Tally.Lines(metrics.OrdersOfUndeployedVersions) {
		if l[metrics.DimensionWorkflow] == "approval" {
			out = append(out, l[metrics.OrdersOfUndeployedVersions].(float64))
		}
	}
	return out
}

// undeployedAlert is the last OrdersOfUndeployedVersion event in the alert
// inbox (zero: none yet).
func (e *env) undeployedAlert() alert.Undeployed {
	e.t.Helper()
	msgs, err := e.stack.Peek(context.Background(), e.stack.AlertInbox)
	require.NoError(e.t, err)
	var last alert.Undeployed
	for _, m := range msgs {
		var u alert.Undeployed
		if json.Unmarshal([]byte(aws.ToString(m.Body)), &u) == nil && u.Event == "OrdersOfUndeployedVersion" {
			last = u
		}
	}
	return last
}

// What a census pass reads, per order in flight, on DynamoDB Local (units as
// DynamoDB bills them): the claim, the pages of the in-flight listing, the
// save. Orders waiting for their approval; the figure is logged:
// SAS_CENSUS_ORDERS=1000 go test -run TestWhatACensusPassReads -v ./shared/devkit/localrun
func TestWhatACensusPassReads(t *testing.T) {
	t.Parallel()
	n := 100
	if v, err := strconv.Atoi(os.Getenv("SAS_CENSUS_ORDERS")); err == nil && v > 0 {
		n = v
	}
	meter := accounting.NewForDynamoDBLocal()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		running(t, approval("72h", ""))(o)
		o.Settings, o.Meter = workflow.Settings{StepTimeout: 20 * time.Second, MaxFailures: 3, PickupTimeout: 30 * time.Second}, meter
		o.VisibilityTimeout = 30 * time.Second
	})
	ids := e.orders(n)
	for _, id := range ids {
		e.parked(id, 1)
	}
	e.stop()
	store := e.stack.Deployment.Store()
	ctx := accounting.WithFunction(context.Background(), "census")
	meter.Reset()
	c, ok, err := store.ClaimVersionCensus(ctx, statestore.VersionCensusClaim{Owner: "measure", Now: time.Now().Add(2 * time.Hour),
		Every: time.Hour, Lease: time.Minute})
	require.NoError(t, err)
	require.True(t, ok)
	pages := 0
	for done := false; !done; pages++ {
		done, err = store.VersionCensusPage(ctx, &c, statestore.MaxDuePage)
		require.NoError(t, err)
	}
	_, err = store.SaveVersionCensus(ctx, c, true, time.Now())
	require.NoError(t, err)
	var all accounting.Usage
	for k, u := range meter.Snapshot() {
		if k.Function == "census" {
			all = all.Add(u)
			t.Logf("%s: %d requests, %.1f read units, %.1f write units", k.Operation, u.Requests, u.ReadUnits, u.WriteUnits)
		}
	}
	per := all.ReadUnits / float64(n)
	t.Logf("a census pass of %d orders in flight: %d pages, %d requests, %.1f read units (%.3f an order), %.1f write units",
		n, pages, all.Requests, all.ReadUnits, per, all.WriteUnits)
	require.Equal(t, n, c.Tally.Orders(), "each order counted once")
	require.Less(t, per, 1.0, "an eventually consistent read of each state item, and its share of the index's pages")
}
