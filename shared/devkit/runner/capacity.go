package runner

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Capacity is a function's whole pace, shared by all its sources and
// pollers: one invocation at a time, each message taking PerMessage, as a
// function at its maximum concurrency meeting more work than it can take.
// The messages it has not taken wait in their queues, visible, as they would
// in SQS: nothing is received before there is room for it.
type Capacity struct {
	PerMessage time.Duration
	mu         sync.Mutex
}

// NewCapacity returns a capacity of one message per perMessage.
func NewCapacity(perMessage time.Duration) *Capacity { return &Capacity{PerMessage: perMessage} }

// pollAtCapacity is poll for a source whose function has a Capacity: it
// takes the function's one slot, receives without a long poll (a long poll
// would hold the slot while other queues wait), and spends PerMessage per
// message received before invoking the function.
func (r *Runner) pollAtCapacity(ctx context.Context, src Source) {
	c := src.Capacity
	for ctx.Err() == nil {
		c.mu.Lock()
		out, err := r.receive(ctx, src, src.BatchSize, 0)
		if err != nil || len(out.Messages) == 0 {
			c.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				r.Log.Warn("receive failed", "function", src.Function, "err", err)
			}
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		sleepCtx(ctx, time.Duration(len(out.Messages))*c.PerMessage)
		r.deliver(ctx, src, out.Messages)
		c.mu.Unlock()
	}
}

func queueName(url string) string { return url[strings.LastIndex(url, "/")+1:] }
