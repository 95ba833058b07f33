// Package health keeps what each order's end tells of its workflow's
// health: how long the order took and each of its steps, how it ended,
// whether its work was undone. An End is taken from the order as the write
// that ended it left it; a Counts adds Ends up into a bounded form (a fixed
// set of latency buckets, counts by state) that the state store keeps per
// hour and that percentiles are read from. It does no I/O and imports no
// AWS SDK.
package health

import (
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// End is one order's end, as the write that ended it found the order.
type End struct {
	OrderID  string
	Workflow string
	Version  string
	State    workflow.State
	// Started is when the order was stored; Ended when it ended.
	Started, Ended time.Time
	// Undone: an undo action of its ran (its work was compensated, or the
	// compensation failed).
	Undone bool
	// Steps are its steps done, each with how long it took.
	Steps []StepTime
}

// StepTime is how long one step took: from made ready (its latest wait) to
// done, queue wait, retries and calls included.
type StepTime struct {
	Name string
	Took time.Duration
}

// Took is how long the order took, from stored to ended.
func (e End) Took() time.Duration { return max(e.Ended.Sub(e.Started), 0) }

// Failed says the order ended failed: Failed (its work undone) or
// CompensationFailed (its undoing failed too): what the failure rate counts.
func (e End) Failed() bool {
	return e.State == workflow.Failed || e.State == workflow.CompensationFailed
}

// Bounds are the upper bounds of the latency buckets, in milliseconds; one
// more bucket holds what is longer. Percentiles are read as the bound of
// the bucket the rank falls in: at most one bucket's width too high.
var Bounds = []int64{
	10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000,
	300_000, 900_000, 3_600_000, 21_600_000, 86_400_000,
}

// Bucket is the index of the latency bucket d falls in (len(Bounds) for
// longer than the last bound).
func Bucket(d time.Duration) int {
	ms := d.Milliseconds()
	for i, b := range Bounds {
		if ms <= b {
			return i
		}
	}
	return len(Bounds)
}

// Histogram counts durations by bucket (index: Bucket).
type Histogram map[int]int64

// Add counts d.
func (h Histogram) Add(d time.Duration) { h[Bucket(d)]++ }

// Merge adds o's counts to h.
func (h Histogram) Merge(o Histogram) {
	for i, n := range o {
		h[i] += n
	}
}

// Count is how many durations h holds.
func (h Histogram) Count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Percentile is the q-th quantile (0 < q ≤ 1) of h: the upper bound of the
// bucket its rank falls in; 0 for an empty histogram, and -1 (longer than
// the last bound) for the overflow bucket.
func (h Histogram) Percentile(q float64) time.Duration {
	total := h.Count()
	if total == 0 {
		return 0
	}
	rank := int64(q*float64(total) + 0.999999)
	var seen int64
	for i := 0; i <= len(Bounds); i++ {
		if seen += h[i]; seen >= max(rank, 1) {
			if i == len(Bounds) {
				return -1
			}
			return time.Duration(Bounds[i]) * time.Millisecond
		}
	}
	return -1
}
