package chaos

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Result is what a chaos run did and found.
type Result struct {
	Seed         uint64         `json:"seed"`
	Orders       int            `json:"orders"`
	Faults       map[string]int `json:"faults"`
	AgentRetries int            `json:"agentRetries"`
	Recoveries   int            `json:"supervisorRecoveries"` // attempts that did not complete, retried
	Resent       int            `json:"messagesResent"`       // ready steps found unclaimed, their message re-sent
	Held         int            `json:"waitsHeld"`            // waits a backlog explained: nothing sent
	Expired      int            `json:"deadlinesPassed"`      // orders failed by their deadline
	QueueWaitMax time.Duration  `json:"queueWaitMaxNanos"`    // the longest a step waited from ready to claimed
	// MessagesPerOrder are the messages delivered from each work queue per
	// order (by the queue's name without the run's prefix): duplicates and
	// re-sends included.
	MessagesPerOrder map[string]float64     `json:"messagesPerOrder"`
	Compensations    int                    `json:"compensations"` // undo actions completed
	StaleReplies     int                    `json:"staleReplies"`  // outcomes of attempts no longer current, fenced off
	EndStates        map[workflow.State]int `json:"endStates"`
	// Rejected counts the messages the handlers rejected to a DLQ, by the
	// shape of their reason (ids and numbers left out).
	Rejected map[string]int `json:"rejected"`
	// ByWorkflow are the end states of each workflow's orders.
	ByWorkflow  map[string]map[workflow.State]int `json:"byWorkflow"`
	Violations  Violations                        `json:"violations"`
	DeadLetters map[string]int                    `json:"deadLetters"` // messages left in each DLQ
	// Unrejected are the run's bad inputs and refused events that did not
	// reach the orders DLQ with their reason.
	Unrejected []string                   `json:"-"`
	tasks      map[string]statestore.Task // every order's, at the end
	// Stuck describes, for a run cut short, flow orders that did not end:
	// their records at work and their keys' slots and lines.
	Stuck []string `json:"stuck,omitempty"`
	// Flow is what the plan's flow control did and how its limits held
	// (nil: the plan has none).
	Flow *FlowFigures `json:"flow,omitempty"`
	// Payloads is what the payload bucket held at the end: the orders,
	// results and events kept there, and the bodies senders offloaded.
	Payloads PayloadFigures `json:"payloads"`
	// AtLimit are the orders at the limits (Plan.AtLimit): how each ended,
	// and the bytes of its scan's result kept (0: none).
	AtLimit []LimitOrder `json:"atLimit,omitempty"`
	// LargestItem is the largest item of either table at the end, in
	// DynamoDB's bytes (statestore.ItemSize; at most 400 KB);
	// LargestMessage the largest message a handler was delivered, body and
	// attributes (at most 256 KB): with Plan.Hostile, the largest with
	// payloads full of what encoders change.
	LargestItem    int `json:"largestItem"`
	LargestMessage int `json:"largestMessage"`
	// LargestWorkMessage is the largest a handler was delivered from a
	// queue only the product writes to (the Scheduler's, the Agents'):
	// its handler takes at most message.MaxWorkBytes.
	LargestWorkMessage int `json:"largestWorkMessage"`
	// Migrations is what the run's operator did moving orders in flight to
	// another version of their workflow (nil: the plan moves none).
	Migrations *MigrationFigures `json:"migrations,omitempty"`
	// Hostile is what the run sent of the hostile alphabet (nil: none).
	Hostile *HostileFigures `json:"hostile,omitempty"`
	// Search is what the searches by a searchable field found (nil: the
	// plan declares none: Plan.Search); Bulk what the run's operator did
	// by query (nil: nothing, Plan.Bulk).
	Search *SearchFigures `json:"search,omitempty"`
	Bulk   *BulkFigures   `json:"bulk,omitempty"`
	Drain  time.Duration  `json:"drainNanos"`
	// Stopped is why the run stopped sending or waiting before its orders
	// all ended ("": they did).
	Stopped string `json:"stopped,omitempty"`
	Checked bool   `json:"checked"` // the invariants were checked (the run was not cut short first)
}

// Run sends the plan's orders through a local stack on the emulator at
// endpoint with every fault injected, waits for them to end (or the plan's
// timeout), and checks the invariants. Handler logs go to logs.
func Run(ctx context.Context, p Plan, endpoint string, logs io.Writer, progress func(localrun.Counts)) (Result, error) {
	res := Result{Seed: p.Seed, Orders: p.Orders}
	start := time.Now()
	p.limits = p.limitOrders()
	p.hostiles = p.hostileOrders()
	sim := remotesim.New(p.Seed)
	for k, f := range p.faults(start) {
		sim.SetFaults(k, f)
	}
	srv, err := sim.Start("127.0.0.1:0")
	if err != nil {
		return res, err
	}
	defer srv.Close()
	inj := NewInjector(p)
	logs = metrics.Locked(logs) // shared by every handler's logger and emitter
	watch := newSizeWatch(slog.NewJSONHandler(logs, nil))
	stack, err := localrun.New(ctx, localrun.Options{
		Workflows: p.stackWorkflows(), // the plan's Settings applied, as a deployment's overrides are
		Endpoint:  endpoint, DynamoDBEndpoint: p.DynamoDBEndpoint, QueuesEndpoint: p.QueuesEndpoint, Prefix: fmt.Sprintf("chaos%d-%d", p.Seed, start.UnixNano()%1e6),
		RemoteURL: srv.URL, VisibilityTimeout: 5 * time.Second, Schedulers: p.Schedulers, Supervisors: p.Supervisors,
		SupervisorEvery: p.SupervisorEvery, Faults: inj.Message, DelayFor: p.DelayFor, Crash: inj.Crash,
		Log: slog.New(watch), Metrics: logs, BatchWindow: p.BatchWindow, Throttle: p.Throttle,
		SealData: p.Seal, StoreFaults: p.storeFaults(inj),
	})
	if err != nil {
		return res, err
	}
	sim.OnCallback(stack.Callbacks(nil)) // the async services answer through the orders queue
	var fr *flowRun
	if p.flowOn() {
		fr = newFlowRun(stack, p, sim, start)
		sim.LogCalls(p.calledServices()...)
	}
	var mig *migrator
	if p.Migrate > 0 {
		mig = newMigrator(stack, p)
	}
	var bk *bulker
	if p.Bulk > 0 && p.Search {
		bk = newBulker(stack, p, p.orderIDs())
	}
	ids, cancels, signals, waitErr := runOrders(ctx, stack, p, &res, progress, fr, mig, bk)
	if mig != nil {
		res.Migrations = mig.figures()
	}
	if bk != nil {
		res.Bulk = bk.figures()
	}
	if waitErr != nil {
		res.Stopped = waitErr.Error()
	}
	res.Faults = inj.Counts()
	res.LargestMessage, res.LargestWorkMessage = inj.LargestMessage(), inj.LargestWorkMessage()
	res.Faults["order cancelled (a cancel message sent)"] = cancels.sent
	maps.Copy(res.Faults, signals.counts())
	if err := res.check(ctx, stack, sim, p, ids, waitErr == nil, fr, mig); err != nil {
		return res, err
	}
	if err := res.checkSearch(ctx, stack, p, ids, bk); err != nil {
		return res, err
	}
	res.checkSizes(watch.watched, map[string]bool{stack.Topology().OrdersQueue().DLQName: true,
		stack.Topology().EventsQueue().DLQName: true}) // where outside senders' messages are refused
	res.Hostile = p.hostileFigures(ids, sim.Stats().NotJSON)
	if fr != nil {
		res.flowChecked(fr, sim, inj)
		if res.Checked {
			fr.checkLines(ctx, &res, watch.watched)
		}
	}
	if waitErr != nil && res.Violations.Count() == 0 {
		return res, waitErr
	}
	return res, nil
}

// runOrders runs the stack while it drives the plan's orders, and stops it
// when they ended (or the plan's timeout passed) and the bad input was
// rejected; res.Drain is how long the orders took.
func runOrders(ctx context.Context, stack *localrun.Stack, p Plan, res *Result, progress func(localrun.Counts),
	fr *flowRun, mig *migrator, bk *bulker) ([]string, *canceller, *signaller, error) {
	start := time.Now()
	defer stack.Start(ctx)()
	ids := p.orderIDs()
	wctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	cancels, signals := &canceller{stack: stack, plan: p}, newSignaller(stack, p, ids)
	var bad []rejection
	if p.BadInput {
		bad = badInputs(p, stack, firstWaits(p, ids))
		for _, r := range bad {
			if err := stack.SendOrders(ctx, r.body); err != nil {
				return ids, cancels, signals, err
			}
		}
	}
	actors := []scheduler{cancels, signals}
	if mig != nil {
		actors = append(actors, mig)
	}
	if bk != nil {
		actors = append(actors, bk)
	}
	stopFlow := func() {}
	if fr != nil {
		actors, stopFlow = append(actors, fr), fr.start(wctx)
	}
	err := drive(wctx, stack, p, ids, actors, progress)
	stopFlow()
	cancels.wait()
	signals.wait()
	if mig != nil {
		mig.wait()
	}
	if bk != nil {
		bk.wait()
		if err == nil && bk.reopenedAny() { // orders resubmitted, perhaps after drive saw them end
			err = awaitEnds(wctx, stack, ids)
		}
	}
	res.Drain = time.Since(start)
	switch {
	case err == nil && fr != nil:
		err = fr.settle(ctx, ids)
	case fr != nil:
		res.Stuck = fr.diagnose(ctx, ids)
	}
	if err == nil && p.BadInput {
		res.Unrejected, err = rejectAfterTheEnd(ctx, stack, p, ids, bad)
	}
	return ids, cancels, signals, err
}

// rejectAfterTheEnd sends approvals to ended orders, then waits until every
// rejection the run made is in the orders DLQ with its reason; it returns
// those that are not. (An event for no order is tried three times, a
// visibility timeout apart, before it is rejected.)
func rejectAfterTheEnd(ctx context.Context, stack *localrun.Stack, p Plan, ids []string, bad []rejection) ([]string, error) {
	tasks, err := stack.Store.Tasks(ctx, ids)
	if err != nil {
		return nil, err
	}
	done := map[string]bool{}
	for id, t := range tasks {
		done[id] = t.State.Ended()
	}
	late := endedEvents(p, ids, done)
	for _, r := range late {
		if err := stack.SendOrders(ctx, r.body); err != nil {
			return nil, err
		}
	}
	return awaitRejections(ctx, stack, append(bad, late...), 2*time.Minute)
}

// firstWaits is the first of ids the plan runs on the waits workflow.
func firstWaits(p Plan, ids []string) string {
	for _, id := range ids {
		if p.waits(id) {
			return id
		}
	}
	return ""
}

// check reads the end of the run (the DLQs, every order's state, the
// simulator's ledger) and checks the invariants on it.
func (r *Result) check(ctx context.Context, stack *localrun.Stack, sim *remotesim.Simulator, p Plan, ids []string, ended bool,
	fr *flowRun, mig *migrator) error {
	if err := r.countDeadLetters(ctx, stack); err != nil {
		return err
	}
	if err := r.Payloads.count(ctx, stack); err != nil {
		return err
	}
	if err := r.largestItem(ctx, stack); err != nil {
		return err
	}
	tasks, records, err := stack.Store.ScanAll(ctx)
	if err != nil {
		return err
	}
	if unalerted(records) > 0 && ended {
		// An order ends in the same write that marks its record Error; the
		// alert follows (or the next sweep sends it). Give it that sweep.
		if tasks, records, err = awaitAlerts(ctx, stack, p); err != nil {
			return err
		}
	}
	j := judge{set: stack.Deployment.Config.Workflows, skipped: fr.skippedRecords()}
	if mig != nil {
		if j.defs, err = movedDefinitions(ctx, stack, j.set, tasks); err != nil {
			return err
		}
		j.versions, j.moves = mig.versions, mig.windows()
	}
	r.Violations, r.EndStates = j.check(ids, tasks, records, sim.Ledger())
	r.tasks = tasks
	r.Violations.Inconsistent = append(r.Violations.Inconsistent, checkApprovals(p, ids, tasks, sim.Ledger())...)
	r.Violations.Unrejected = r.Unrejected
	if p.Seal {
		if r.Violations.ClearCopies, r.Payloads.WrittenOver, err = clearCopies(ctx, stack, tasks, time.Minute); err != nil {
			return err
		}
	}
	if r.AtLimit, err = limitFigures(ctx, stack, p, tasks, records); err != nil {
		return err
	}
	r.ByWorkflow = map[string]map[workflow.State]int{}
	for _, t := range tasks {
		if r.ByWorkflow[t.Workflow] == nil {
			r.ByWorkflow[t.Workflow] = map[workflow.State]int{}
		}
		r.ByWorkflow[t.Workflow][t.State]++
	}
	r.Checked = true
	st := sim.Stats()
	for k, v := range map[string]int{"remote transient error": st.Transient, "remote call hung": st.Stalled,
		"remote call slowed past CompleteBy": st.Slow, "remote refused for good": st.Permanent} {
		r.Faults[k] = v
	}
	r.count(stack)
	for _, recs := range records {
		for _, rec := range recs {
			if rec.Undo && rec.State == workflow.Processed {
				r.Compensations++
			}
		}
	}
	return nil
}

// movedDefinitions are the definitions of the orders that run another
// version of their workflow than set's (moved to it), by order, as the
// store keeps them.
func movedDefinitions(ctx context.Context, stack *localrun.Stack, set workflow.Set, tasks map[string]statestore.Task) (map[string]workflow.Definition, error) {
	out := map[string]workflow.Definition{}
	for id, t := range tasks {
		if _, ok := set.Version(t.Workflow, t.Version); ok {
			continue
		}
		d, err := stack.Store.Definition(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("the definition %s runs: %w", id, err)
		}
		out[id] = d
	}
	return out, nil
}

// LimitOrder is how an order at the limits ended.
type LimitOrder struct {
	OrderID   string         `json:"orderId"`
	State     workflow.State `json:"state"`
	ScanBytes int            `json:"scanBytes"` // its first step's result, as kept in the payload bucket
	// Reason is why it did not end Processed (its task's last error),
	// with its steps' records: state, attempts and last error.
	Reason string `json:"reason,omitempty"`
}

// limitFigures are the ends of the plan's orders at the limits.
func limitFigures(ctx context.Context, stack *localrun.Stack, p Plan, tasks map[string]statestore.Task, records map[string][]statestore.Step) ([]LimitOrder, error) {
	var out []LimitOrder
	for _, id := range slices.Sorted(maps.Keys(p.limits)) {
		t := tasks[id]
		o := LimitOrder{OrderID: id, State: t.State}
		if t.State != workflow.Processed {
			why := []string{cmp.Or(t.LastError, "(no error)")}
			for _, st := range records[id] {
				why = append(why, fmt.Sprintf("%s (undo %t): %s, attempt %d, %d failures, %s", st.Name, st.Undo, st.State, st.Attempt,
					st.FailureCount, cmp.Or(st.LastError, "no error")))
			}
			o.Reason = strings.Join(why, "; ")
		}
		results, err := stack.Store.Results(ctx, id, t.Round)
		if err != nil {
			return nil, fmt.Errorf("results of %s: %w", id, err)
		}
		for _, res := range results {
			if ref, ok := payload.Parse(res.JSON); ok && res.Name == limitScan {
				o.ScanBytes = int(ref.Bytes)
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// largestItem finds the largest item of the stack's tables.
func (r *Result) largestItem(ctx context.Context, stack *localrun.Stack) error {
	for _, table := range []string{stack.Topology().OrdersTable(), stack.Topology().StateTable()} {
		p := dynamodb.NewScanPaginator(stack.Deployment.Clients.DynamoDB, &dynamodb.ScanInput{TableName: &table})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("scan %s for its largest item: %w", table, err)
			}
			for _, item := range page.Items {
				r.LargestItem = max(r.LargestItem, statestore.ItemSize(item))
			}
		}
	}
	return nil
}

// PayloadFigures are the payload bucket's objects at the end of a run.
type PayloadFigures struct {
	Kept      int `json:"kept"`      // under orders/: orders, results and event data over the inline limit
	KeptBytes int `json:"keptBytes"` // their bytes
	Largest   int `json:"largest"`   // the largest object's bytes
	Offloaded int `json:"offloaded"` // under incoming/: message bodies sent by an Extended Client pointer
	// WrittenOver are those a sealed run's Submission wrote over once it
	// took them (an order, an event, as stored), by kind.
	WrittenOver map[string]int `json:"writtenOver,omitempty"`
	Streamed    int            `json:"streamed"` // payloads Agents sent their services as they read them back (unsealed)
}

// count lists the stack's payload bucket.
func (f *PayloadFigures) count(ctx context.Context, stack *localrun.Stack) error {
	bucket := stack.Resources.PayloadBucket
	p := s3.NewListObjectsV2Paginator(stack.Deployment.Clients.S3, &s3.ListObjectsV2Input{Bucket: &bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list the payload bucket: %w", err)
		}
		for _, o := range page.Contents {
			n := int(aws.ToInt64(o.Size))
			switch key := aws.ToString(o.Key); {
			case strings.HasPrefix(key, "incoming/"):
				f.Offloaded++
			default:
				f.Kept++
				f.KeptBytes += n
			}
			f.Largest = max(f.Largest, n)
		}
	}
	return nil
}

// countDeadLetters counts what each DLQ holds, read from its attributes
// (visible and in flight: the rejections check hides what it read).
func (r *Result) countDeadLetters(ctx context.Context, stack *localrun.Stack) error {
	r.DeadLetters = map[string]int{}
	q := queue.NewSender(stack.Deployment.Clients.SQS)
	for _, t := range stack.Topology().Queues() {
		d, err := q.Depth(ctx, stack.QueueURL(t.DLQName))
		if err != nil {
			return err
		}
		if n := d.Visible + d.InFlight; n > 0 {
			r.DeadLetters[t.DLQName] = n
		}
	}
	return nil
}

// count reads what the run's handlers counted.
func (r *Result) count(stack *localrun.Stack) {
	t := stack.Tally
	r.AgentRetries = int(t.Sum(metrics.AgentRetries))
	r.Recoveries = int(t.Sum(metrics.SupervisorRecoveries))
	r.Resent = int(t.Sum(metrics.MessagesResent))
	r.Held = int(t.Sum(metrics.WaitsHeld))
	r.Expired = int(t.Sum(metrics.DeadlinesPassed))
	r.StaleReplies = int(t.Sum(metrics.StaleReplies))
	r.Payloads.Streamed = int(t.Sum(metrics.PayloadsStreamed))
	r.QueueWaitMax = time.Duration(t.Max(metrics.QueueWait)) * time.Millisecond
	r.Rejected = map[string]int{}
	for _, l := range t.Lines(metrics.MalformedMessages) {
		if why, ok := l["Reason"].(string); ok {
			r.Rejected[reasonShape(why)]++
		}
	}
	r.MessagesPerOrder = map[string]float64{}
	prefix := stack.Topology().Prefix + "-"
	for q, n := range stack.Stats.Deliveries() {
		r.MessagesPerOrder[strings.TrimPrefix(q, prefix)] = float64(n) / float64(r.Orders)
	}
}

func unalerted(records map[string][]statestore.Step) int {
	n := 0
	for _, recs := range records {
		for _, r := range recs {
			if r.State == workflow.Error && !r.Alerted {
				n++
			}
		}
	}
	return n
}

// awaitAlerts runs the stack again until every Error record's alert is
// confirmed, or for a few supervisor periods (then Check reports them).
func awaitAlerts(ctx context.Context, stack *localrun.Stack, p Plan) (map[string]statestore.Task, map[string][]statestore.Step, error) {
	defer stack.Start(ctx)()
	deadline := time.Now().Add(p.Settings.PickupTimeout + 30*time.Second)
	for {
		tasks, records, err := stack.Store.ScanAll(ctx)
		if err != nil || unalerted(records) == 0 || time.Now().After(deadline) {
			return tasks, records, err
		}
		select {
		case <-ctx.Done():
			return tasks, records, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// drive sends the orders, at most p.InFlight unended at a time, and waits
// until all ended. Ends are counted from the end-of-order metrics (cheap),
// and every ten seconds, and before returning, from the task records: a
// handler killed between an order's last write and its metric loses the
// metric, never the end, and an end counted only from metrics would leave a
// phantom in flight for good, shrinking the window until nothing is sent.
func drive(ctx context.Context, stack *localrun.Stack, p Plan, ids []string, actors []scheduler,
	progress func(localrun.Counts)) error {
	window := p.InFlight
	if window <= 0 {
		window = len(ids)
	}
	fromMetrics := func() int {
		t := stack.Tally
		return int(t.Sum(metrics.OrdersProcessed) + t.Sum(metrics.OrdersCompensated) + t.Sum(metrics.CompensationFailures))
	}
	sent, confirmed, lastCount, lastProgress := 0, 0, time.Time{}, time.Now()
	ended := func() int { return max(confirmed, fromMetrics()) }
	for {
		if time.Since(lastCount) > 10*time.Second || (sent == len(ids) && ended() >= len(ids)) {
			lastCount, lastProgress = time.Now(), time.Now()
			c, _, err := stack.Count(ctx, ids[:sent])
			if err == nil {
				confirmed = c.Ended()
				c.Total, c.Missing = len(ids), c.Missing+len(ids)-sent
				if progress != nil {
					progress(c)
				}
				if sent == len(ids) && c.Ended() == c.Total {
					return nil
				}
			}
		}
		if n := min(len(ids)-sent, window-(sent-ended())); n > 0 {
			var bodies []string
			for i := sent; i < sent+n; i++ {
				bodies = append(bodies, p.orderBody(ids[i], i))
			}
			if err := stack.SendOrders(ctx, bodies...); err != nil {
				return err
			}
			for _, a := range actors {
				a.schedule(ctx, ids[sent:sent+n])
			}
			sent += n
		}
		if progress != nil && time.Since(lastProgress) > 5*time.Second {
			lastProgress = time.Now()
			progress(localrun.Counts{Total: len(ids), Processed: ended(), Running: sent - ended(), Missing: len(ids) - sent})
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("orders not all ended: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// scheduler is what acts on the orders drive sends, as it sends them: the
// cancels, the approvals, the flow control's operator.
type scheduler interface {
	schedule(ctx context.Context, ids []string)
}

// canceller sends the plan's cancel messages, each at its random point.
type canceller struct {
	stack *localrun.Stack
	plan  Plan
	wg    sync.WaitGroup
	mu    sync.Mutex
	sent  int
}

// schedule sends, for the plan's share of the orders, a cancel at a point up to
// CancelWithin after now (none to an order at the limits, which is to run
// its 16 MB through).
func (c *canceller) schedule(ctx context.Context, ids []string) {
	for _, id := range ids {
		if remotesim.Mix(c.plan.Seed, "cancel", id) >= c.plan.Cancel || c.plan.limits[id] {
			continue
		}
		at := time.Duration(remotesim.Mix(c.plan.Seed, "cancel-at", id) * float64(c.plan.CancelWithin))
		c.wg.Go(func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(at):
			}
			if c.stack.SendOrders(ctx, `{"kind":"cancel","orderId":"`+id+`","reason":"chaos"}`) == nil {
				c.mu.Lock()
				c.sent++
				c.mu.Unlock()
			}
		})
	}
}

func (c *canceller) wait() { c.wg.Wait() }

var idsAndNumbers = regexp.MustCompile(`chaos[0-9a-z-]*|bad-[0-9]+-[0-9a-z]+|"[^"]*"|\b[0-9]+\b`)

// reasonShape is a rejection's reason with its ids, names and numbers left
// out, so that rejections of one kind count together.
func reasonShape(why string) string {
	s := idsAndNumbers.ReplaceAllString(why, "…")
	if len(s) > 110 {
		s = s[:110]
	}
	return s
}
