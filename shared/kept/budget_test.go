package kept

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
	require.NoError(t, reserve(context.Background(), 1<<40), "no reservation in ctx: nothing taken, no limit")

	b := BudgetFor(128)
	require.EqualValues(t, MinDocumentBytes, b.max, "128 MB: a quarter is less than a document at the limits")
	require.EqualValues(t, 1<<30, BudgetFor(4096).max, "a quarter of 4 GB")

	ctx, done := Reserving(context.Background(), b, time.Time{}, 0)
	require.NoError(t, reserve(ctx, 32<<20))
	require.NoError(t, reserve(ctx, 12<<20), "a read after its document rides on its reservation: no wait")
	require.False(t, b.sem.TryAcquire(2<<20), "32 MB held: 1 MB left")
	require.True(t, b.sem.TryAcquire(1<<20))
	b.sem.Release(1 << 20)

	other, otherDone := Reserving(context.Background(), b, time.Time{}, 0)
	got := make(chan error, 1)
	go func() { got <- reserve(other, 10<<20) }() // waits for the first attempt's bytes
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
	ctx, done = Reserving(context.Background(), b, time.Time{}, 0)
	defer done()
	require.ErrorAs(t, reserve(ctx, b.max+1), &derr)
	require.ErrorContains(t, derr, "raise the agent's memory")
}

// An attempt waits for its bytes no later than its reservation says (its
// call's last moment): then it is told, and holds nothing.
func TestAReservationWaitsNoLaterThanItsAttemptCan(t *testing.T) {
	t.Parallel()
	b := BudgetFor(128)
	first, done := Reserving(context.Background(), b, time.Time{}, 0)
	defer done()
	require.NoError(t, reserve(first, b.max))
	late, lateDone := Reserving(context.Background(), b, time.Now(), 0) // its last moment has come
	defer lateDone()
	err := reserve(late, 1<<20)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrBudgetBusy)
	require.EqualValues(t, 0, late.Value(reservationKey{}).(*Reservation).held)
}

// An attempt reserves what its answer may weigh with its document: two
// attempts whose answers may be 16 MB each take their instance's 128 MB
// budget in turn, where ten such would not fit its memory; one whose
// document and answer are over the budget takes all of it, and runs alone.
func TestAReservationHoldsItsAnswersBytesToo(t *testing.T) {
	t.Parallel()
	b := BudgetFor(128)
	first, done := Reserving(context.Background(), b, time.Time{}, 16<<20)
	require.NoError(t, reserve(first, 1<<10))
	require.EqualValues(t, 16<<20+1<<10, first.Value(reservationKey{}).(*Reservation).held)
	second, secondDone := Reserving(context.Background(), b, time.Time{}, 16<<20)
	require.NoError(t, reserve(second, 1<<10), "two fit in 33 MB")
	third, thirdDone := Reserving(context.Background(), b, time.Time{}, 16<<20)
	got := make(chan error, 1)
	go func() { got <- reserve(third, 1<<10) }()
	select {
	case err := <-got:
		t.Fatalf("a third attempt whose answer may be 16 MB took bytes the first two hold: %v", err)
	case <-time.After(50 * time.Millisecond): // waiting, as it should: the first is let go next
	}
	done()
	require.NoError(t, <-got)
	secondDone()
	thirdDone()

	whole, wholeDone := Reserving(context.Background(), b, time.Time{}, 16<<20)
	defer wholeDone()
	require.NoError(t, reserve(whole, 32<<20), "a document at the limits, its answer beside it: the whole budget")
	require.EqualValues(t, b.max, whole.Value(reservationKey{}).(*Reservation).held)
}
