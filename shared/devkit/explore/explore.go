// Package explore drives the product's own handlers and its real state
// store through seeded interleavings of everything that can happen to a few
// orders at once (claims, completions, refusals, timeouts, hangs, crashes,
// cancels, events early and late, callbacks twice and before their call is
// answered, messages lost, repeated and delayed, several invocations at
// once, Supervisor sweeps, and the flow control: rate limits, calls in
// flight per key shared by the orders, pauses, a service's Retry-After),
// over small workflows of every shape, and checks that every order ends as
// it must and the invariants hold. Found, a failure names its seed, which
// replays it: FoundationDB's simulation and TigerBeetle's VOPR in
// miniature.
package explore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/devkit/shapes"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/topology"
)

// Options bound an exploration.
type Options struct {
	Seed    uint64        // the first run's; run i has Seed+i
	For     time.Duration // how long to go on starting runs
	Runs    int           // at most this many runs (0: no bound but For)
	Workers int           // runs at once, each on tables of its own
	Prefix  string        // of the workers' tables
	// Large makes every run large: one order whose forEach step has 30 to
	// 100 items, at the documented limits (accepted async items cancelled,
	// items timing out in one sweep, a held order going on with them all).
	Large bool
	// Plain keeps every payload inline (no run keeps its payloads in its
	// bucket): a regression seed replays the run it found.
	Plain bool
	// NoStoreFaults injects no state store faults (no run fails a read or a
	// write, or loses a write's answer): a regression seed found before
	// runs had them replays the run it found.
	NoStoreFaults bool
	// NoPointers has senders send every body itself, none by SQS Extended
	// Client pointer: a regression seed found before they did replays the
	// run it found (Submission's reads of pointers draw the bucket's
	// faults).
	NoPointers bool
	// RunTime bounds each run's real time, if longer than its own bound
	// (a minute; a large run's, four): a regression seed, replayed beside
	// others on a loaded machine, is judged, not cut short for its time.
	RunTime time.Duration
	// NoHostile sends every order, answer and event plain, none made of
	// what encoders change: a regression seed found before they were
	// replays the run it found.
	NoHostile bool
	// NoMigrate moves no order to another version of its workflow: a
	// regression seed found before runs moved orders replays the run it
	// found.
	NoMigrate bool
	// NoSearch declares no field searchable and acts on no order by a
	// query: a regression seed found before runs searched replays the run
	// it found.
	NoSearch bool
	// Changes are the ways a run's next version differs from its first
	// (nil: shapes.Changes): a regression seed found when there were
	// fewer replays with those (shapes.FirstChanges).
	Changes []string
}

// Report is what an exploration found.
type Report struct {
	Runs   int            // runs
	Orders int            // orders run (a run has one to four)
	Faulty int            // runs with faults injected
	Ends   map[string]int // orders by end state
	// Held counts the orders a step's failure held for their operator;
	// Decided, the operator's decisions taken on them, by action.
	Held    int
	Decided map[string]int
	// Drove counts what the runs drove beyond deliveries and answers: the
	// flow control, early callbacks, invocations at once, large scenarios.
	Drove map[string]int
	// LargestExpression and LargestItem are the largest update or condition
	// expression and the largest item any run wrote, in bytes.
	LargestExpression, LargestItem int
	Failures                       []Failure // runs that broke an invariant (the first few)
	Elapsed                        time.Duration
}

// Failure is one run that broke an invariant.
type Failure struct {
	Seed     uint64
	Large    bool
	Workflow string // the workflow and its agents' flow control
	Broken   []string
	Trace    []string // what the explorer did
	Logs     string   // the handlers' logs
}

func (f Failure) String() string {
	replay := fmt.Sprintf("-explore.seed %d -explore.runs 1", f.Seed)
	if f.Large {
		replay += " -explore.large"
	}
	return fmt.Sprintf("seed %d (replay: go test ./shared/devkit/explore -run TestExplore %s) broke:\n  %s\nworkflow %s\ntrace:\n  %s\nlogs:\n%s",
		f.Seed, replay, strings.Join(f.Broken, "\n  "), f.Workflow, strings.Join(f.Trace, "\n  "), f.Logs)
}

// Explore runs orders of generated shapes until opts.For passes (or
// opts.Runs are done), opts.Workers at once on db.
func Explore(ctx context.Context, db *dynamodb.Client, opts Options) (Report, error) {
	start := time.Now()
	rep := Report{Ends: map[string]int{}, Decided: map[string]int{}, Drove: map[string]int{}}
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, max(opts.Workers, 1))
	for k := range max(opts.Workers, 1) {
		wg.Go(func() {
			var topo topology.Topology
			var after time.Time // the worker's runs share its tables' flow items: each starts after the last ended
			for gen := 0; ctx.Err() == nil && time.Since(start) < opts.For; {
				if topo.Prefix == "" {
					var err error
					if topo, err = tables(ctx, db, fmt.Sprintf("%s%d", opts.Prefix, k), gen); err != nil {
						errs <- err
						return
					}
				}
				i := next.Add(1) - 1
				if opts.Runs > 0 && i >= int64(opts.Runs) {
					return
				}
				seed := opts.Seed + uint64(i)
				res, err := One(ctx, db, topo, seed, opts, after)
				after = res.until
				mu.Lock()
				rep.add(res)
				mu.Unlock()
				if err != nil {
					errs <- fmt.Errorf("seed %d: %w", seed, err)
					return
				}
				if len(res.failure.Broken) > 0 { // its orders may not have ended: the next run gets tables of its own
					topo, gen = topology.Topology{}, gen+1
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	rep.Elapsed = time.Since(start)
	return rep, <-errs
}

// tables are the tables of a worker's runs (of its gen-th generation: a
// failed run's orders are left to themselves), made if need be.
func tables(ctx context.Context, db *dynamodb.Client, prefix string, gen int) (topology.Topology, error) {
	if gen > 0 {
		prefix += fmt.Sprintf("g%d", gen)
	}
	topo := topology.Default(prefix, shapes.Defaults().Agents...)
	topo.DeadlineShards = 1
	return topo, provision.EnsureTables(ctx, db, topo)
}

// add counts one run.
func (r *Report) add(res result) {
	r.Runs++
	r.Orders += len(res.ends)
	if res.faulty {
		r.Faulty++
	}
	for _, e := range res.ends {
		r.Ends[e]++
	}
	r.Held += res.held
	for a, n := range res.decided {
		r.Decided[a] += n
	}
	for a, n := range res.drove {
		r.Drove[a] += n
	}
	r.LargestExpression, r.LargestItem = max(r.LargestExpression, res.largest.expression), max(r.LargestItem, res.largest.item)
	if len(res.failure.Broken) > 0 && len(r.Failures) < 3 {
		r.Failures = append(r.Failures, res.failure)
	}
}

// result is what one run found.
type result struct {
	ends    []string // its orders' end states
	faulty  bool
	failure Failure
	held    int
	decided map[string]int
	drove   map[string]int
	until   time.Time // its clock at its end
	largest largest
}

// One runs the orders seed names on db (tables of topo), its clock starting
// after after: its workflow, its orders, its agents' flow control, whether
// faults are injected, whether its payloads are kept in its bucket, and
// every choice follow from the seed (and opts' Large, Plain,
// NoStoreFaults, NoPointers and NoHostile).
func One(ctx context.Context, db statestore.API, topo topology.Topology, seed uint64, opts Options, after time.Time) (result, error) {
	large := opts.Large
	p := newPlan(seed, large, opts.Plain, !opts.NoStoreFaults, !opts.NoHostile)
	p.searchable(!opts.NoSearch)
	p.evolve(!opts.NoMigrate, opts.Changes)
	p.pointers = p.pointers && !opts.NoPointers
	p.runTime = opts.RunTime
	w, err := newWorld(p, topo, db, after)
	if err != nil {
		return result{until: after}, fmt.Errorf("workflow %s: %w", p.def.Name, err)
	}
	err = w.run(ctx)
	res := result{faulty: p.faulty, held: w.heldOrders(), decided: w.decided, drove: w.drove, until: w.clock(), largest: w.largest}
	broken := w.check(ctx)
	for _, o := range w.orders {
		res.ends = append(res.ends, string(o.end.State))
	}
	if err != nil {
		broken = append([]string{err.Error()}, broken...)
	}
	if len(broken) > 0 {
		res.failure = Failure{Seed: seed, Large: large, Workflow: w.describe(), Broken: broken, Trace: w.traced(), Logs: w.logs.String()}
	}
	return res, nil
}

// describe is the workflow's steps and its agents' flow control, one line.
func (w *World) describe() string {
	d := w.def
	var parts []string
	for i, st := range d.Steps {
		var needs []string
		for _, n := range d.Needs(i) {
			needs = append(needs, d.Steps[n].Name)
		}
		p := fmt.Sprintf("%s(%s %s", st.Name, st.Kind(), st.Agent)
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
	var flows []string
	for _, a := range slices.Sorted(maps.Keys(w.flows)) {
		flows = append(flows, a+": "+w.flows[a].String())
	}
	var orders []string
	for _, o := range w.orders {
		orders = append(orders, fmt.Sprintf("%s of %s, %d items", o.id, o.customer, o.items))
	}
	return fmt.Sprintf("%s: %s; agents [%s]; orders [%s]%s", d.Name, strings.Join(parts, "; "), strings.Join(flows, "; "),
		strings.Join(orders, "; "), w.scenarioNote())
}
