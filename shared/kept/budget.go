package kept

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// MinDocumentBytes is the least an Agent reads for one step (its
// document: its order and the results before it, read back), whatever its
// memory: an order and a result at the largest, and a megabyte more.
const MinDocumentBytes = 2*MaxBytes + 1<<20

// DocumentError is a step's document too large for its Agent to read: its
// budget (BudgetFor its memory) is smaller.
type DocumentError struct{ Bytes, Max int64 }

func (e *DocumentError) Error() string {
	return fmt.Sprintf("its document (the order and the results before it) is %d bytes, over the %d its agent reads for one call "+
		"(a quarter of its memory: raise the agent's memory: in its workflow file)", e.Bytes, e.Max)
}

// Budget bounds the payload bytes an Agent instance holds at once: the
// messages of a batch run at once, and ten attempts each reading a 16 MB
// order would not fit a function's memory. An attempt reserves what its
// document weighs before it reads it back, and lets it go when its call is
// over; one that would take more than the whole budget waits for all of it.
type Budget struct {
	sem *semaphore.Weighted
	max int64
}

// NewBudget is a budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{sem: semaphore.NewWeighted(max), max: max} }

// BudgetFor is the budget of a function of memoryMB megabytes: a quarter of
// it, and at least MinDocumentBytes. (A document of 32 MB read whole, and
// an answer of 16 MB, peak at 85-117 MB of a process under a 102 MiB
// GOMEMLIMIT, measured by BenchmarkAgentAtTheLimits, and so do they sealed,
// by BenchmarkAgentSealedAtTheLimits; streamed, at 53-69 MB, by
// BenchmarkAgentStreamingAtTheLimits.)
func BudgetFor(memoryMB int) *Budget {
	return NewBudget(max(int64(memoryMB)<<20/4, MinDocumentBytes))
}

type reservationKey struct{}

// ErrBudgetBusy is an attempt that waited for its bytes until its last
// moment: other attempts of its instance held them. It waits, it did not
// fail (its Agent gives it back, to be tried again).
var ErrBudgetBusy = errors.New("waited for the Agent's payload budget")

// Reservation is what one attempt holds of its instance's budget.
type Reservation struct {
	b      *Budget
	until  time.Time // it waits for its bytes no later than this
	answer int64     // what its answer may weigh
	mu     sync.Mutex
	held   int64
}

// Reserving is ctx carrying a reservation of b for one attempt, which waits
// for its bytes until until at the latest (its attempt's last moment to
// make its call), and the function that lets it go (a nil budget: none,
// and nothing to let go). answer is what the attempt's answer may weigh
// (its workflow's result limit): reserved with its document, as much of it
// as the budget holds beside the document.
func Reserving(ctx context.Context, b *Budget, until time.Time, answer int64) (context.Context, func()) {
	if b == nil {
		return ctx, func() {}
	}
	r := &Reservation{b: b, until: until, answer: max(answer, 0)}
	return context.WithValue(ctx, reservationKey{}, r), r.release
}

// reserve takes n bytes of the budget of ctx's reservation, and its
// answer's, waiting for them, once (none in ctx, or taken already: nothing
// to take). A document over the whole budget is a *DocumentError.
func reserve(ctx context.Context, n int64) error {
	r, _ := ctx.Value(reservationKey{}).(*Reservation)
	if r == nil {
		return nil
	}
	if n > r.b.max {
		return &DocumentError{Bytes: n, Max: r.b.max}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Its answer's bytes with its document's: an attempt with a document
	// at the whole budget runs alone, its answer its function's quarter
	// more (BudgetFor); ten small ones whose answers may be 16 MB each do
	// not run at once in 128 MB.
	n = min(n+r.answer, r.b.max)
	if r.held > 0 {
		// An attempt reserves once, for its step's document: one read
		// after it (a timer's until, as the outcome starts it) rides on
		// that, never waiting for bytes another attempt holds while it
		// holds its own (two such would wait for each other for ever).
		return nil
	}
	wait := ctx
	if !r.until.IsZero() {
		var cancel context.CancelFunc
		wait, cancel = context.WithDeadline(ctx, r.until)
		defer cancel()
	}
	if err := r.b.sem.Acquire(wait, n); err != nil {
		return fmt.Errorf("%w: %d bytes, other attempts of this instance hold them: %w", ErrBudgetBusy, n, err)
	}
	r.held += n
	return nil
}

func (r *Reservation) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held > 0 {
		r.b.sem.Release(r.held)
		r.held = 0
	}
}
