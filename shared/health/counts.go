package health

import (
	"slices"
	"time"

	"github.com/sas-go/sas/shared/workflow"
)

// Counts are the ends of one workflow version's orders over some time
// (an hour's bucket, or the sum of several).
type Counts struct {
	Workflow string `json:"workflow"`
	Version  string `json:"version"`
	// Ended counts the ends by state.
	Ended map[workflow.State]int64 `json:"ended"`
	// Undone counts the ends whose work was undone (an undo action ran).
	Undone int64 `json:"undone"`
	// Order is the histogram of the orders' durations; Steps, of each
	// step's, by step name.
	Order Histogram            `json:"order"`
	Steps map[string]Histogram `json:"steps"`
	// StartedAgo counts the ended orders by how many whole hours before
	// their end's hour they were stored (0: the same hour): with the hour
	// a bucket is of, when they started.
	StartedAgo map[int]int64 `json:"startedAgo"`
}

// NewCounts returns empty counts of a workflow version.
func NewCounts(wf, version string) Counts {
	return Counts{Workflow: wf, Version: version, Ended: map[workflow.State]int64{}, Order: Histogram{},
		Steps: map[string]Histogram{}, StartedAgo: map[int]int64{}}
}

// Add counts one end.
func (c *Counts) Add(e End) {
	c.Ended[e.State]++
	if e.Undone {
		c.Undone++
	}
	c.Order.Add(e.Took())
	for _, s := range e.Steps {
		if c.Steps[s.Name] == nil {
			c.Steps[s.Name] = Histogram{}
		}
		c.Steps[s.Name].Add(s.Took)
	}
	c.StartedAgo[HoursBetween(e.Started, e.Ended)]++
}

// Merge adds o (of the same workflow version) to c.
func (c *Counts) Merge(o Counts) {
	for s, n := range o.Ended {
		c.Ended[s] += n
	}
	c.Undone += o.Undone
	c.Order.Merge(o.Order)
	for name, h := range o.Steps {
		if c.Steps[name] == nil {
			c.Steps[name] = Histogram{}
		}
		c.Steps[name].Merge(h)
	}
	for k, n := range o.StartedAgo {
		c.StartedAgo[k] += n
	}
}

// Total is how many orders ended.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c.Ended {
		n += v
	}
	return n
}

// Failures is how many ended Failed or CompensationFailed.
func (c Counts) Failures() int64 {
	return c.Ended[workflow.Failed] + c.Ended[workflow.CompensationFailed]
}

// StepNames are the steps c has durations of, sorted.
func (c Counts) StepNames() []string {
	var out []string
	for n := range c.Steps {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// MaxHoursAgo caps StartedAgo: an order stored longer ago counts there.
const MaxHoursAgo = 48

// HoursBetween is how many whole clock hours (UTC) lie between the hour of
// from and that of to, at most MaxHoursAgo.
func HoursBetween(from, to time.Time) int {
	h := int(to.UTC().Truncate(time.Hour).Sub(from.UTC().Truncate(time.Hour)) / time.Hour)
	return min(max(h, 0), MaxHoursAgo)
}

// Hour is the UTC clock hour t is in.
func Hour(t time.Time) time.Time { return t.UTC().Truncate(time.Hour) }
