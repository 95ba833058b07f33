package outcome_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
)

// racing refuses its first n writes as a racing write would (a
// *statestore.Conflict), then takes them.
type racing struct {
	n, writes, reads int
}

func (r *racing) Read(context.Context, string) (statestore.Snapshot, error) {
	r.reads++
	return statestore.Snapshot{}, nil
}

func (r *racing) Apply(_ context.Context, snap statestore.Snapshot, _ statestore.Write) (statestore.Snapshot, error) {
	r.writes++
	if r.writes <= r.n {
		return snap, &statestore.Conflict{Now: snap}
	}
	return snap, nil
}

func write(statestore.Snapshot) (*statestore.Write, error) { return &statestore.Write{}, nil }

// A decision that keeps losing races is decided again, each time on the
// order the race left (no read), until it lands: no small bound drops it.
func TestSettleDecidesAgainUntilTheWriteLands(t *testing.T) {
	t.Parallel()
	w := &racing{n: 8}
	decided := 0
	_, got, err := outcome.Settle(context.Background(), w, "o-1", nil, func(s statestore.Snapshot) (*statestore.Write, error) {
		decided++
		return write(s)
	})
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Equal(t, 9, decided, "decided again after each of 8 races")
	require.Equal(t, 9, w.writes)
	require.Equal(t, 1, w.reads, "read once: each race returns the order as it left it")
}

// A first guess is decided on with no read; a decision that writes
// nothing, or is stale, ends at once.
func TestSettleTakesAFirstGuessAndStopsWhenThereIsNothingToWrite(t *testing.T) {
	t.Parallel()
	w := &racing{}
	first := statestore.Snapshot{}
	_, got, err := outcome.Settle(context.Background(), w, "o-1", &first, func(statestore.Snapshot) (*statestore.Write, error) {
		return nil, nil
	})
	require.NoError(t, err)
	require.Nil(t, got)
	require.Zero(t, w.reads+w.writes)
	_, _, err = outcome.Settle(context.Background(), w, "o-1", &first, func(statestore.Snapshot) (*statestore.Write, error) {
		return nil, statestore.ErrStale
	})
	require.ErrorIs(t, err, statestore.ErrStale)
	require.Zero(t, w.writes)
}

// The races end with the caller's context: its error, and no write more.
func TestSettleEndsWithItsContext(t *testing.T) {
	t.Parallel()
	w := &racing{n: 1 << 30}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, _, err := outcome.Settle(ctx, w, "o-1", nil, write)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.Greater(t, w.writes, 2, "raced again and again meanwhile")
	require.Less(t, w.writes, 200, "with pauses between, not spinning")
}
