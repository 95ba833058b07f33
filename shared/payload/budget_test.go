package payload

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An attempt's reservation takes what its document weighs of its
// instance's budget, once, and lets it go at once; outside an attempt
// nothing is reserved; a document over the whole budget is refused.
func TestAReservationHoldsItsDocumentsBytesOfTheBudget(t *testing.T) {
	t.Parallel()
	require.NoError(t, Reserve(context.Background(), 1<<40), "no reservation in ctx: nothing taken, no limit")

	b := BudgetFor(128)
	require.EqualValues(t, MinDocumentBytes, b.max, "128 MB: a quarter is less than a document at the limits")
	require.EqualValues(t, 1<<30, BudgetFor(4096).max, "a quarter of 4 GB")

	ctx, done := Reserving(context.Background(), b, time.Time{})
	require.NoError(t, Reserve(ctx, 32<<20))
	require.NoError(t, Reserve(ctx, 12<<20), "a read after its document rides on its reservation: no wait")
	require.False(t, b.sem.TryAcquire(2<<20), "32 MB held: 1 MB left")
	require.True(t, b.sem.TryAcquire(1<<20))
	b.sem.Release(1 << 20)

	other, otherDone := Reserving(context.Background(), b, time.Time{})
	got := make(chan error, 1)
	go func() { got <- Reserve(other, 10<<20) }() // waits for the first attempt's bytes
	select {
	case err := <-got:
		t.Fatalf("another attempt took bytes the first holds: %v", err)
	default:
	}
	done()
	require.NoError(t, <-got, "the first attempt let its bytes go")
	otherDone()
	require.True(t, b.sem.TryAcquire(b.max), "everything let go")
	b.sem.Release(b.max)

	var derr *DocumentError
	ctx, done = Reserving(context.Background(), b, time.Time{})
	defer done()
	require.ErrorAs(t, Reserve(ctx, b.max+1), &derr)
	require.ErrorContains(t, derr, "raise the agent's memory")
}

// An attempt waits for its bytes no later than its reservation says (its
// call's last moment): then it is told, and holds nothing.
func TestAReservationWaitsNoLaterThanItsAttemptCan(t *testing.T) {
	t.Parallel()
	b := BudgetFor(128)
	first, done := Reserving(context.Background(), b, time.Time{})
	defer done()
	require.NoError(t, Reserve(first, b.max))
	late, lateDone := Reserving(context.Background(), b, time.Now()) // its last moment has come
	defer lateDone()
	err := Reserve(late, 1<<20)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "payload budget")
	require.EqualValues(t, 0, late.Value(reservationKey{}).(*Reservation).held)
}
