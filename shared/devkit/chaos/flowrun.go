package chaos

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

// flowRun is what a run does for its flow control while its orders go (a
// pauser, an operator deciding held orders, a sampler of the rate-limited
// agents' backlogs), and what they saw.
type flowRun struct {
	stack *localrun.Stack
	plan  Plan
	store flow.Store
	// operator takes the operator's decisions on held orders.
	operator *operator.Operator
	sim      *remotesim.Simulator
	began    time.Time // the run's start: its knobs' clock
	wg       sync.WaitGroup
	left     keysLeft // what the key items kept of ended orders (settleKeys)

	mu      sync.Mutex
	storm   remotesim.Window              // when the storm of 429s was (zero: not yet)
	sent    []string                      // flow orders sent
	open    map[string]bool               // flow orders sent, not seen ended
	episode map[string]int                // hold episodes seen, by order
	seen    map[string]bool               // hold episodes seen, by order and HeldAt
	pauses  map[string][]remotesim.Window // when each agent was paused
	samples map[string][]sample           // each rate-limited agent's requests waiting, over time
	decided map[outcome.HoldAction]int    // decisions taken
	skipped map[string]bool               // "order record" skipped with a result
	late    int                           // decisions the order no longer took (its hold had ended, or it was cancelled)
	toEnd   int                           // holds left to end by themselves
	errs    int                           // decisions that failed otherwise
	held    map[string]bool               // orders seen held
}

// sample is how many requests of an agent were ready at a moment: visible
// or in flight on its request queue (an Agent's calls wait for their turn
// in it, their messages in flight). A delayed request waits for something
// else than its turn: a key's slot, a back-off after a failure, a pause.
type sample struct {
	At    time.Time
	Ready int
	// StoreRTT is how long one write to the state table took then (0:
	// it failed).
	StoreRTT time.Duration
}

// newFlowRun is the flow actors of a run on stack.
func newFlowRun(stack *localrun.Stack, p Plan, sim *remotesim.Simulator, began time.Time) *flowRun {
	c := stack.Deployment.Clients
	topo := stack.Topology()
	// The operator decides as sasctl does (operator.DecideHeld): a skip's
	// result sealed and kept as a step's, the order's payloads written again.
	op := operator.New(c, topo).WithRetention(stack.Deployment.Config.Retention())
	if p.Settings.PickupTimeout > 0 {
		op.PickupTimeout = p.Settings.PickupTimeout
	}
	return &flowRun{stack: stack, plan: p, sim: sim, began: began, store: flow.NewStore(c.DynamoDB, topo.StateTable()),
		operator: op, open: map[string]bool{}, episode: map[string]int{}, seen: map[string]bool{}, pauses: map[string][]remotesim.Window{},
		samples: map[string][]sample{}, decided: map[outcome.HoldAction]int{}, skipped: map[string]bool{}, held: map[string]bool{}}
}

// start runs the pauser, the operator and the sampler until the returned
// stop is called (it waits for them: a pause is resumed first).
func (f *flowRun) start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	f.wg.Go(func() { f.pauseAtRandom(ctx) })
	f.wg.Go(func() { f.watchHolds(ctx) })
	f.wg.Go(func() { f.sampleBacklogs(ctx) })
	f.wg.Go(func() { f.stormAfterFirstCall(ctx) })
	return func() {
		cancel()
		f.wg.Wait()
	}
}

// schedule watches the flow orders among ids for holds.
func (f *flowRun) schedule(_ context.Context, ids []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if f.plan.flowOrder(id) && !f.plan.waits(id) {
			f.open[id] = true
			f.sent = append(f.sent, id)
		}
	}
}

// pauseAtRandom pauses a flow agent at random moments, each for up to
// PauseFor, and resumes it: the first a little into the run, then about
// every PauseEvery.
func (f *flowRun) pauseAtRandom(ctx context.Context) {
	every := f.plan.Flow.PauseEvery
	if every <= 0 {
		return
	}
	rng := rand.New(rand.NewPCG(f.plan.Seed, 0x9a05e))
	names := f.plan.flowNames()
	gap := time.Duration((0.1 + 0.2*rng.Float64()) * float64(every))
	for sleepCtx(ctx, gap) {
		agent := names[rng.IntN(len(names))]
		f.pause(ctx, agent, time.Duration((0.2+0.8*rng.Float64())*float64(f.plan.Flow.PauseFor)))
		gap = time.Duration((0.5 + rng.Float64()) * float64(every))
	}
}

// pause pauses agent for d (less if ctx ends first) and resumes it. A
// pause whose write failed may have been written: it is resumed too. So is
// one found paused already by the pauser (chaos pauses nothing else): its
// write was applied, its answer lost, and the SDK's try again found it
// paused (the store's faults are the handlers'), or an earlier resume
// failed; left alone, the agent stayed paused for good.
func (f *flowRun) pause(ctx context.Context, agent string, d time.Duration) {
	from := time.Now()
	ok, err := f.store.Pause(ctx, agent, "chaos", from)
	if err == nil && !ok {
		c, err := f.store.Control(ctx, agent)
		if err == nil && c.PausedBy != "chaos" {
			return // paused already, by someone else
		}
	}
	if err == nil {
		sleepCtx(ctx, d)
	}
	if err := f.resume(context.WithoutCancel(ctx), agent); err != nil {
		f.stack.Opts.Log.Error("chaos: an agent paused not resumed", "agent", agent, "err", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pauses[agent] = append(f.pauses[agent], remotesim.Window{From: from, To: time.Now()})
}

// resume resumes agent, trying again for a minute while the write fails
// (an agent left paused would hold its orders for good).
func (f *flowRun) resume(ctx context.Context, agent string) error {
	for end := time.Now().Add(time.Minute); ; {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := f.store.Resume(rctx, agent)
		cancel()
		if err == nil || time.Now().After(end) || !sleepCtx(ctx, 200*time.Millisecond) {
			return err
		}
	}
}

// watchHolds looks for held flow orders each second, and has the operator
// decide some of them.
func (f *flowRun) watchHolds(ctx context.Context) {
	for sleepCtx(ctx, time.Second) {
		f.mu.Lock()
		var ids []string
		for id := range f.open {
			ids = append(ids, id)
		}
		f.mu.Unlock()
		tasks, err := f.stack.Store.Tasks(ctx, ids)
		if err != nil {
			continue
		}
		for id, t := range tasks {
			switch {
			case t.State.Ended():
				f.mu.Lock()
				delete(f.open, id)
				f.mu.Unlock()
			case t.State == workflow.Held:
				f.onHeld(ctx, id, t.HeldAt)
			}
		}
	}
}

// onHeld is the operator's turn on an order held since heldAt: decide it,
// at a random point within DecideWithin, or leave it to its hold's end.
func (f *flowRun) onHeld(ctx context.Context, id string, heldAt time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := id + "@" + heldAt.String()
	if f.seen[key] {
		return
	}
	f.seen[key], f.held[id] = true, true
	f.episode[id]++
	n := strconv.Itoa(f.episode[id])
	if remotesim.Mix(f.plan.Seed, "decide", id, n) >= f.plan.Flow.Decide {
		f.toEnd++
		return
	}
	at := time.Duration(remotesim.Mix(f.plan.Seed, "decide-at", id, n) * float64(f.plan.Flow.DecideWithin))
	f.wg.Go(func() {
		if sleepCtx(ctx, at) {
			f.decide(ctx, id, n)
		}
	})
}

// holdActions are the operator's choices, in the order the seed picks them.
var holdActions = []outcome.HoldAction{outcome.HoldRetry, outcome.HoldSkip, outcome.HoldUndo}

// decide takes a random decision on held order id (its n-th hold): retry
// a record that holds it, skip it with a result, or undo the order.
func (f *flowRun) decide(ctx context.Context, id, n string) {
	snap, err := f.stack.Store.Read(ctx, id)
	if err != nil {
		f.count(func() { f.errs++ })
		return
	}
	held := snap.Order().Held()
	if len(held) == 0 {
		f.count(func() { f.late++ })
		return
	}
	ref := held[int(remotesim.Mix(f.plan.Seed, "decide-which", id, n)*float64(len(held)))]
	st, _ := snap.Step(ref)
	act := holdActions[int(remotesim.Mix(f.plan.Seed, "decide-how", id, n)*float64(len(holdActions)))]
	d := outcome.HoldDecision{OrderID: id, Action: act, By: "chaos", Now: time.Now()}
	if act != outcome.HoldUndo {
		d.Step = st.RecordName()
	}
	if act == outcome.HoldSkip {
		d.Result = json.RawMessage(`{"skipped":true}`)
	}
	_, err = f.operator.DecideHeld(ctx, d)
	f.count(func() {
		switch {
		case err == nil:
			f.decided[act]++
		case outcome.IsHeldError(err):
			f.late++
		default:
			f.errs++ // the decision may be written: a skip is taken as one
		}
		if act == outcome.HoldSkip && (err == nil || !outcome.IsHeldError(err)) {
			f.skipped[id+" "+st.RecordName()] = true
		}
	})
}

func (f *flowRun) count(do func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	do()
}

// sampleBacklogs reads, every half second, how many requests of each
// rate-limited agent are ready on its request queue (sample).
func (f *flowRun) sampleBacklogs(ctx context.Context) {
	q := queue.NewSender(f.stack.Deployment.Clients.SQS)
	urls := map[string]string{}
	for _, a := range f.plan.rateLimited() {
		urls[a] = f.stack.QueueURL(f.stack.Topology().AgentRequests(a).Name)
	}
	for sleepCtx(ctx, 500*time.Millisecond) {
		rtt := f.storeRTT(ctx)
		for a, url := range urls {
			d, err := q.Depth(ctx, url)
			if err != nil {
				continue
			}
			f.count(func() {
				f.samples[a] = append(f.samples[a], sample{At: time.Now(), Ready: d.Visible + d.InFlight, StoreRTT: rtt})
			})
		}
	}
}

// storeRTT is how long one write to the state table takes now, as a rate
// turn's does (storeRoundTrip).
func (f *flowRun) storeRTT(ctx context.Context) time.Duration {
	return storeRoundTrip(ctx, f.stack.Deployment.Clients.DynamoDB, f.stack.Topology().StateTable())
}

// storeRoundTrip is how long one write of an item of the run's own to
// table takes on db: one try, past the plan's injected state store faults
// (neither drawn from their stream nor counted with the handlers'); 0 if it
// failed.
func storeRoundTrip(ctx context.Context, db *dynamodb.Client, table string) time.Duration {
	start := time.Now()
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			topology.KeyOrderID: &types.AttributeValueMemberS{Value: "~chaos/store"},
			topology.KeySort:    &types.AttributeValueMemberS{Value: "round-trip"},
		}}, func(o *dynamodb.Options) {
		o.RetryMaxAttempts = 1
		if faults, ok := o.HTTPClient.(storeFaults); ok {
			o.HTTPClient = faults.next
		}
	})
	if err != nil {
		return 0
	}
	return time.Since(start)
}

// rateLimited are the flow agents with a rate limit the flow shapes call,
// sorted.
func (p Plan) rateLimited() []string {
	return p.flowCalled(func(a workflow.Agent) bool { return a.RateLimit.Calls > 0 })
}

// keyed are the flow agents with calls in flight per key the flow shapes
// call, sorted.
func (p Plan) keyed() []string {
	return p.flowCalled(func(a workflow.Agent) bool { return a.PerKey != nil })
}

// flowCalled are the flow agents the flow shapes call that have, sorted.
func (p Plan) flowCalled(has func(workflow.Agent) bool) []string {
	called := map[string]bool{}
	for _, d := range p.flowShapes() {
		for _, a := range d.Agents() {
			called[a] = true
		}
	}
	var out []string
	agents := p.flowAgents()
	for _, a := range p.flowNames() {
		if called[a] && has(agents[a]) {
			out = append(out, a)
		}
	}
	return out
}

// stormAfterFirstCall starts the storm of 429s StormAt after the storm's
// service received its first call, and ends it once it lasted Storm and
// answered a call 429 (on a slow machine too, it meets calls).
func (f *flowRun) stormAfterFirstCall(ctx context.Context) {
	if !f.plan.stormOn() {
		return
	}
	storm := f.plan.stormAgent()
	for len(f.sim.Calls(storm)) == 0 {
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return
		}
	}
	if !sleepCtx(ctx, f.plan.Flow.StormAt) {
		return
	}
	from := time.Now()
	f.setStorm(remotesim.Window{From: from, To: from.Add(time.Hour)})
	defer func() { f.setStorm(remotesim.Window{From: from, To: time.Now()}) }()
	for sleepCtx(ctx, 200*time.Millisecond) {
		if time.Since(from) >= f.plan.Flow.Storm && slices.ContainsFunc(f.sim.Calls(storm), func(c remotesim.Call) bool {
			return c.Status == http.StatusTooManyRequests
		}) {
			return
		}
	}
}

// setStorm puts the storm of 429s in window w on its service's knobs.
func (f *flowRun) setStorm(w remotesim.Window) {
	for k, knobs := range f.plan.stormFaults(f.plan.faults(f.began), w) {
		f.sim.SetFaults(k, knobs)
	}
	f.count(func() { f.storm = w })
}

// calledServices are the services whose calls the run keeps: the
// rate-limited agents' and the storm's.
func (p Plan) calledServices() []string {
	out := p.rateLimited()
	if p.stormOn() && !slices.Contains(out, p.stormAgent()) {
		out = append(out, p.stormAgent())
	}
	return out
}
