package resilience

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends (its error). Every wait of a backoff, a
// lost race or a rate turn sleeps with it.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
