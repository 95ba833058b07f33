package supervisor_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/alert"
	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/notify"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/supervisor"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// engines are the state store's engines, each with moto's SQS.
var engines = map[string]emulatortest.Engine{}

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithEngines(m, engines)) }

// onEachEngine runs fn on every engine, in parallel.
func onEachEngine(t *testing.T, fn func(t *testing.T, c *awsclient.Clients)) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, e.Clients)
		})
	}
}

var envSeq atomic.Int64

// sweepEnv is a state store on fresh tables (4 deadline shards) holding n
// due orders of the single-step workflow, half claimed and overdue at
// their CompleteBy, half never claimed and past their pickup deadline, and
// a scheduler queue and the agent's queues on moto.
type sweepEnv struct {
	tally  *metrics.Tally // the supervisors' metrics
	store  *statestore.Store
	queues *countingQueues
	cfg    supervisor.Config
	ids    []string
	now    time.Time // when the supervisors look: every order is due
}

func newSweepEnv(t *testing.T, c *awsclient.Clients, n int) *sweepEnv {
	t.Helper()
	ctx := context.Background()
	topo := topology.Default(fmt.Sprintf("sweep%d-%d", time.Now().UnixNano()%1e6, envSeq.Add(1)), "payment")
	require.NoError(t, provision.EnsureTables(ctx, c.DynamoDB, topo))
	store := statestore.New(c.DynamoDB, topo.OrdersTable(), topo.StateTable(), topo.DeadlineShards)
	url := func(name string) string {
		out, err := c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
		require.NoError(t, err)
		return aws.ToString(out.QueueUrl)
	}
	e := &sweepEnv{tally: metrics.NewTally(), store: store, queues: &countingQueues{Sender: queue.NewSender(c.SQS), reads: map[string]int{}},
		cfg: supervisor.Config{SchedulerQueueURL: url(topo.SchedulerQueue().Name), PickupTimeout: time.Minute,
			AgentQueues: map[string]supervisor.AgentQueues{"payment": {
				Requests: url(topo.AgentRequests("payment").Name), Responses: url(topo.AgentResponses("payment").Name)}}}}
	def := workflow.Single(workflow.Settings{})
	t0 := time.Now().Add(-time.Hour)
	for i := range n {
		id := fmt.Sprintf("o-%03d", i)
		_, err := store.Submit(ctx, statestore.Submission{OrderID: id, Order: `{"orderId":"` + id + `"}`, Workflow: def, Now: t0})
		require.NoError(t, err)
		if i%2 == 0 {
			_, err = store.Claim(ctx, statestore.Claim{OrderID: id, Ref: workflow.Ref{}, Agent: "payment", Owner: "agent", Now: t0})
			require.NoError(t, err)
		}
		e.ids = append(e.ids, id)
	}
	e.now = t0.Add(2 * def.PickupTimeout)
	return e
}

// supervisor is a Supervisor on the env whose clock stands at e.now.
func (e *sweepEnv) supervisor(cfg supervisor.Config) *supervisor.Supervisor {
	m := metrics.New(e.tally, "supervisor")
	log := slog.New(slog.DiscardHandler)
	s := supervisor.New(cfg, supervisor.Deps{Store: e.store, Queues: e.queues, Alerts: noAlerts{},
		Notify: notify.New(e.queues, nil, m, log), Metrics: m, Log: log})
	s.Now = func() time.Time { return e.now }
	return s
}

// requireEachLookedAtOnce checks that every order's step was looked at
// exactly once: its overdue attempt recovered once, or its wait recorded once.
func (e *sweepEnv) requireEachLookedAtOnce(t *testing.T) {
	t.Helper()
	for i, id := range e.ids {
		_, steps, err := e.store.Load(context.Background(), id)
		require.NoError(t, err)
		if i%2 == 0 {
			require.Equal(t, 1, steps[0].FailureCount, "%s: its overdue attempt recovered once", id)
		} else {
			require.Equal(t, 1, steps[0].Waits, "%s: its wait recorded once", id)
			require.Zero(t, steps[0].FailureCount, "%s: waiting is no failure", id)
		}
	}
}

// countingQueues are moto's queues, counting the depth reads per queue.
type countingQueues struct {
	*queue.Sender
	mu    sync.Mutex
	reads map[string]int
}

func (q *countingQueues) Depth(ctx context.Context, url string) (queue.Depth, error) {
	q.mu.Lock()
	q.reads[url]++
	q.mu.Unlock()
	return q.Sender.Depth(ctx, url)
}

type noAlerts struct{}

func (noAlerts) StepFailed(context.Context, alert.Failure) error {
	return fmt.Errorf("no step fails for good in these tests")
}

// With more due orders than a sweep reads (a budget so short that each
// shard reads one page of 4), every sweep reads a full page of every shard
// that has one left, so no shard waits for another, and every due order is
// looked at exactly once within as many sweeps as its shard has pages.
func TestEveryShardProgressesInEverySweep(t *testing.T) {
	onEachEngine(t, func(t *testing.T, c *awsclient.Clients) {
		const n, page = 48, 4
		e := newSweepEnv(t, c, n)
		cfg := e.cfg
		cfg.PageSize, cfg.TimeBudget = page, time.Nanosecond
		s := e.supervisor(cfg)
		read := make([]int, 4)
		sweeps := 0
		for done := false; !done; {
			rep, err := s.Sweep(context.Background())
			require.NoError(t, err)
			sweeps++
			require.Len(t, rep.Shards, 4)
			done = true
			for i, sh := range rep.Shards {
				require.Equal(t, 1, sh.Pages, "sweep %d, shard %d: one page each when out of time", sweeps, i)
				if !sh.Done {
					require.Equal(t, page, sh.Orders, "sweep %d, shard %d: a full page", sweeps, i)
					done = false
				}
				read[i] += sh.Orders
			}
			require.Equal(t, !done, rep.OutOfTime)
			require.LessOrEqual(t, sweeps, n/page+1, "bounded")
		}
		most := 0
		for i, r := range read {
			require.Greater(t, r, page, "shard %d holds more than one page of due orders, or the test shows nothing", i)
			most = max(most, r)
		}
		require.Equal(t, n, read[0]+read[1]+read[2]+read[3], "each due order read once")
		require.LessOrEqual(t, sweeps, most/page+1, "every order looked at within its shard's pages")
		t.Logf("%d due orders over the shards %v, pages of %d: every order looked at once in %d sweeps", n, read, page, sweeps)
		e.requireEachLookedAtOnce(t)
	})
}

// With time enough, one sweep reads every shard page after page: every due
// order is looked at, and each queue's depth is read once for all of them.
func TestOneSweepReadsEveryDueOrderAndEachQueueOnce(t *testing.T) {
	onEachEngine(t, func(t *testing.T, c *awsclient.Clients) {
		const n = 40
		e := newSweepEnv(t, c, n)
		cfg := e.cfg
		cfg.PageSize, cfg.Parallel, cfg.ShardParallelism = 3, 4, 2
		rep, err := e.supervisor(cfg).Sweep(context.Background())
		require.NoError(t, err)
		require.False(t, rep.OutOfTime)
		require.Equal(t, n, rep.Orders)
		require.Equal(t, n, rep.Overdue)
		require.Equal(t, n/2, rep.Recovered)
		require.Equal(t, n/2, rep.Resent+rep.Held)
		for i, sh := range rep.Shards {
			require.True(t, sh.Done, "shard %d", i)
			require.Greater(t, sh.Pages, 1, "shard %d: several pages", i)
		}
		e.requireEachLookedAtOnce(t)
		require.Len(t, e.queues.reads, 1, "a ready step's start waits in its agent's request queue, and only there")
		for url, reads := range e.queues.reads {
			require.Equal(t, 1, reads, "%s: read once per sweep", url)
		}
	})
}

// Several Supervisors may sweep at once: every write is conditional on
// what was read, so each overdue step is recovered, or its wait recorded,
// exactly once.
func TestTwoSweepsAtOnceLookAtEachOrderOnce(t *testing.T) {
	onEachEngine(t, func(t *testing.T, c *awsclient.Clients) {
		const n = 40
		e := newSweepEnv(t, c, n)
		cfg := e.cfg
		cfg.PageSize = 5
		reps := make([]supervisor.Report, 2)
		var wg sync.WaitGroup
		for i := range reps {
			s := e.supervisor(cfg)
			wg.Go(func() {
				var err error
				reps[i], err = s.Sweep(context.Background())
				require.NoError(t, err)
			})
		}
		wg.Wait()
		won := 0
		for _, r := range reps {
			won += r.Recovered + r.Resent + r.Held
		}
		require.Equal(t, n, won, "one look at each order won")
		e.requireEachLookedAtOnce(t)
	})
}

// An order whose records are all due at once (three branches whose starts
// were lost; a hundred items whose requests were) is handled in one write
// per sweep, however many (past DynamoDB's 4 KB expression, its records are
// written whole): every start re-sent in one sweep, in one write.
func TestEveryDueRecordOfAnOrderInOneWrite(t *testing.T) {
	onEachEngine(t, func(t *testing.T, c *awsclient.Clients) {
		e := newSweepEnv(t, c, 0)
		ctx := context.Background()
		act := workflow.Action{Agent: "payment", Timeout: 20 * time.Second, MaxFailures: 3}
		branch := func(name string) workflow.Step {
			a := act
			a.Name = name
			return workflow.Step{Action: a, NoNeeds: true}
		}
		three := workflow.Definition{Name: "three", Version: "t1", PickupTimeout: time.Minute, Deadline: 24 * time.Hour,
			Steps: []workflow.Step{branch("a"), branch("b"), branch("c")}}
		items := three
		items.Name, items.Version, items.Steps = "items", "i1", []workflow.Step{branch("pack")}
		items.Steps[0].ForEach = "items"
		t0 := e.now.Add(-time.Hour)
		_, err := e.store.Submit(ctx, statestore.Submission{OrderID: "o-three", Order: "{}", Workflow: three, Now: t0})
		require.NoError(t, err)
		_, err = e.store.Submit(ctx, statestore.Submission{OrderID: "o-items", Order: "{}", Workflow: items,
			Items: map[int]int{0: workflow.MaxForEachItems}, Now: t0})
		require.NoError(t, err)
		version := func(id string) int {
			snap, err := e.store.Read(ctx, id)
			require.NoError(t, err)
			return snap.Version()
		}
		before := map[string]int{"o-three": version("o-three"), "o-items": version("o-items")}
		rep, err := e.supervisor(e.cfg).Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 3+workflow.MaxForEachItems, rep.Resent, "every lost start re-sent in one sweep")
		require.Equal(t, 1, version("o-three")-before["o-three"], "three records, one write")
		require.Equal(t, 1, version("o-items")-before["o-items"], "a hundred records, one write (its records written whole)")
		require.Zero(t, rep.Lost)
	})
}
