// Package explore drives the product's own handlers and its real state
// store through seeded interleavings of everything that can happen to an
// order (claims, completions, refusals, timeouts, hangs, crashes, cancels,
// events early and late, callbacks twice, messages lost, repeated and
// delayed, Supervisor sweeps), over small workflows of every shape, and
// checks that every order ends and the invariants hold. Found, a failure
// names its seed, which replays it: FoundationDB's simulation and
// TigerBeetle's VOPR in miniature.
package explore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// Options bound an exploration.
type Options struct {
	Seed    uint64        // the first run's; run i has Seed+i
	For     time.Duration // how long to go on starting runs
	Runs    int           // at most this many runs (0: no bound but For)
	Workers int           // runs at once, each on tables of its own
	Prefix  string        // of the workers' tables
}

// Report is what an exploration found.
type Report struct {
	Runs   int            // orders run
	Faulty int            // of them, with faults injected
	Ends   map[string]int // by end state
	// Held counts the orders a step's failure held for their operator;
	// Decided, the operator's decisions taken on them, by action.
	Held     int
	Decided  map[string]int
	Failures []Failure // runs that broke an invariant (the first few)
	Elapsed  time.Duration
}

// Failure is one run that broke an invariant.
type Failure struct {
	Seed     uint64
	Workflow string // the workflow, as JSON
	Broken   []string
	Trace    []string // what the explorer did
	Logs     string   // the handlers' logs
}

func (f Failure) String() string {
	return fmt.Sprintf("seed %d broke:\n  %s\nworkflow %s\ntrace:\n  %s\nlogs:\n%s", f.Seed, strings.Join(f.Broken, "\n  "), f.Workflow,
		strings.Join(f.Trace, "\n  "), f.Logs)
}

// Explore runs orders of generated shapes until opts.For passes (or
// opts.Runs are done), opts.Workers at once on db.
func Explore(ctx context.Context, db *dynamodb.Client, opts Options) (Report, error) {
	start := time.Now()
	rep := Report{Ends: map[string]int{}, Decided: map[string]int{}}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, opts.Workers)
	for k := range max(opts.Workers, 1) {
		wg.Go(func() {
			topo := topology.Default(fmt.Sprintf("%s%d", opts.Prefix, k), shapes.Defaults().Agents...)
			topo.DeadlineShards = 1
			if err := provision.EnsureTables(ctx, db, topo); err != nil {
				errs <- err
				return
			}
			store := statestore.New(db, topo.OrdersTable(), topo.StateTable(), 1)
			for ctx.Err() == nil && time.Since(start) < opts.For {
				i := next.Add(1) - 1
				if opts.Runs > 0 && i >= int64(opts.Runs) {
					return
				}
				seed := opts.Seed + uint64(i)
				res, err := One(ctx, store, topo, seed)
				mu.Lock()
				rep.Runs++
				if res.faulty {
					rep.Faulty++
				}
				rep.Ends[res.end]++
				if res.held {
					rep.Held++
				}
				for a, n := range res.decided {
					rep.Decided[a] += n
				}
				if len(res.failure.Broken) > 0 && len(rep.Failures) < 3 {
					rep.Failures = append(rep.Failures, res.failure)
				}
				mu.Unlock()
				if err != nil {
					errs <- fmt.Errorf("seed %d: %w", seed, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	rep.Elapsed = time.Since(start)
	return rep, <-errs
}

type result struct {
	end     string
	faulty  bool
	failure Failure
	held    bool
	decided map[string]int
}

// One runs the order seed names on store (tables of topo): its workflow,
// its items, whether faults are injected and every choice follow from the
// seed.
func One(ctx context.Context, store *statestore.Store, topo topology.Topology, seed uint64) (result, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5a5))
	o := shapes.Defaults()
	var d workflow.Definition
	if rng.IntN(6) == 0 {
		d = shapes.Branches(o)
	} else {
		d = shapes.Random(rng, fmt.Sprintf("shape%d", seed), o)
	}
	if rng.IntN(3) == 0 { // steps that hold their order for the operator on failure
		for i, st := range d.Steps {
			if st.Kind() == workflow.KindAgent && rng.IntN(2) == 0 {
				d.Steps[i].HoldFor = time.Duration(1+rng.IntN(30)) * time.Minute
			}
		}
	}
	items := 1 + rng.IntN(3)
	faulty := rng.IntN(4) > 0
	w, err := newWorld(d, fmt.Sprintf("x%d", seed), items, topo, store, rng, faulty)
	if err != nil {
		return result{}, fmt.Errorf("workflow %s: %w", d.Name, err)
	}
	task, err := w.run(ctx)
	res := result{end: string(task.State), faulty: faulty, held: w.wasHeld(), decided: w.decided}
	broken := w.check(ctx, task)
	if err != nil {
		broken = append([]string{err.Error()}, broken...)
	}
	if len(broken) > 0 {
		res.failure = Failure{Seed: seed, Workflow: describe(d), Broken: broken, Trace: w.trace, Logs: w.logs.String()}
	}
	return res, nil
}

// describe is the workflow's steps, one line.
func describe(d workflow.Definition) string {
	var parts []string
	for i, st := range d.Steps {
		var needs []string
		for _, n := range d.Needs(i) {
			needs = append(needs, d.Steps[n].Name)
		}
		p := fmt.Sprintf("%s(%s", st.Name, st.Kind())
		if st.Async {
			p += " async"
		}
		if st.ForEach != "" {
			p += " each"
		}
		if st.Undo != nil {
			p += " undo"
		}
		if st.HoldFor > 0 {
			p += " hold " + st.HoldFor.String()
		}
		parts = append(parts, fmt.Sprintf("%s) needs [%s]", p, strings.Join(needs, ",")))
	}
	return d.Name + ": " + strings.Join(parts, "; ")
}
