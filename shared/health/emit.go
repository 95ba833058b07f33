package health

import (
	"cmp"

	"github.com/sas-go/sas/shared/metrics"
)

// Emit keeps e's metrics on m until its Flush: the order's duration, its
// end (OrdersEnded, OrdersFailed, OrdersUndone, each 0 or 1, so that their
// Average is a rate) by workflow, by workflow and version, and by workflow
// and state; each step's duration by workflow and step, and by workflow,
// version and step. CloudWatch computes p50/p95/p99 from the values.
func Emit(m *metrics.Emitter, e End) {
	if m == nil || e.Workflow == "" {
		return
	}
	// A dimension's value is never empty: an order stored before versions
	// were kept has none.
	e.Version = cmp.Or(e.Version, "none")
	dims := metrics.Dims{
		Sets: [][]string{{metrics.DimensionWorkflow}, {metrics.DimensionWorkflow, metrics.DimensionVersion},
			{metrics.DimensionWorkflow, metrics.DimensionState}},
		Values: map[string]string{metrics.DimensionWorkflow: e.Workflow, metrics.DimensionVersion: e.Version,
			metrics.DimensionState: string(e.State)},
	}
	m.DurationBy(metrics.OrderDuration, e.Took(), dims)
	m.ObserveBy(metrics.OrdersEnded, "Count", 1, dims)
	m.ObserveBy(metrics.OrdersFailed, "Count", flag(e.Failed()), dims)
	m.ObserveBy(metrics.OrdersUndone, "Count", flag(e.Undone), dims)
	for _, s := range e.Steps {
		m.DurationBy(metrics.StepDuration, s.Took, metrics.Dims{
			Sets: [][]string{{metrics.DimensionWorkflow, metrics.DimensionStep},
				{metrics.DimensionWorkflow, metrics.DimensionVersion, metrics.DimensionStep}},
			Values: map[string]string{metrics.DimensionWorkflow: e.Workflow, metrics.DimensionVersion: e.Version,
				metrics.DimensionStep: s.Name},
		})
	}
}

// flag is 1 for true, 0 for false.
func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
