package chaos

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/workflow"
)

// BulkFigures are what the run's operator did on orders found by a query
// (Plan.Bulk), as sasctl does with a query: operator.Bulk over
// operator.Operator.Searched, paced.
type BulkFigures struct {
	Runs []BulkRun `json:"runs"`
	// Errors counts the bulk actions an error stopped (not a refusal), by
	// their error.
	Errors map[string]int `json:"errors,omitempty"`
}

// BulkRun is one bulk action's report, with the query it acted on.
type BulkRun struct {
	Query   string         `json:"query"`
	Action  string         `json:"action"`
	Listed  int            `json:"listed"`
	Done    int            `json:"done"`
	Already int            `json:"already"`
	Refused int            `json:"refused"`
	Changed int            `json:"changed"`
	Left    int            `json:"left"`
	Why     map[string]int `json:"why,omitempty"`
	Took    time.Duration  `json:"tookNanos"`
	// Acted are the orders it acted on (done).
	Acted []string `json:"acted,omitempty"`
}

// The bulk actions the run's operator takes, in turn, and what each acts
// on: a sample of the orders of a value cancelled (those not ended; the
// others refused), the Failed ones resubmitted, and, with flow control,
// the held ones retried or undone.
const (
	bulkCancel   = "cancel"
	bulkResubmit = "resubmit"
	bulkRetry    = "retry"
	bulkUndo     = "undo"
)

// bulkRate is the bulk actions' pace, orders a second; bulkSample how
// many orders a bulk cancel cancels at most (BulkOptions.Limit).
const (
	bulkRate   = 10
	bulkSample = 3
)

// bulkKinds are the bulk actions of the plan, in the order it takes them.
func (p Plan) bulkKinds() []string {
	if p.flowOn() {
		return []string{bulkCancel, bulkRetry, bulkResubmit, bulkUndo}
	}
	return []string{bulkCancel, bulkResubmit}
}

// bulker is the run's operator acting by query: before each action, a
// search checked against what is stored; each action's report judged.
type bulker struct {
	stack    *localrun.Stack
	plan     Plan
	op       *operator.Operator
	declared map[string][]string // the fields each workflow declares searchable
	expected map[searchKey][]string
	wg       sync.WaitGroup
	turn     sync.Mutex    // one bulk action at a time
	drained  chan struct{} // closed when every order sent has ended: look no longer (await)
	drain    sync.Once

	mu       sync.Mutex
	sent     []string // the orders sent so far that carry a searchable value
	total    int      // the orders sent so far
	started  int      // bulk actions started
	fig      BulkFigures
	midRun   int      // searches made before a bulk action
	unfound  []string // what those found wrong (checkSearch)
	bad      []string // reports that do not add up (bulkInconsistent)
	reopened bool     // an ended order was put to work again (resubmitted)
}

// newBulker is the bulk operator of a run on stack over orders ids: an
// operator as sasctl makes one (the plan's pickup timeout its pickup).
func newBulker(stack *localrun.Stack, p Plan, ids []string) *bulker {
	op := operator.New(stack.Deployment.Clients, stack.Topology()).WithRetention(stack.Deployment.Config.Retention())
	if p.Settings.PickupTimeout > 0 {
		op.PickupTimeout = p.Settings.PickupTimeout
	}
	declared := p.searchedFields()
	return &bulker{stack: stack, plan: p, op: op, declared: declared, expected: p.searchExpected(ids, declared),
		fig: BulkFigures{Errors: map[string]int{}}, drained: make(chan struct{})}
}

// schedule notes the orders sent, and starts each bulk action as its share
// of the orders has been sent (the k-th of n after k/(n+1) of them), a few
// seconds later: orders stored, some failed or held by then.
func (b *bulker) schedule(ctx context.Context, ids []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		if len(b.declared[b.plan.workflowOf(id)]) > 0 {
			b.sent = append(b.sent, id)
		}
	}
	b.total += len(ids)
	for b.started < b.plan.Bulk && b.total >= (b.started+1)*b.plan.Orders/(b.plan.Bulk+1) {
		n := b.started
		b.started++
		at := 2*time.Second + time.Duration(remotesim.Mix(b.plan.Seed, "bulk-at", strconv.Itoa(n))*float64(4*time.Second))
		b.wg.Go(func() {
			if sleepCtx(ctx, at) {
				b.turn.Lock()
				defer b.turn.Unlock()
				b.act(ctx, n)
			}
		})
	}
}

// wait waits for the bulk actions started; the orders have all ended (or
// the run is cut short): an action about to pick a value picks it now.
func (b *bulker) wait() {
	b.drain.Do(func() { close(b.drained) })
	b.wg.Wait()
}

// reopenedAny reports whether a bulk action put an ended order to work
// again (resubmitted).
func (b *bulker) reopenedAny() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reopened
}

// awaitEnds waits until every order of ids has ended again (or ctx ends).
func awaitEnds(ctx context.Context, stack *localrun.Stack, ids []string) error {
	for {
		c, _, err := stack.Count(ctx, ids)
		if err == nil && c.Ended() == len(ids) {
			return nil
		}
		if !sleepCtx(ctx, 2*time.Second) {
			return fmt.Errorf("orders resubmitted by a bulk action not all ended: %w", ctx.Err())
		}
	}
}

// act takes the n-th bulk action: it picks a value of an order in the
// state the action takes, checks the search for it against what is
// stored, then runs the action on what the search finds, and judges its
// report.
func (b *bulker) act(ctx context.Context, n int) {
	kinds := b.plan.bulkKinds()
	kind := kinds[n%len(kinds)]
	k, ok := b.await(ctx, kind, n)
	if !ok {
		return
	}
	b.checkMidRun(ctx, k)
	s := operator.Search{Field: k.Field, Value: k.Value}
	opts := operator.BulkOptions{Rate: bulkRate, By: "chaos"}
	var act operator.Action
	switch kind {
	case bulkCancel:
		act, opts.Limit = b.op.CancelAction("chaos: a bulk cancel"), bulkSample
	case bulkResubmit:
		s.State, act = workflow.Failed, b.op.ResubmitAction("")
	case bulkRetry:
		s.State, act = workflow.Held, b.op.HeldAction(outcome.HoldRetry, "", nil)
	case bulkUndo:
		s.State, act = workflow.Held, b.op.HeldAction(outcome.HoldUndo, "", nil)
	}
	start := time.Now()
	rep, err := b.op.Bulk(ctx, b.op.Searched(s), act, opts, nil)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.fig.Errors[reasonShape(err.Error())]++
		return // its report is the one so far: not judged
	}
	b.bad = append(b.bad, bulkInconsistent(rep, k, b.expected[k])...)
	run := BulkRun{Query: queryText(s, k), Action: rep.Action, Listed: rep.Listed, Done: rep.Done, Already: rep.Already,
		Refused: rep.Refused, Changed: rep.Changed, Left: rep.Left, Why: rep.Why, Took: time.Since(start)}
	for _, r := range rep.Orders {
		if r.Outcome == operator.BulkDone {
			run.Acted = append(run.Acted, r.OrderID)
		}
	}
	b.fig.Runs = append(b.fig.Runs, run)
	if kind == bulkResubmit && rep.Done > 0 {
		b.reopened = true
	}
}

// queryText is the query s as sasctl's flags say it.
func queryText(s operator.Search, k searchKey) string {
	q := "--field " + k.String()
	if s.State != "" {
		q = "--state " + string(s.State) + " " + q
	}
	return q
}

// pickFor is how long a bulk action looks for an order in the state it
// takes (a hold lasts seconds, and the flow's operator decides most):
// then it acts on the value it has.
const pickFor = 20 * time.Second

// await is the value the n-th bulk action acts on (pick), looked for each
// second until an order in the state the action takes carries one, for
// pickFor at most, or until the orders have all ended.
func (b *bulker) await(ctx context.Context, kind string, n int) (searchKey, bool) {
	for end := time.Now().Add(pickFor); ; {
		k, fits, ok := b.pick(ctx, kind, n)
		if fits || time.Now().After(end) {
			return k, ok
		}
		select {
		case <-ctx.Done():
			return k, ok
		case <-b.drained:
			return k, ok
		case <-time.After(time.Second):
		}
	}
}

// pick is the value the n-th bulk action acts on: of one of the orders
// sent that carry one (in an order the seed chooses), in the state the
// action takes if one is (not ended, Failed, Held: fits), else of the
// first; a value the judge searches at the end (expected), so that its
// orders are known.
func (b *bulker) pick(ctx context.Context, kind string, n int) (k searchKey, fits, ok bool) {
	b.mu.Lock()
	cands := slices.Clone(b.sent)
	b.mu.Unlock()
	mix := func(id string) float64 { return remotesim.Mix(b.plan.Seed, "bulk-pick", strconv.Itoa(n), id) }
	slices.SortFunc(cands, func(x, y string) int { return compareFloat(mix(x), mix(y)) })
	cands = cands[:min(len(cands), 100)]
	tasks, err := b.stack.Store.Tasks(ctx, cands)
	if err != nil {
		return searchKey{}, false, false
	}
	takes := func(st workflow.State) bool {
		switch kind {
		case bulkCancel:
			return !st.Ended()
		case bulkResubmit:
			return st == workflow.Failed
		}
		return st == workflow.Held
	}
	var first searchKey
	for _, id := range cands {
		for _, f := range b.declared[b.plan.workflowOf(id)] {
			v, ok := b.plan.carried(id, f)
			k := searchKey{f, v}
			if _, searched := b.expected[k]; !ok || !searched {
				continue
			}
			if t, stored := tasks[id]; stored && takes(t.State) {
				return k, true, true
			}
			if first == (searchKey{}) {
				first = k
			}
		}
	}
	return first, false, first != searchKey{}
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkMidRun searches k while the orders run: every order of the value
// stored by then (read first) must be found, and none that does not carry
// it (one sent, not yet stored, may be).
func (b *bulker) checkMidRun(ctx context.Context, k searchKey) {
	tasks, err := b.stack.Store.Tasks(ctx, b.expected[k])
	if err != nil {
		return
	}
	found, err := searchIDs(ctx, b.op, operator.Search{Field: k.Field, Value: k.Value})
	if err != nil {
		return
	}
	bad := checkFound(k, slices.Sorted(maps.Keys(tasks)), b.expected[k], found)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.midRun++
	for _, why := range bad {
		b.unfound = append(b.unfound, "while the orders ran: "+why)
	}
}

// bulkInconsistent says how a bulk action's report on the orders of search
// k does not add up (operator.BulkReport.Check: its counts against the
// orders listed, an order acted on twice, its reasons), or lists an order
// that does not carry k's value (expected: those that do).
func bulkInconsistent(rep operator.BulkReport, k searchKey, expected []string) []string {
	bad := rep.Check()
	carries := map[string]bool{}
	for _, id := range expected {
		carries[id] = true
	}
	for _, r := range rep.Orders {
		if !carries[r.OrderID] {
			bad = append(bad, fmt.Sprintf("order %s listed, which does not carry the value", r.OrderID))
		}
	}
	for i, why := range bad {
		bad[i] = fmt.Sprintf("%s of %s: %s", rep.Action, k, why)
	}
	return bad
}

// figures are the bulker's figures so far.
func (b *bulker) figures() *BulkFigures {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.fig
	f.Runs, f.Errors = slices.Clone(f.Runs), maps.Clone(f.Errors)
	return &f
}
