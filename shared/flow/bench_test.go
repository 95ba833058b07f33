package flow_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/workflow"
)

// benchRun numbers the benchmark's runs: each its own agent's schedule.
var benchRun atomic.Int64

// BenchmarkRateDelivered measures what a rate limit delivers to a backlog:
// b.N calls admitted, at 3/s, 200/s and 2,000/s, by 4 instances (Gates) of
// 10 callers each (an Agent's batch) asking again as soon as they had a
// turn, against each engine. It reports the rate delivered between the first and the last
// admitted call (delivered/s, and %-of-rate), the most admitted in any
// window of the limit's period (most-admitted: never above the limit plus
// its burst less one), the most any caller saw on its own clock in any such
// window (most-seen: a caller wakes a timer's lateness after its moment),
// and the conditional writes a second the leases took (writes/s). Run it
// with a longer -benchtime (docs/workflows.md has the command and figures).
func BenchmarkRateDelivered(b *testing.B) {
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range engines {
			if !yield(n) {
				return
			}
		}
	}) {
		e := engines[name]
		table := storetest.NewTables(b, e.Clients.DynamoDB).StateTable()
		for _, calls := range []int{3, 200, 2000} {
			limit := workflow.Rate{Calls: calls, Per: time.Second}
			b.Run(fmt.Sprintf("%s/%s", name, limit), func(b *testing.B) {
				db := &writeCounter{DB: e.Clients.DynamoDB}
				agent := fmt.Sprintf("bench-%d", benchRun.Add(1))
				b.ResetTimer()
				run := admitted(b, flow.NewStore(db, table), agent, limit, 4, 10, b.N+1)
				b.StopTimer()
				reportDelivered(b, limit, run, db.writes.Load())
			})
		}
	}
}

// reportDelivered reports a run's figures (BenchmarkRateDelivered).
func reportDelivered(b *testing.B, limit workflow.Rate, run admissions, writes int64) {
	if span := run.at[len(run.at)-1].Sub(run.at[0]); span > 0 {
		delivered := float64(len(run.at)-1) / span.Seconds()
		b.ReportMetric(delivered, "delivered/s")
		b.ReportMetric(100*delivered*limit.Per.Seconds()/float64(limit.Calls), "%-of-rate")
	}
	b.ReportMetric(float64(mostIn(run.at, limit.Per)), "most-admitted")
	b.ReportMetric(float64(mostIn(run.seen, limit.Per)), "most-seen")
	b.ReportMetric(float64(writes)/run.took.Seconds(), "writes/s")
}
