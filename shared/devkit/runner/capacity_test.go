package runner_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/runner"
)

// A function at capacity takes its sources' messages one invocation at a
// time, whatever its pollers, and leaves the rest waiting, visible, in their
// queues; each queue's deliveries are counted.
func TestCapacityLeavesTheBacklogInTheQueues(t *testing.T) {
	t.Parallel()
	_, a, _, _ := queueHiding(t, "rt-cap-a", 5, time.Minute)
	_, b, _, _ := queueHiding(t, "rt-cap-b", 5, time.Minute)
	var running, most atomic.Int32
	var mu sync.Mutex
	seen := map[string]bool{}
	handler := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range ev.Records {
			seen[r.Body] = true
		}
		return events.SQSEventResponse{}, nil
	}
	var bodies []string
	for i := range 30 {
		bodies = append(bodies, fmt.Sprint(i))
	}
	send(t, a, bodies[:15]...)
	send(t, b, bodies[15:]...)
	c := runner.NewCapacity(100 * time.Millisecond)
	r := &runner.Runner{SQS: clients().SQS, Log: slog.New(slog.DiscardHandler), Sources: []runner.Source{
		{Function: "slow", QueueURL: a, Handler: handler, Pollers: 3, Capacity: c},
		{Function: "slow", QueueURL: b, Handler: handler, Pollers: 3, Capacity: c},
	}}
	start(t, r)
	waitFor(t, "a first invocation", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) > 0 })
	require.Positive(t, visible(t, a)+visible(t, b)-countSeen(&mu, seen), "the rest waits in the queues")
	waitFor(t, "every message", func() bool { return countSeen(&mu, seen) == 30 })
	require.EqualValues(t, 1, most.Load(), "one invocation at a time, across sources and pollers")
	d := r.Stats.Deliveries()
	require.Equal(t, 30, d[queueNameOf(a)]+d[queueNameOf(b)])
	require.Positive(t, d[queueNameOf(a)])
}

func countSeen(mu *sync.Mutex, seen map[string]bool) int {
	mu.Lock()
	defer mu.Unlock()
	return len(seen)
}

func queueNameOf(url string) string { return url[strings.LastIndex(url, "/")+1:] }
