package costbench

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shirou/gopsutil/v4/process"

	"github.com/sas-go/sas/shared/devkit/accounting"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Kinds of reads and of the Supervisor's write, measured beside an order's
// writes (KindSubmit…).
const (
	// KindGet is a consistent GetItem of a state item (an Agent reads its
	// flow control so; a write that lost a race reads the order again).
	KindGet = "get"
	// KindBatchGetItem is an item read by a BatchGetItem of 100 state items
	// (the Supervisor's due page, a progress poll): its CPU is per item.
	KindBatchGetItem = "batch-get item"
	// KindQuery is a Query of a shard of the deadline index for its due
	// entries, keys only, a page of up to 100: a due page's CPU less its
	// BatchGetItem's items.
	KindQuery = "query"
	// KindMoveOn is the Supervisor's UpdateItem that moves an order found
	// due early in the index on to its next look (statestore.MoveOn).
	KindMoveOn = "move on"
	// KindResult is a step's result (a service's small JSON answer, about
	// 130 bytes) put in an item of its own beside the state item
	// (statestore.PutResult), conditional on no later attempt's being there.
	KindResult = "result"
	// KindResults is a consistent Query of an order's results (one, here),
	// an Agent's read for a step's document when a step done before it
	// kept one (statestore.Store.Document).
	KindResults = "results"
	// KindIdle is the engine's CPU while no request comes, per second.
	KindIdle = "idle"
)

// KindCost is a DynamoDB engine's CPU for one kind of request, each one
// made by the state store as the handlers make it.
type KindCost struct {
	Kind string `json:"kind"`
	// Requests are the requests the measure made, by operation.
	Requests map[string]int64 `json:"requests"`
	// Units are what the CPU is shared by: the requests of the kind's own
	// operation, the items read (KindBatchGetItem), the seconds (KindIdle).
	Units      float64 `json:"units"`
	CPUSeconds float64 `json:"cpuSeconds"`
	// ReadUnits are the read capacity units the requests reported.
	ReadUnits float64 `json:"readUnits"`
}

// MsEach is the engine's CPU milliseconds per unit.
func (k KindCost) MsEach() float64 {
	if k.Units == 0 {
		return 0
	}
	return 1000 * k.CPUSeconds / k.Units
}

func (k KindCost) add(o KindCost) KindCost {
	k.Kind = o.Kind
	if k.Requests == nil {
		k.Requests = map[string]int64{}
	}
	for op, n := range o.Requests {
		k.Requests[op] += n
	}
	k.Units += o.Units
	k.CPUSeconds += o.CPUSeconds
	k.ReadUnits += o.ReadUnits
	return k
}

// EnginePlan is what MeasureEngine measures.
type EnginePlan struct {
	Endpoint string // the DynamoDB engine
	PID      int    // its process, whose CPU time is read
	Orders   int    // requests of each kind: one per order
	Parallel int    // requests at once (default 8)
	Workflow workflow.Definition
}

// ProcessCPU is the CPU time, user and system, process pid has used so far.
func ProcessCPU(pid int) (time.Duration, error) {
	p, err := process.NewProcess(int32(pid))
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, err)
	}
	t, err := p.Times()
	if err != nil {
		return 0, fmt.Errorf("CPU time of process %d: %w", pid, err)
	}
	return time.Duration((t.User + t.System) * float64(time.Second)), nil
}

// MeasureEngine measures the engine's CPU per request of each kind an order
// of p.Workflow makes through the state store, on the happy path, and of
// the reads and the Supervisor's write beside them: p.Orders orders walked
// through their writes one kind at a time (every order's submission, then
// every order's first claim…), the engine's CPU time read before and after
// each kind. The engine's idle CPU is measured first (KindIdle) and is in
// each kind's too: a kind's requests take well under a second.
func MeasureEngine(ctx context.Context, p EnginePlan) (map[string]KindCost, error) {
	if p.Parallel < 1 {
		p.Parallel = 8
	}
	s, meter, err := meteredStore(ctx, p.Endpoint, p.Workflow, "cpu")
	if err != nil {
		return nil, err
	}
	m := engineMeter{pid: p.PID, meter: meter, parallel: p.Parallel}
	out := map[string]KindCost{}
	idle, err := m.idle(ctx, 2*time.Second)
	if err != nil {
		return nil, err
	}
	out[KindIdle] = idle
	now := time.Now()
	walk := func(set string) [][]lifeWrite {
		ws := make([][]lifeWrite, p.Orders)
		for i := range ws {
			ws[i] = lifeWrites(ctx, s, p.Workflow, fmt.Sprintf("cpu-%s-%05d", set, i), i)
		}
		return ws
	}
	ended := walk("ended")
	for j, w := range ended[0] {
		now = now.Add(100 * time.Millisecond)
		c, err := m.measure(ctx, w.kind, p.Orders, func(i int) error { return ended[i][j].do(now) })
		if err != nil {
			return nil, err
		}
		out[w.kind] = out[w.kind].add(c)
	}
	// The reads, on orders in flight: submitted, their first step claimed
	// an hour later, so that their index entries are due and their records
	// not (the Supervisor moves them on).
	inFlight := walk("inflight")
	for j := range 2 {
		now = now.Add(time.Hour)
		if _, err := m.measure(ctx, "", p.Orders, func(i int) error { return inFlight[i][j].do(now) }); err != nil {
			return nil, err
		}
	}
	if err := m.reads(ctx, s, p.Orders, now, out); err != nil {
		return nil, err
	}
	return out, nil
}

// reads measures KindResult, KindResults, KindGet, KindBatchGetItem, KindQuery and KindMoveOn on
// orders cpu-inflight-… (n of them) in the deadline index, as of now.
func (m engineMeter) reads(ctx context.Context, s *statestore.Store, n int, now time.Time, out map[string]KindCost) error {
	id := func(i int) string { return fmt.Sprintf("cpu-inflight-%05d", i) }
	var err error
	answer := []byte(`{"service":"inventory","action":"reserve-inventory","key":"cpu-inflight-00000/s0/r1",` +
		`"appliedAt":"2026-11-26T23:00:00.123456789Z"}`)
	if out[KindResult], err = m.measure(ctx, KindResult, n, func(i int) error {
		return s.PutResult(ctx, statestore.Result{OrderID: id(i), Ref: workflow.Ref{}, Name: "reserve-inventory", Round: 1, Attempt: 1,
			JSON: answer, Now: now})
	}); err != nil {
		return err
	}
	if out[KindResults], err = m.measure(ctx, KindResults, n, func(i int) error {
		_, err := s.Results(ctx, id(i), 1)
		return err
	}); err != nil {
		return err
	}
	if out[KindGet], err = m.measure(ctx, KindGet, n, func(i int) error { _, _, err := s.Load(ctx, id(i)); return err }); err != nil {
		return err
	}
	batches := (n + 99) / 100
	batch, err := m.measure(ctx, KindBatchGetItem, batches, func(b int) error {
		var ids []string
		for i := b * 100; i < min(n, (b+1)*100); i++ {
			ids = append(ids, id(i))
		}
		_, err := s.Tasks(ctx, ids)
		return err
	})
	if err != nil {
		return err
	}
	batch.Units = float64(n) // the items read
	out[KindBatchGetItem] = batch
	var early []statestore.Early
	var mu sync.Mutex
	pages, err := m.measure(ctx, KindQuery, s.Shards(), func(shard int) error {
		q := statestore.DueQuery{Shard: shard, AsOf: now.Add(time.Hour), Now: now, Limit: statestore.MaxDuePage}
		for {
			page, err := s.DuePage(ctx, q)
			if err != nil {
				return err
			}
			mu.Lock()
			early = append(early, page.Early...)
			mu.Unlock()
			if !page.More {
				return nil
			}
			q.After = page.Next
		}
	})
	if err != nil {
		return err
	}
	// A due page is a Query and a consistent BatchGetItem of its orders:
	// the query's CPU is the page's less its items'.
	pages.CPUSeconds -= float64(len(early)) * batch.CPUSeconds / batch.Units
	out[KindQuery] = pages
	if len(early) < n {
		return fmt.Errorf("the due pages found %d of %d orders in flight early", len(early), n)
	}
	out[KindMoveOn], err = m.measure(ctx, KindMoveOn, len(early), func(i int) error { return s.MoveOn(ctx, early[i], now) })
	return err
}

// engineMeter reads an engine's CPU time around requests.
type engineMeter struct {
	pid      int
	meter    *accounting.Meter
	parallel int
}

// idle is the engine's CPU over d with no request made, per second.
func (m engineMeter) idle(ctx context.Context, d time.Duration) (KindCost, error) {
	before, err := ProcessCPU(m.pid)
	if err != nil {
		return KindCost{}, err
	}
	select {
	case <-ctx.Done():
		return KindCost{}, ctx.Err()
	case <-time.After(d):
	}
	after, err := ProcessCPU(m.pid)
	if err != nil {
		return KindCost{}, err
	}
	return KindCost{Kind: KindIdle, Units: d.Seconds(), CPUSeconds: (after - before).Seconds()}, nil
}

// measure calls do(0)…do(n-1), m.parallel at a time, and returns the
// engine's CPU over them and the requests they made; its units are the
// requests of the kind's operation (the most made).
func (m engineMeter) measure(ctx context.Context, kind string, n int, do func(i int) error) (KindCost, error) {
	m.meter.Reset()
	before, err := ProcessCPU(m.pid)
	if err != nil {
		return KindCost{}, err
	}
	if err := parallel(ctx, n, m.parallel, do); err != nil {
		return KindCost{}, fmt.Errorf("%s: %w", kind, err)
	}
	after, err := ProcessCPU(m.pid)
	if err != nil {
		return KindCost{}, err
	}
	c := KindCost{Kind: kind, Requests: map[string]int64{}, CPUSeconds: (after - before).Seconds()}
	for k, u := range m.meter.Snapshot() {
		c.Requests[k.Operation] += u.Requests
		c.ReadUnits += u.ReadUnits
	}
	for _, r := range c.Requests {
		c.Units = max(c.Units, float64(r))
	}
	return c, nil
}

// parallel calls do(0)…do(n-1), at most width at a time, and returns the
// first error.
func parallel(ctx context.Context, n, width int, do func(i int) error) error {
	next := make(chan int)
	errs := make(chan error, width)
	var wg sync.WaitGroup
	for range width {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	go func() { wg.Wait(); close(errs) }()
	for e := range errs {
		err = cmp.Or(err, e)
	}
	return err
}
