package chaos

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// FlowFigures are what a run's flow control did, and how its limits held.
type FlowFigures struct {
	Rates     []RateFigure   `json:"rates"`
	Pauses    int            `json:"pauses"`               // an agent paused and resumed by the pauser
	Storm     string         `json:"storm,omitempty"`      // the service that answered 429s
	Throttled int            `json:"throttled"`            // calls it answered 429 with Retry-After
	Held      int            `json:"held"`                 // orders seen held (onFailure: hold)
	Holds     int            `json:"holds"`                // holds seen (a retried order may be held again)
	Decided   map[string]int `json:"decided"`              // the operator's decisions taken, by action
	ToEnd     int            `json:"leftToHoldEnd"`        // holds left to end by themselves (undone then)
	TooLate   int            `json:"decisionsTooLate"`     // decisions the order no longer took (its hold ended, or it was cancelled)
	Failed    int            `json:"decisionsFailed"`      // decisions that failed otherwise
	Keys      int            `json:"keysChecked"`          // key items read at the end, agents times customers
	Lapsed    int            `json:"lapsedEntries"`        // holds and reservations of ended orders left, their time passed (a crashed Agent's)
	LostLine  int            `json:"leftAfterLostHandOff"` // entries of ended orders left in the line of a key whose line request was dropped
	Settled   time.Duration  `json:"settledNanos"`         // how long the key items took to let every ended order go
	// InLine are the calls given back to wait in their key's line, LineFull
	// those given back with no place in it (a full line, or a request too
	// large to queue).
	InLine   int `json:"inLine"`
	LineFull int `json:"lineFull"`
}

// RateFigure is how a rate-limited agent's service saw its calls.
type RateFigure struct {
	Agent string `json:"agent"`
	Limit string `json:"limit"`
	Calls int    `json:"calls"` // the calls its service received
	// Most is the most calls in any span of the limit's period; Bound the
	// most the check allows at the service: what the limit admits into a
	// period (workflow.Rate.Most: the limit, its burst less one), and two
	// calls for a request's latency and clock edges (a turn is taken
	// before its request travels).
	Most  int `json:"most"`
	Bound int `json:"bound"`
	// Backlog is how long at least two periods' calls (the limit and its
	// burst, twice: an injected crash or delay keeps a few messages in
	// flight, not called) were ready on its request queue (sample), pauses,
	// storms and a slow store (SlowStore) left out; BacklogCalls the calls its service received
	// meanwhile; Delivered their rate a second, Share that rate over the
	// limit's.
	Backlog      time.Duration `json:"backlogNanos"`
	BacklogCalls int           `json:"backlogCalls"`
	Delivered    float64       `json:"delivered"`
	Share        float64       `json:"share"`
	// SlowStore is the backlog left out because a write to the state
	// table took more than half the limit's interval then (slowStore): a
	// turn is a write, and the store set the pace.
	SlowStore time.Duration `json:"slowStoreNanos"`
}

// short reports whether the limit delivered less than MinDelivered of its
// rate over a backlog of at least MinBacklog.
func (rf RateFigure) short() bool { return rf.Backlog >= MinBacklog && rf.Share < MinDelivered }

// slotEntry is a holder, a reservation or a waiter in a key's item.
type slotEntry struct {
	agent, key, kind, id string
	until                time.Time // a holder's or reservation's end (zero: a waiter)
}

// order is the order the entry's call is of (keyline.WaiterID: ORDER/…).
func (e slotEntry) order() string {
	if i := strings.LastIndexByte(e.id, '/'); i >= 0 {
		return e.id[:i]
	}
	return e.id
}

// live reports whether the entry still keeps a slot or a place at now.
func (e slotEntry) live(now time.Time) bool { return e.kind == "waiter" || e.until.After(now) }

func (e slotEntry) String() string {
	if e.kind == "waiter" {
		return fmt.Sprintf("agent %s key %q: %s waits in line", e.agent, e.key, e.id)
	}
	return fmt.Sprintf("agent %s key %q: %s %s until %s", e.agent, e.key, e.id, e.kind, e.until.Format(time.RFC3339Nano))
}

// entries are a key's holders, reservations and waiters.
func entries(agent, key string, k keyline.Slots) []slotEntry {
	var out []slotEntry
	for id, until := range k.Holders {
		out = append(out, slotEntry{agent, key, "holds a slot", id, until})
	}
	for id, until := range k.Reserved {
		out = append(out, slotEntry{agent, key, "has a slot reserved", id, until})
	}
	for _, w := range k.Waiters {
		out = append(out, slotEntry{agent: agent, key: key, kind: "waiter", id: w.ID})
	}
	return out
}

// agentKey is one key of one keyed agent.
type agentKey struct{ agent, key string }

// keysLeft is what the key items kept of ended orders at the end.
type keysLeft struct {
	keys    int
	left    []slotEntry // live entries of ended orders
	lapsed  int         // entries of ended orders whose time passed
	settled time.Duration
	clear   []string // in a sealed run, keys kept by their values
}

// settleKeys reads, once every order ended, the key items of every keyed
// agent for every customer of the flow orders, until none keeps a slot or
// a place for an ended order, or for within (a crashed Agent's hold ends at
// its attempt's CompleteBy; a waiter's request comes back by its hold's
// end); then it reads them all once more and says what is left.
func (f *flowRun) settleKeys(ctx context.Context, ended map[string]bool, within time.Duration) (keysLeft, error) {
	var all []agentKey
	var clear []string
	for _, a := range f.plan.keyed() {
		for _, c := range f.customers() {
			name, err := f.keyName(ctx, a, c)
			if err != nil {
				return keysLeft{}, err
			}
			all = append(all, agentKey{a, name})
			if name == keyname.ShortKey(c) {
				continue
			}
			byValue, err := f.operator.Lines.Key(ctx, a, c)
			if err != nil {
				return keysLeft{}, err
			}
			if byValue.Limit > 0 {
				clear = append(clear, fmt.Sprintf("agent %s's key %s kept by its value, not its name", a, c))
			}
		}
	}
	start := time.Now()
	for pending := all; len(pending) > 0 && time.Since(start) < within; {
		var dirty []agentKey
		for _, k := range pending {
			es, err := f.read(ctx, k)
			if err != nil {
				return keysLeft{}, err
			}
			if slices.ContainsFunc(es, func(e slotEntry) bool { return ended[e.order()] && e.live(time.Now()) }) {
				dirty = append(dirty, k)
			}
		}
		if pending = dirty; len(pending) > 0 && !sleepCtx(ctx, 500*time.Millisecond) {
			return keysLeft{}, ctx.Err()
		}
	}
	out := keysLeft{keys: len(all), settled: time.Since(start), clear: clear}
	for _, k := range all {
		es, err := f.read(ctx, k)
		if err != nil {
			return out, err
		}
		for _, e := range es {
			switch {
			case !ended[e.order()]:
			case e.live(time.Now()):
				out.left = append(out.left, e)
			default:
				out.lapsed++
			}
		}
	}
	return out, nil
}

// keyName is customer c's key as agent a's items keep it: in a sealed run
// (sealData), its name under the agent's secret (keyname.Namer); else its
// value, or its hash if it is longer than keyname.MaxKeyBytes
// (keyname.ShortKey).
func (f *flowRun) keyName(ctx context.Context, a, c string) (string, error) {
	d := f.stack.Deployment
	k := d.Kept()
	if !d.Config.SealData || !k.Seals() {
		return keyname.ShortKey(c), nil
	}
	return keyname.NewNamer(d.Clients.DynamoDB, d.Config.Topology.StateTable(), a, k.Sealer()).Name(ctx, c)
}

func (f *flowRun) read(ctx context.Context, k agentKey) ([]slotEntry, error) {
	slots, err := f.operator.Lines.Key(ctx, k.agent, k.key)
	if err != nil {
		return nil, err
	}
	return entries(k.agent, k.key, slots), nil
}

// customers are the flow orders' customers, sorted.
func (f *flowRun) customers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	set := map[string]bool{}
	for _, id := range f.sent {
		set[f.plan.customerOf(id)] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// checkFlow checks the flow control's invariants at the end of the run and
// fills its figures: no span of a rate limit's period with more calls than
// the limit and its burst allow (and one for clock edges), no slot or place
// in line kept for an ended order, every held order ended.
func (r *Result) checkFlow(f *flowRun, sim *remotesim.Simulator, inj *Injector, tasks map[string]statestore.Task) {
	fig := &FlowFigures{Throttled: sim.Stats().Throttled, Decided: map[string]int{}}
	if f.plan.stormOn() {
		fig.Storm = f.plan.stormAgent()
	}
	r.checkRates(f, sim, fig)
	f.mu.Lock()
	defer f.mu.Unlock()
	r.checkHolds(f, tasks, fig)
	r.checkKeys(f, inj, fig)
	r.Flow = fig
}

// MinDelivered is the least share of its rate a rate limit delivers while
// a backlog of ready requests lasts, and MinBacklog the least backlog over
// a run that the check judges (a shorter one is reported, not judged: a few
// seconds' calls are mostly clock edges).
const (
	MinDelivered = 0.9
	MinBacklog   = 30 * time.Second
)

// checkRates checks each rate-limited agent's calls per period, and its
// delivered rate while a backlog lasted; f.mu is not held.
func (r *Result) checkRates(f *flowRun, sim *remotesim.Simulator, fig *FlowFigures) {
	agents := f.plan.flowAgents()
	for _, a := range f.plan.rateLimited() {
		rf := f.rateFigure(a, agents[a].RateLimit, sim.Calls(a))
		fig.Rates = append(fig.Rates, rf)
		if rf.Most > rf.Bound {
			r.Violations.RateExceeded = append(r.Violations.RateExceeded, fmt.Sprintf("agent %s: %d calls within %s (limit %s: at most %d, "+
				"two more for latency and clock edges)", a, rf.Most, agents[a].RateLimit.Per, rf.Limit, rf.Bound))
		}
		if rf.short() {
			r.Violations.RateShort = append(r.Violations.RateShort, fmt.Sprintf("agent %s: %.2f calls/s over %.0f s of backlog, "+
				"%.0f%% of its limit %s (at least %.0f%%)", a, rf.Delivered, rf.Backlog.Seconds(), 100*rf.Share, rf.Limit, 100*MinDelivered))
		}
	}
}

// checkHolds counts the pauses, holds and decisions, and checks that every
// order seen held ended; f.mu is held.
func (r *Result) checkHolds(f *flowRun, tasks map[string]statestore.Task, fig *FlowFigures) {
	for _, ws := range f.pauses {
		fig.Pauses += len(ws)
	}
	for a, n := range f.decided {
		fig.Decided[string(a)] = n
	}
	fig.Held, fig.ToEnd, fig.TooLate, fig.Failed = len(f.held), f.toEnd, f.late, f.errs
	for _, n := range f.episode {
		fig.Holds += n
	}
	for id := range f.held {
		if !tasks[id].State.Ended() {
			r.Violations.HeldNotEnded = append(r.Violations.HeldNotEnded, fmt.Sprintf("%s: %s", id, tasks[id].State))
		}
	}
	slices.Sort(r.Violations.HeldNotEnded)
}

// checkKeys reports what the key items kept of ended orders (settleKeys):
// a live entry is a violation unless a line request of its key was lost;
// f.mu is held.
func (r *Result) checkKeys(f *flowRun, inj *Injector, fig *FlowFigures) {
	fig.Keys, fig.Lapsed, fig.Settled = f.left.keys, f.left.lapsed, f.left.settled
	for _, e := range f.left.left {
		if inj.LostLine(e.agent, e.key) {
			fig.LostLine++ // its line waits for a lost hand-off's reservation to lapse (keyline.ReserveFor)
			continue
		}
		r.Violations.SlotsLeft = append(r.Violations.SlotsLeft, e.order()+": "+e.String())
	}
	slices.Sort(r.Violations.SlotsLeft)
	r.Violations.ClearCopies = append(r.Violations.ClearCopies, f.left.clear...)
}

// rateFigure is what agent's service saw of its calls, limited to limit.
func (f *flowRun) rateFigure(agent string, limit workflow.Rate, calls []remotesim.Call) RateFigure {
	at := make([]time.Time, len(calls))
	for i, c := range calls {
		at[i] = c.At
	}
	slices.SortFunc(at, time.Time.Compare)
	rf := RateFigure{Agent: agent, Limit: limit.String(), Calls: len(at), Most: most(at, limit.Per), Bound: limit.Most() + 2}
	f.mu.Lock()
	samples := slices.Clone(f.samples[agent])
	f.mu.Unlock()
	rf.judge(samples, at, f.quiet(agent), limit)
	return rf
}

// judge fills rf's backlog figures: the backlog the samples show with the
// sorted calls at in it, the quiet spans and those of a slow store left
// out, and the rate delivered over it.
func (rf *RateFigure) judge(samples []sample, at []time.Time, quiet []remotesim.Window, limit workflow.Rate) {
	threshold := 2 * (limit.Calls + max(limit.Burst, 1))
	all, _ := backlog(samples, at, quiet, threshold)
	rf.Backlog, rf.BacklogCalls = backlog(samples, at, append(slices.Clip(quiet), slowStore(samples, limit.Interval()/2)...), threshold)
	rf.SlowStore = all - rf.Backlog // the backlog left out for a slow store alone
	if rf.Backlog > 0 {
		rf.Delivered = float64(rf.BacklogCalls) / rf.Backlog.Seconds()
		rf.Share = rf.Delivered * limit.Per.Seconds() / float64(limit.Calls)
	}
}

// quiet are the spans in which agent's calls waited for something else
// than its rate limit: its pauses (and the PausedWait its requests then
// wait), and the storm of 429s on its service (and its Retry-After, with
// the jitter and the control's TTL).
func (f *flowRun) quiet(agent string) []remotesim.Window {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []remotesim.Window
	for _, w := range f.pauses[agent] {
		out = append(out, remotesim.Window{From: w.From, To: w.To.Add(flow.PausedWait + 2*time.Second)})
	}
	if w := f.storm; !w.From.IsZero() && f.plan.stormAgent() == agent {
		out = append(out, remotesim.Window{From: w.From, To: w.To.Add(f.plan.Flow.RetryAfter + time.Second + flow.MaxStale)})
	}
	return out
}

// slowStore are the spans between consecutive samples at either of which a
// write to the state table took more than bound: a rate turn is one
// conditional write, so an agent takes about one turn a write's round trip,
// and where that is longer than its interval the store, not its rate
// limit, sets its pace (DynamoDB Local loaded by the whole run on two
// cores took 280 ms a write for half a minute, against a 4/s limit's
// 250 ms). The run's limits, 2 to 5 a second, take a turn a write: a lease
// holds no more turns than flow.MaxLeaseSpan's worth, one at these rates.
// A sample whose write failed (StoreRTT 0) says nothing.
func slowStore(samples []sample, bound time.Duration) []remotesim.Window {
	var out []remotesim.Window
	for i := 0; i+1 < len(samples); i++ {
		if a, b := samples[i], samples[i+1]; a.StoreRTT > bound || b.StoreRTT > bound {
			out = append(out, remotesim.Window{From: a.At, To: b.At})
		}
	}
	return out
}

// most is the most of the sorted times in any span shorter than d.
func most(at []time.Time, d time.Duration) int {
	best := 0
	for i, j := 0, 0; j < len(at); j++ {
		for at[j].Sub(at[i]) >= d {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}

// backlog is how long, between consecutive samples at most 2 s apart, at
// least threshold requests were ready (both samples), outside the quiet
// spans; and how many of the sorted calls came meanwhile.
func backlog(samples []sample, at []time.Time, quiet []remotesim.Window, threshold int) (time.Duration, int) {
	var span time.Duration
	n := 0
	for i := 0; i+1 < len(samples); i++ {
		a, b := samples[i], samples[i+1]
		if a.Ready < threshold || b.Ready < threshold || b.At.Sub(a.At) > 2*time.Second || overlaps(quiet, a.At, b.At) {
			continue
		}
		span += b.At.Sub(a.At)
		n += sort.Search(len(at), func(k int) bool { return !at[k].Before(b.At) }) -
			sort.Search(len(at), func(k int) bool { return !at[k].Before(a.At) })
	}
	return span, n
}

// overlaps reports whether [from, to) meets one of the windows.
func overlaps(ws []remotesim.Window, from, to time.Time) bool {
	return slices.ContainsFunc(ws, func(w remotesim.Window) bool { return w.From.Before(to) && from.Before(w.To) })
}

// settle waits, once the orders ended, for the key items to let every
// ended order go (settleKeys), for at most the longest an async attempt
// holds a slot and a few seconds more.
func (f *flowRun) settle(ctx context.Context, ids []string) error {
	tasks, err := f.stack.Store.Tasks(ctx, ids)
	if err != nil {
		return err
	}
	ended := map[string]bool{}
	for id, t := range tasks {
		ended[id] = t.State.Ended()
	}
	f.left, err = f.settleKeys(ctx, ended, 4*f.plan.shapeOptions().Timeout+10*time.Second)
	return err
}

// skippedRecords are the held records the operator skipped ("ORDER
// RECORD"); none without flow control.
func (f *flowRun) skippedRecords() map[string]bool {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.skipped)
}

// flowChecked checks the flow control's invariants once the run's are.
func (r *Result) flowChecked(f *flowRun, sim *remotesim.Simulator, inj *Injector) {
	if r.Checked {
		r.checkFlow(f, sim, inj, r.tasks)
	}
}

// print writes the figures as rows of the run's table (nothing without
// flow control).
func (fig *FlowFigures) print(w io.Writer, row func(k string, v any)) {
	if fig == nil {
		return
	}
	fmt.Fprintln(w, "\n  flow control")
	for _, rf := range fig.Rates {
		row(fmt.Sprintf("  %s (%s): calls, most in a second (allowed)", rf.Agent, rf.Limit), fmt.Sprintf("%d, %d (%d)", rf.Calls, rf.Most, rf.Bound))
		row(fmt.Sprintf("  %s: delivered while a backlog lasted", rf.Agent), fmt.Sprintf("%.2f/s over %.0fs, %.0f%%", rf.Delivered,
			rf.Backlog.Seconds(), 100*rf.Share))
		row(fmt.Sprintf("  %s: backlog not judged, the store's writes over half its interval", rf.Agent), fmt.Sprintf("%.0fs", rf.SlowStore.Seconds()))
	}
	row("  agents paused and resumed", fig.Pauses)
	if fig.Storm != "" {
		row("  calls answered 429 with Retry-After ("+fig.Storm+")", fig.Throttled)
	}
	row("  orders held (holds)", fmt.Sprintf("%d (%d)", fig.Held, fig.Holds))
	for _, a := range slices.Sorted(maps.Keys(fig.Decided)) {
		row("  held orders decided: "+a, fig.Decided[a])
	}
	row("  holds left to their end (undone then)", fig.ToEnd)
	row("  decisions too late (the hold had ended)", fig.TooLate)
	if fig.Failed > 0 {
		row("  decisions failed", fig.Failed)
	}
	row("  calls given back to wait in a key's line (with no place)", fmt.Sprintf("%d (%d)", fig.InLine, fig.LineFull))
	row("  key items checked at the end", fig.Keys)
	row("  key items settled in", fig.Settled.Round(time.Millisecond))
	row("  lapsed holds left (a crashed Agent's)", fig.Lapsed)
	row("  left behind a lost hand-off (lapse by itself)", fig.LostLine)
	fmt.Fprintln(w)
}

// diagnose describes, for a run cut short, the flow orders that did not
// end (at most ten): their records at work, and their keys' slots and
// lines, so that a stall can be read.
func (f *flowRun) diagnose(ctx context.Context, ids []string) []string {
	var out []string
	for _, a := range f.plan.flowNames() {
		if c, err := f.store.Control(ctx, a); err == nil && (c.Paused || c.SlowUntil.After(time.Now())) {
			out = append(out, fmt.Sprintf("agent %s: paused %t (by %s at %s), slowed down until %s", a, c.Paused, c.PausedBy,
				c.PausedAt.Format("15:04:05.000"), c.SlowUntil.Format("15:04:05.000")))
		}
	}
	for _, id := range ids {
		if len(out) >= 12 || !f.plan.flowOrder(id) || f.plan.waits(id) {
			continue
		}
		task, recs, err := f.stack.Store.Load(ctx, id)
		if err != nil || task.State.Ended() {
			continue
		}
		line := fmt.Sprintf("%s %s:", id, task.State)
		for _, r := range recs {
			if r.State == workflow.Processed || r.Kind != workflow.KindAgent || (r.DueAt.IsZero() && r.State == workflow.Pending) {
				continue
			}
			line += fmt.Sprintf(" [%s %s attempt %d failures %d locked %q due %s flow waits %d %q]", r.RecordName(), r.State,
				r.Attempt, r.FailureCount, r.LockedBy, r.DueAt.Format("15:04:05.000"), r.FlowWaits, r.FlowWhy)
		}
		for _, a := range f.plan.keyed() {
			name, err := f.keyName(ctx, a, f.plan.customerOf(id))
			if err != nil {
				continue
			}
			if es, err := f.read(ctx, agentKey{a, name}); err == nil && len(es) > 0 {
				line += fmt.Sprintf(" key %s/%q: %v", a, name, es)
			}
		}
		out = append(out, line)
	}
	return out
}
