// Package harness is what every engine of the peers benchmark shares: the
// workload (the same three-step order, one at a time, then a burst), the
// call of a step to the one local service, the measure of CPU and memory,
// and the child process's protocol (its flags, its JSON result). It
// imports neither the product nor a peer, so that each engine's module
// takes only its own dependencies.
package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// An Engine runs the three-step order (reserve the inventory, charge the
// payment, create the shipment: each step an HTTP POST to one local
// service that answers at once) and says when each order ended.
type Engine interface {
	// Start submits the orders of ids; each then runs on its own.
	Start(ctx context.Context, ids []string) error
	// Wait returns once every order of ids ended, with when each did; an
	// order that did not end well is an error.
	Wait(ctx context.Context, ids []string) (map[string]time.Time, error)
	// Close stops what the engine started.
	Close() error
}

// Steps are the order's steps, each with the service it calls: those of
// the product's shared/workflow/examples/order.yaml.
var Steps = []struct{ Action, Service string }{
	{"reserve-inventory", "inventory"},
	{"charge-payment", "payment"},
	{"create-shipment", "shipping"},
}

// OrderBody is order i's JSON, the same for every engine: the product's
// demo order (localrun.DemoOrder; a test of the peers module keeps the two
// equal).
func OrderBody(id string, i int) string {
	return fmt.Sprintf(`{"orderId":%q,"customerId":"customer-%d","items":[{"sku":"SKU-%d","quantity":%d,"unitPriceCents":%d}]}`,
		id, i%97, i%13, 1+i%3, 499+i%1000)
}

// Latencies runs n orders one after another, each alone, and returns the
// time from each one's send to its end, sorted.
func Latencies(ctx context.Context, e Engine, prefix string, n int) ([]time.Duration, error) {
	var out []time.Duration
	for i := range n {
		id := fmt.Sprintf("%s-%05d", prefix, i)
		sent := time.Now()
		if err := e.Start(ctx, []string{id}); err != nil {
			return nil, fmt.Errorf("order %s: %w", id, err)
		}
		ends, err := e.Wait(ctx, []string{id})
		if err != nil {
			return nil, fmt.Errorf("order %s: %w", id, err)
		}
		out = append(out, ends[id].Sub(sent))
	}
	slices.Sort(out)
	return out, nil
}

// Burst sends n orders at once and returns how long they took from the
// first send to the last end.
func Burst(ctx context.Context, e Engine, prefix string, n int) (time.Duration, error) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	sent := time.Now()
	if err := e.Start(ctx, ids); err != nil {
		return 0, fmt.Errorf("send the burst: %w", err)
	}
	ends, err := e.Wait(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("the burst: %w", err)
	}
	last := sent
	for _, t := range ends {
		if t.After(last) {
			last = t
		}
	}
	return last.Sub(sent), nil
}

// Percentile is the q-quantile of sorted durations.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// Each runs fn on every id, at most par at once, and returns the first
// error.
func Each(ids []string, par int, fn func(i int, id string) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, max(par, 1))
	for i, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(i, id); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// Ends waits for every order of ids with wait (at once) and notes when each
// returned: the end of an engine whose client learns it by a blocking call.
func Ends(ids []string, wait func(id string) error) (map[string]time.Time, error) {
	var mu sync.Mutex
	ends := map[string]time.Time{}
	err := Each(ids, len(ids), func(_ int, id string) error {
		if err := wait(id); err != nil {
			return fmt.Errorf("order %s: %w", id, err)
		}
		mu.Lock()
		ends[id] = time.Now()
		mu.Unlock()
		return nil
	})
	return ends, err
}
