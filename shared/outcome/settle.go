package outcome

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// Writer reads an order and writes a decision on it.
type Writer interface {
	Read(ctx context.Context, orderID string) (statestore.Snapshot, error)
	Apply(ctx context.Context, snap statestore.Snapshot, w statestore.Write) (statestore.Snapshot, error)
}

// ErrMoved means the order moved to another version of its workflow (sasctl
// migrate) after the message that asked for a decision was sent: decided on
// the version the message named, it is not taken. What the move made ready
// was sent again under the new version.
var ErrMoved = errors.New("the order moved to another version of its workflow")

// runs is ErrMoved, wrapped with the versions, if the order as s has it
// no longer runs def's version.
func runs(s statestore.Snapshot, def workflow.Definition) error {
	if v := s.Runs(); v != "" && def.Version != "" && v != def.Version {
		return fmt.Errorf("order %s runs version %s of workflow %s, not %s: %w", s.OrderID(), v, def.Name, def.Version, ErrMoved)
	}
	return nil
}

// Decide is a decision on an order as read: the write to make, or nil for
// none (nothing to do); statestore.ErrStale if the event it decides is no
// longer the order's to take.
type Decide func(statestore.Snapshot) (*statestore.Write, error)

// Settle decides on the order (as first has it, or as read) and writes the
// decision, one conditional write. When another write changed what the
// decision read, it decides again on the order as that write left it (the
// refused write returns it: no read), at once the first time, then after a
// growing, jittered pause; it stops only when a decision lands, is not to
// be made (stale, refused, nothing to do), or ctx ends. No outcome is
// dropped for losing races: every race is won by some write, so each
// decision is taken again on a newer order.
func Settle(ctx context.Context, store Writer, orderID string, first *statestore.Snapshot, decide Decide) (statestore.Snapshot, *statestore.Write, error) {
	var snap statestore.Snapshot
	if first != nil {
		snap = *first
	} else {
		var err error
		if snap, err = store.Read(ctx, orderID); err != nil {
			return snap, nil, err
		}
	}
	for try := 0; ; try++ {
		w, err := decide(snap)
		if err != nil || w == nil {
			return snap, w, err
		}
		after, err := store.Apply(ctx, snap, *w)
		var c *statestore.Conflict
		if !errors.As(err, &c) {
			return after, w, err
		}
		snap = c.Now
		if err := pause(ctx, try); err != nil {
			return snap, nil, err
		}
	}
}

// pause is the wait before the try after try (0: none): full jitter over a
// doubling bound, 10 ms to 1 s, so writers that keep meeting spread out.
func pause(ctx context.Context, try int) error {
	if try == 0 {
		return ctx.Err()
	}
	bound := min(10*time.Millisecond<<min(try-1, 7), time.Second)
	return resilience.Sleep(ctx, rand.N(bound)+time.Millisecond)
}
