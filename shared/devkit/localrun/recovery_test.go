package localrun_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/chaos"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/workflow"
)

// barrierStore makes every supervisor finish reading its first page before
// any writes, so they all act on the same overdue records.
type barrierStore struct {
	*statestore.Store
	read  *sync.WaitGroup
	first *sync.Once
}

func (b barrierStore) DuePage(ctx context.Context, q statestore.DueQuery) (statestore.DuePage, error) {
	page, err := b.Store.DuePage(ctx, q)
	b.first.Do(func() {
		b.read.Done()
		b.read.Wait()
	})
	return page, err
}

func TestTwoSupervisorsRecoverEachStepOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		o.SupervisorEvery = time.Hour // this test runs the supervisors itself
		// The restart below can cost a step more recoveries on a loaded
		// machine (a message in the stopped runner's hands stays invisible for
		// the 5 s visibility timeout, past the 2 s pickup deadline): room for
		// them, so the order is not given up on. The race is what is tested.
		o.Settings.MaxFailures = 10
	})
	e.sim.SetFaults("inventory", remotesim.Faults{StallFirst: 1})
	const n = 10
	ids := e.orders(n)
	ctx := context.Background()
	e.eventually("every first attempt overdue", 60*time.Second, func() bool {
		due, err := storetest.Overdue(ctx, e.stack.Store, time.Now(), 100)
		require.NoError(t, err)
		processing := 0
		for _, st := range due {
			if st.State == workflow.Processing {
				processing++
			}
		}
		return processing == n
	})

	d := e.stack.Deployment
	tally := metrics.NewTally()
	var read sync.WaitGroup
	read.Add(2)
	reports := make([]supervisor.Report, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		cfg, deps := d.SupervisorParts(fmt.Sprintf("supervisor/%d", i))
		deps.Store, deps.Metrics = barrierStore{e.stack.Store, &read, &sync.Once{}}, metrics.New(tally, "supervisor")
		sup := supervisor.New(cfg, deps)
		wg.Go(func() {
			var err error
			reports[i], err = sup.Sweep(ctx)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	require.Equal(t, n, reports[0].Overdue, "both read every overdue step")
	require.Equal(t, n, reports[1].Overdue)
	require.Equal(t, n, reports[0].Recovered+reports[1].Recovered, "each step recovered once")
	require.Equal(t, n, reports[0].Lost+reports[1].Lost, "the other supervisor lost every race")
	require.EqualValues(t, n, tally.Sum(metrics.SupervisorRecoveries))
	for _, id := range ids {
		st := e.step(id, 0)
		require.Equal(t, 1, st.FailureCount, "not counted twice")
	}

	// Finish with the faults cleared and a supervisor on its schedule again
	// (on a loaded machine a request can still reach the agent late).
	e.sim.SetFaults("", remotesim.Faults{})
	e.stop()
	e.stack.Opts.SupervisorEvery = 200 * time.Millisecond
	e.start()
	tasks := e.waitEnded(ids)
	for _, id := range ids {
		require.Equal(t, workflow.Processed, tasks[id].State)
		// Every failure is the recovery of an attempt that did not complete
		// (the stalled first one, or one cut off by the restart); a pickup the
		// stopped runner missed is a wait, no failure.
		st := e.step(id, 0)
		timedOut := 0
		for _, ev := range st.Incidents {
			if strings.Contains(ev.What, "recovered by the supervisor") {
				require.Contains(t, ev.What, "not completed by", "%s: only an attempt fails", id)
				timedOut++
			}
		}
		require.GreaterOrEqual(t, timedOut, 1, "%s: the stalled first attempt was recovered: %q", id, st.Incidents)
		// The last attempt completed; so may the one before it, if its reply
		// came after its recovery and before another claim.
		require.Contains(t, []int{st.Attempt - 1, st.Attempt}, timedOut, "%s: %q", id, st.Incidents)
		require.Equal(t, st.FailureCount, timedOut, "%s: every failure counted once: %q", id, st.Incidents)
	}
	e.requireEffectsOnce(ids)
}

func TestRunnerKilledAndRestartedEveryOrderEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{Latency: time.Second}, func(o *localrun.Options) { o.Settings.StepTimeout = 8 * time.Second })
	ids := e.orders(60)
	ctx := context.Background()
	e.eventually("some orders processed", 60*time.Second, func() bool {
		c, _, err := e.stack.Count(ctx, ids)
		require.NoError(t, err)
		return c.Processed > 0
	})
	e.stop() // kill: in-flight invocations are cut off mid-work
	c, _, err := e.stack.Count(ctx, ids)
	require.NoError(t, err)
	require.Less(t, c.Ended(), len(ids), "killed mid-flight")
	t.Logf("killed with %d of %d ended (%d not yet submitted)", c.Ended(), len(ids), c.Missing)

	e.start() // a new process: new scheduler and supervisor instances
	e.waitEnded(ids)
	// Every order ended, and its effects match its end: on a loaded machine
	// an order may run out of retries and end Failed with its work undone.
	tasks, records, err := e.stack.Store.ScanAll(ctx)
	require.NoError(t, err)
	v, ends := chaos.Check(e.stack.Deployment.Config.Workflows, ids, tasks, records, e.sim.Ledger())
	require.Zero(t, v.Count(), "%+v", v)
	require.Zero(t, ends[workflow.CompensationFailed])
	require.Greater(t, ends[workflow.Processed], len(ids)/2, "most orders went through")
}
