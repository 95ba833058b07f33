package remotesim_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
)

func ptr[T any](v T) *T { return &v }

func TestApplySetsKnobsEverywhereAndAddsOutages(t *testing.T) {
	sim := remotesim.New(1)
	now := time.UnixMilli(1_800_000_000_000)
	got, err := sim.Apply(remotesim.Change{Transient: ptr(0.3), Latency: ptr("200ms"),
		Outages: []remotesim.Outage{{Service: "payment", For: "2m"}}}, now)
	require.NoError(t, err)
	require.Equal(t, 0.3, got[""].TransientRate)
	require.Equal(t, 200*time.Millisecond, got[""].Latency)
	require.Equal(t, 0.3, got["payment"].TransientRate, "a service's own knobs start from the shared ones")
	require.Equal(t, []remotesim.Window{{From: now, To: now.Add(2 * time.Minute)}}, got["payment"].Outages)

	got, err = sim.Apply(remotesim.Change{Permanent: ptr(0.05)}, now.Add(3*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 0.05, got["payment"].PermanentRate, "set on every service")
	require.Empty(t, got["payment"].Outages, "the outage is over")
	require.Equal(t, "5% refused for good (422), 300ms latency", remotesim.Faults{PermanentRate: 0.05, Latency: 300 * time.Millisecond}.Describe(now))

	got, err = sim.Apply(remotesim.Change{Clear: true}, now)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Empty(t, sim.AllFaults())
}

func TestApplyRefusesBadValues(t *testing.T) {
	sim := remotesim.New(1)
	_, err := sim.Apply(remotesim.Change{Transient: ptr(1.5), Latency: ptr("soon"),
		Outages: []remotesim.Outage{{Service: "payment", For: "-1m"}}}, time.Now())
	require.ErrorContains(t, err, "transient: 1.5 is not a share from 0 to 1")
	require.ErrorContains(t, err, `latency: "soon" is not a duration`)
	require.ErrorContains(t, err, `outage of payment: "-1m"`)
	_, err = remotesim.ParseOutage("payment")
	require.ErrorContains(t, err, "want SERVICE:DURATION")
	o, err := remotesim.ParseOutage("payment:2m")
	require.NoError(t, err)
	require.Equal(t, remotesim.Outage{Service: "payment", For: "2m"}, o)
}

func TestApplyFormReadsTheConsolesFields(t *testing.T) {
	sim := remotesim.New(1)
	now := time.UnixMilli(1_800_000_000_000)
	form := url.Values{"transient": {"30%"}, "latency": {"200ms"}, "permanent": {""},
		"outage-service": {"payment"}, "outage-for": {"2m"}}
	require.NoError(t, sim.ApplyForm(form, now))
	require.Equal(t, map[string]string{"": "30% transient 503s, 200ms latency",
		"payment": "30% transient 503s, 200ms latency, outage until " + now.Add(2*time.Minute).Format("15:04:05") + " (2m0s left)"},
		sim.DescribeAll(now))

	require.ErrorContains(t, sim.ApplyForm(url.Values{"transient": {"lots"}}, now), `transient: "lots" is not a number`)
	require.ErrorContains(t, sim.ApplyForm(url.Values{"permanent": {"150%"}}, now), "permanent: 1.5 is not a share")
	require.ErrorContains(t, sim.ApplyForm(url.Values{"outage-for": {"2m"}}, now), "an outage needs a service")
	require.NoError(t, sim.ApplyForm(url.Values{"service": {"shipping"}, "permanent": {"0.1"}}, now))
	require.Equal(t, 0.1, sim.AllFaults()["shipping"].PermanentRate)
	require.Zero(t, sim.AllFaults()[""].PermanentRate, "set on that service only")
	require.NoError(t, sim.ApplyForm(url.Values{"clear": {"1"}}, now))
	require.Empty(t, sim.DescribeAll(now))
}
