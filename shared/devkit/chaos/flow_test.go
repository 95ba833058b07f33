package chaos

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// flowPlan is a plan with flow control for the unit tests.
func flowPlan() Plan {
	p := DefaultPlan(7, 400)
	p.Flow = DefaultFlow()
	return p
}

// The flow shapes make one deployment with the others: each flow agent is
// declared alike wherever it is called, with the seed's limits; some of
// their steps hold on failure.
func TestFlowShapesJoinTheRunsWorkflows(t *testing.T) {
	p := flowPlan()
	set := p.workflows() // MustSet panics on an agent declared differently
	rate := p.flowRate()
	require.GreaterOrEqual(t, rate.Calls, 2)
	require.LessOrEqual(t, rate.Calls, 5)
	require.GreaterOrEqual(t, rate.Burst, 1)
	require.LessOrEqual(t, rate.Burst, 4)
	require.Contains(t, []int{1, 2}, p.flowInFlight())
	holds := 0
	for _, d := range set.Definitions() {
		if !strings.HasPrefix(d.Name, "flow") {
			continue
		}
		for _, st := range d.Steps {
			if st.HoldFor > 0 {
				require.Equal(t, p.Flow.HoldFor, st.HoldFor)
				holds++
			}
		}
	}
	require.Positive(t, holds)
	require.NotEmpty(t, p.rateLimited())
	require.NotEmpty(t, p.keyed())
	for _, a := range p.rateLimited() {
		spec, ok := set.Agent(a)
		require.True(t, ok, a)
		require.Equal(t, rate, spec.RateLimit)
	}
	for _, a := range p.keyed() {
		spec, _ := set.Agent(a)
		require.Equal(t, p.flowInFlight(), spec.PerKey.InFlight)
	}
	require.Len(t, DefaultPlan(7, 400).workflows().Definitions(), 17, "no flow shapes without Flow: order, waits, parallel, large, limit, and 12 shapes")
}

// A share of the orders runs on the flow shapes; their customers are a few
// hot ones, each with many orders, and many cold ones.
func TestFlowOrdersHaveHotAndColdCustomers(t *testing.T) {
	p := flowPlan()
	orders, customers := 0, map[string]int{}
	for i := range 2000 {
		id := "o-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if p.waits(id) || !p.flowOrder(id) {
			continue
		}
		orders++
		customers[p.customerOf(id)]++
		require.True(t, strings.HasPrefix(p.flowShape(id), "flow"))
	}
	require.InDelta(t, 0.3*0.7*2000, orders, 80, "a share of the orders not waiting")
	hot := 0
	for c, n := range customers {
		if strings.HasPrefix(c, "hot-") {
			hot += n
			require.Greater(t, n, 20, c)
		} else {
			require.Equal(t, 1, n, c)
		}
	}
	require.Len(t, customers, orders-hot+p.Flow.HotKeys)
	require.InDelta(t, p.Flow.Hot, float64(hot)/float64(orders), 0.06)
}

// The storm answers 429 on one flow agent's service, its undo actions too,
// and nowhere else.
func TestTheStormIsOneServices(t *testing.T) {
	p := flowPlan()
	start := time.Now()
	faults := p.faults(start)
	w := remotesim.Window{From: start.Add(3 * time.Second), To: start.Add(7 * time.Second)}
	stormed := p.stormFaults(faults, w)
	require.Greater(t, len(stormed), 1, "the service and its undo actions")
	for k, f := range stormed {
		require.True(t, k == p.stormAgent() || strings.HasPrefix(k, p.stormAgent()+"/"), k)
		require.Equal(t, []remotesim.Window{w}, f.Throttled, k)
		require.Equal(t, time.Second, f.RetryAfter)
		want := faults[k]
		want.Throttled, want.RetryAfter = f.Throttled, f.RetryAfter
		require.Equal(t, want, f, "its other knobs kept")
	}
	for k, f := range faults {
		require.Empty(t, f.Throttled, k)
	}
	require.Equal(t, 150*time.Millisecond, faults["keyed"].Latency)
	require.Equal(t, p.Flow.Refuse, faults["keyed"].PermanentRate, "the flow agents' actions refused for good")
	require.Contains(t, p.calledServices(), p.stormAgent())
}

// most counts the calls in the busiest span shorter than the period.
func TestMostCountsTheBusiestSpan(t *testing.T) {
	t0 := time.Now()
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	require.Equal(t, 0, most(nil, time.Second))
	require.Equal(t, 1, most(at(0, 1000, 2000), time.Second), "a call a second after another is not in its span")
	require.Equal(t, 4, most(at(0, 200, 400, 1000, 1100), time.Second))
	require.Equal(t, 4, most(at(0, 10, 20, 999, 1500), time.Second))
}

// The backlog's span counts the sampled intervals with enough requests
// ready at both ends, outside pauses and storms, and the calls in them.
func TestBacklogCountsCallsWhileRequestsWaited(t *testing.T) {
	t0 := time.Now()
	s := func(sec float64, n int) sample {
		return sample{At: t0.Add(time.Duration(sec * float64(time.Second))), Ready: n}
	}
	samples := []sample{s(0, 9), s(1, 9), s(2, 9), s(3, 2), s(4, 9), s(5, 9), s(9, 9), s(10, 9), s(11, 9)}
	var calls []time.Time
	for ms := 0; ms < 12000; ms += 250 { // four a second throughout
		calls = append(calls, t0.Add(time.Duration(ms)*time.Millisecond))
	}
	quiet := []remotesim.Window{{From: t0.Add(10500 * time.Millisecond), To: t0.Add(20 * time.Second)}}
	span, n := backlog(samples, calls, quiet, 5)
	// [0,1) [1,2) [4,5) [9,10): [2,3) and [3,4) have 2 waiting at an end,
	// [5,9) is too long a gap, [10,11) meets the quiet span.
	require.Equal(t, 4*time.Second, span)
	require.Equal(t, 16, n)
}

// A backlog whose store took longer a write than half the limit's interval
// is left out of the judgement, as a pause is: a turn is one write, and a
// 4/s limit's agent whose writes take 280 ms takes a turn each 300 ms
// (83%), which the store, not the limit, decided. A store that answers in
// 3 ms is judged: the same calls are short of the rate.
func TestASlowStoresBacklogIsNotJudged(t *testing.T) {
	t0 := time.Now()
	var calls []time.Time
	for ms := 0; ms < 40000; ms += 300 {
		calls = append(calls, t0.Add(time.Duration(ms)*time.Millisecond))
	}
	limit := workflow.Rate{Calls: 4, Per: time.Second, Burst: 3}
	judge := func(rtt time.Duration) RateFigure {
		var samples []sample
		for k := range 80 {
			samples = append(samples, sample{At: t0.Add(time.Duration(k) * 500 * time.Millisecond), Ready: 50, StoreRTT: rtt})
		}
		var rf RateFigure
		rf.judge(samples, calls, nil, limit)
		return rf
	}
	slow := judge(280 * time.Millisecond)
	require.False(t, slow.short(), "%+v", slow)
	require.Zero(t, slow.Backlog)
	require.Equal(t, 79*500*time.Millisecond, slow.SlowStore)
	calm := judge(3 * time.Millisecond)
	require.True(t, calm.short(), "%+v", calm)
	require.Zero(t, calm.SlowStore)
	require.InDelta(t, 0.83, calm.Share, 0.02)
	failed := judge(0)
	require.True(t, failed.short(), "a write that failed says nothing of the store's pace")
}

// A rate limit is short of its rate when it delivered less than 90% of it
// over a backlog of at least 30 s; a shorter backlog is reported, not
// judged.
func TestARateIsShortOnlyOverALongEnoughBacklog(t *testing.T) {
	for _, c := range []struct {
		backlog time.Duration
		share   float64
		short   bool
	}{
		{40 * time.Second, 0.6, true},
		{40 * time.Second, 0.95, false},
		{MinBacklog, 0.89, true},
		{MinBacklog - time.Second, 0.1, false},
		{0, 0, false},
	} {
		require.Equal(t, c.short, RateFigure{Backlog: c.backlog, Share: c.share}.short(), "%+v", c)
	}
}

// Entries name their order; a waiter is live, a hold until its end.
func TestSlotEntriesNameTheirOrder(t *testing.T) {
	now := time.Now()
	ref := workflow.Ref{Index: 2, Item: 1}
	k := keyline.Slots{Holders: map[string]time.Time{keyline.Holder("o-1", ref, 1, 3): now.Add(time.Second)},
		Reserved: map[string]time.Time{keyline.WaiterID("o-2", ref, 1): now.Add(-time.Second)},
		Waiters:  []keyline.Waiter{{ID: keyline.WaiterID("o-3", ref, 2)}}}
	live := map[string]bool{}
	for _, e := range entries("keyed", "hot-1", k) {
		live[e.order()] = e.live(now)
	}
	require.Equal(t, map[string]bool{"o-1": true, "o-2": false, "o-3": true}, live)
}

// A skipped held record is done though its service never applied it: no
// violation; undone when its order is, as a completed one is.
func TestASkippedRecordIsDoneWithoutItsEffect(t *testing.T) {
	def := workflow.Orders(workflow.Settings{})
	task := func(id string, s workflow.State) statestore.Task {
		return statestore.Task{OrderID: id, Workflow: "order", State: s, Round: 1}
	}
	step := func(id string, i int) statestore.Step {
		return statestore.Step{Rec: workflow.Rec{Ref: workflow.Ref{Index: i},
			Action: workflow.Action{Name: def.Steps[i].Name, MaxFailures: 3}, State: workflow.Processed, Attempt: 1},
			OrderOf: statestore.OrderOf{OrderID: id}}
	}
	effect := func(id, action string) remotesim.Effect {
		return remotesim.Effect{OrderID: id, Action: action, Key: id + "/" + action}
	}
	ids := []string{"o-done", "o-undone", "o-unskipped"}
	tasks := map[string]statestore.Task{"o-done": task("o-done", workflow.Processed), "o-undone": task("o-undone", workflow.Failed),
		"o-unskipped": task("o-unskipped", workflow.Processed)}
	records := map[string][]statestore.Step{}
	for _, id := range ids {
		records[id] = []statestore.Step{step(id, 0), step(id, 1), step(id, 2)}
	}
	records["o-undone"] = records["o-undone"][:2]
	ledger := []remotesim.Effect{effect("o-done", "reserve-inventory"), effect("o-done", "create-shipment"),
		effect("o-undone", "reserve-inventory"), effect("o-undone", "release-inventory"), effect("o-undone", "refund-payment"),
		effect("o-unskipped", "reserve-inventory"), effect("o-unskipped", "create-shipment")}
	skipped := map[string]bool{"o-done charge-payment": true, "o-undone charge-payment": true}
	v, _ := checkSkipped(workflow.MustSet(def), ids, tasks, records, ledger, skipped)
	require.Equal(t, []string{"o-unskipped: Processed but charge-payment applied 0 times, undone 0 times"}, v.Inconsistent)
}

// The flow checks catch each broken invariant: a second over a limit and
// its burst, a slot kept for an ended order (not one behind a lost
// hand-off), a held order that did not end.
func TestCheckFlowFindsEachBrokenInvariant(t *testing.T) {
	p := flowPlan()
	p.Flow.Rate = workflow.Rate{Calls: 2, Per: time.Second, Burst: 1}
	sim := remotesim.New(1)
	sim.LogCalls("rated")
	srv, err := sim.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer srv.Close()
	for i := range 5 { // five calls in well under a second: at most 2 + 1, and one for clock edges
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/services/rated/s0", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", fmt.Sprintf("o-%d/s0", i))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	inj := NewInjector(p)
	inj.noteLostLine("agent-keyed", `{"orderId":"o-9","step":1,"slot":"hot-1","round":1}`)
	later := time.Now().Add(time.Minute)
	f := &flowRun{plan: p, held: map[string]bool{"o-held": true, "o-done": true}, left: keysLeft{keys: 2, left: []slotEntry{
		{agent: "keyed", key: "hot-0", kind: "holds a slot", id: keyline.Holder("o-1", workflow.Ref{Index: 1}, 1, 1), until: later},
		{agent: "keyed", key: "hot-1", kind: "waiter", id: keyline.WaiterID("o-2", workflow.Ref{Index: 1}, 1)},
	}}}
	tasks := map[string]statestore.Task{"o-held": {State: workflow.Held}, "o-done": {State: workflow.Processed}}
	var r Result
	r.checkFlow(f, sim, inj, tasks)
	require.Len(t, r.Violations.RateExceeded, 1)
	require.Contains(t, r.Violations.RateExceeded[0], "agent rated: 5 calls within 1s (limit 2/s: at most 4")
	require.Len(t, r.Violations.SlotsLeft, 1)
	require.True(t, strings.HasPrefix(r.Violations.SlotsLeft[0], "o-1: agent keyed key \"hot-0\""), r.Violations.SlotsLeft[0])
	require.Equal(t, 1, r.Flow.LostLine, "the waiter behind a lost hand-off is counted apart")
	require.Equal(t, []string{"o-held: Held"}, r.Violations.HeldNotEnded)
	require.Equal(t, 3, r.Violations.Count())
}
