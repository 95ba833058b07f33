package sqsmem

import (
	"math/rand/v2"
	"time"
)

// Unkind makes the queues as unkind as a standard SQS queue may be, so that
// a local run cannot hide an ordering or a duplicate bug that AWS would
// show: SQS delivers at least once and in no promised order, and its queue
// depths are approximate. Every choice comes from one source seeded by Seed,
// taken under the server's lock (the goroutines' schedule still varies from
// run to run, so a seed replays the choices, not always the run).
type Unkind struct {
	// Seed seeds the choices.
	Seed uint64
	// Reorder: a receive takes its messages at random among the first
	// ReorderWindow receivable ones, not in the order they were sent.
	Reorder bool
	// ReorderWindow is how many receivable messages a receive chooses
	// among (0: DefaultReorderWindow).
	ReorderWindow int
	// Duplicate is the chance (0 to 1) that a message received is
	// delivered once more, under its MessageId and a new receipt handle,
	// within DuplicateWithin of the receive: while the first delivery is in
	// flight, or after it was deleted (a copy on a server that missed the
	// delete), as SQS's at-least-once delivery may.
	Duplicate float64
	// DuplicateWithin bounds when a duplicate comes (0:
	// DefaultDuplicateWithin).
	DuplicateWithin time.Duration
	// DepthLag: the Approximate* depths a queue reports are as they were
	// up to DepthLag ago (each report made afresh after a lag drawn from 0
	// to DepthLag), as SQS's, which are eventually consistent.
	DepthLag time.Duration
}

// Defaults of Unkind's bounds.
const (
	DefaultReorderWindow   = 64
	DefaultDuplicateWithin = 2 * time.Second
)

// SQSLike is how unkind the local runs make their queues unless told
// otherwise: every receive reordered, one message in fifty delivered twice,
// depths up to a second old.
func SQSLike(seed uint64) *Unkind {
	return &Unkind{Seed: seed, Reorder: true, Duplicate: 0.02, DepthLag: time.Second}
}

// chaos is a server's source of unkind choices; nil when its queues are
// kind (exact order, exactly once, exact depths).
type chaos struct {
	Unkind
	rng *rand.Rand
}

func newChaos(u *Unkind) *chaos {
	if u == nil {
		return nil
	}
	c := &chaos{Unkind: *u, rng: rand.New(rand.NewPCG(u.Seed, u.Seed^0x9e3779b97f4a7c15))}
	if c.ReorderWindow <= 0 {
		c.ReorderWindow = DefaultReorderWindow
	}
	if c.DuplicateWithin <= 0 {
		c.DuplicateWithin = DefaultDuplicateWithin
	}
	return c
}

// order is the receivable messages a receive of up to n takes from, in the
// order it takes them: in send order, or at random among the first
// ReorderWindow of them.
func (c *chaos) order(q *queue, n int, now time.Time) []*message {
	window := 2 * n // a few beyond n: those moved to a dead-letter queue are not taken
	if c != nil && c.Reorder {
		window = max(n, c.ReorderWindow)
	}
	var can []*message
	for _, m := range q.msgs {
		if len(can) == window {
			break
		}
		if !m.gone && !m.visibleAt.After(now) {
			can = append(can, m)
		}
	}
	if c != nil && c.Reorder {
		c.rng.Shuffle(len(can), func(i, j int) { can[i], can[j] = can[j], can[i] })
	}
	return can
}

// duplicate is a copy of m, just received, to be delivered once more, or
// nil (most of the time, and always from kind queues).
func (c *chaos) duplicate(m *message, now time.Time) *message {
	if c == nil || c.Duplicate <= 0 || c.rng.Float64() >= c.Duplicate {
		return nil
	}
	d := *m
	d.key = newID()
	d.receipt = ""
	d.gone = false
	d.delayed = false
	d.visibleAt = now.Add(time.Duration(c.rng.Int64N(int64(c.DuplicateWithin)) + 1))
	return &d
}

// depthView is a queue's depths as last reported.
type depthView struct {
	at                         time.Time
	next                       time.Duration // how long this report stands
	visible, inFlight, delayed int
}

// depths are q's depths as reported now: exact, or as last reported if
// that report still stands (DepthLag).
func (c *chaos) depths(q *queue, now time.Time) (visible, inFlight, delayed int) {
	if c == nil || c.DepthLag <= 0 {
		return q.counts(now)
	}
	v := &q.depth
	if v.at.IsZero() || now.Sub(v.at) >= v.next {
		v.visible, v.inFlight, v.delayed = q.counts(now)
		v.at, v.next = now, time.Duration(c.rng.Int64N(int64(c.DepthLag)+1))
	}
	return v.visible, v.inFlight, v.delayed
}
