package statestore

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"time"

	"github.com/sas-go/sas/shared/health"
	"github.com/sas-go/sas/shared/workflow"
)

// HealthShards is how many items share one hour's counts of a workflow
// version: an order's end adds to one of them (by its id's hash), so that
// no one item takes every end of a busy hour.
const HealthShards = 4

// HealthKept is how long an hour's counts are kept (the table's time to live
// deletes them after): the day a health view reads, and a margin.
const HealthKept = 3 * 24 * time.Hour

// healthPartition is the state table's partition key of one shard of an
// hour's counts; no order id starts with "~".
func healthPartition(hour time.Time, shard int) string {
	return "~health/" + hour.UTC().Format("2006-01-02T15") + "/" + strconv.Itoa(shard)
}

// healthSK is a workflow version's item in an hour's partition.
func healthSK(wf, version string) string { return "h/" + wf + "@" + version }

// healthShard is the shard an order's end adds to.
func healthShard(orderID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(orderID))
	return int(h.Sum32() % HealthShards)
}

// End is the order's end as the snapshot has it (ok false if it has not
// ended): what its workflow's health counts.
func (s Snapshot) End() (health.End, bool) {
	task := s.Task()
	if !task.State.Ended() {
		return health.End{}, false
	}
	e := health.End{OrderID: task.OrderID, Workflow: task.Workflow, Version: task.Version, State: task.State,
		Started: task.CreatedAt, Ended: task.CompletedAt}
	if e.Ended.IsZero() {
		e.Ended = task.UpdatedAt
	}
	for _, st := range s.Steps() {
		if st.Undo {
			e.Undone = e.Undone || !st.ClaimedAt.IsZero() || st.State == workflow.Processed
			continue
		}
		if st.State == workflow.Processed && !st.DoneAt.IsZero() && !st.ReadyAt.IsZero() {
			e.Steps = append(e.Steps, health.StepTime{Name: st.Name, Took: max(st.DoneAt.Sub(st.ReadyAt), 0)})
		}
	}
	return e, true
}

// WithEnds has s tell ended of each order's end its writes make (Apply,
// the door every move goes through), once: the write that ended the order,
// as its hourly count (a duplicate outcome is stale and writes nothing).
// What a function's or the operator's end metrics are emitted from
// (notify.EndCounter), whoever ended the order: an Agent, the Scheduler,
// Submission (an event, a cancel), the Supervisor (a give-up, a hold's
// end) or an operator (a cancel, a skip, an undo). It returns s; nil tells
// nobody.
func (s *Store) WithEnds(ended func(health.End)) *Store {
	s.ended = ended
	return s
}

// tellEnd counts the end the write that turned before into after made, if
// it ended the order, in its hour (countEnd) and tells the store's ends
// observer (WithEnds).
func (s *Store) tellEnd(ctx context.Context, before, after stateItem) {
	if workflow.State(before.State).Ended() {
		return
	}
	e, ok := Snapshot{it: after}.End()
	if !ok {
		return
	}
	if err := s.countEnd(ctx, e); err != nil {
		// Not counted in its workflow's health (as a metric lost with its
		// invocation): the end itself is written.
		slog.WarnContext(ctx, "order end not counted in its workflow's health", "order_id", e.OrderID, "err", err)
	}
	if s.ended != nil {
		s.ended(e)
	}
}

// countEnd adds e to its workflow version's counts of the hour it ended in,
// in one UpdateItem of counters: one write unit an order. It is best
// effort, as a metric is: the end is written whatever becomes of it.
func (s *Store) countEnd(ctx context.Context, e health.End) error {
	c := health.NewCounts(e.Workflow, e.Version)
	c.Add(e)
	hour := health.Hour(e.Ended)
	b := newHealthUpdate(c, hour)
	in, err := b.UpdateInput(s.state, key(healthPartition(hour, healthShard(e.OrderID)), healthSK(e.Workflow, e.Version)))
	if err != nil {
		return fmt.Errorf("count the end of %s: %w", e.OrderID, err)
	}
	// The end is written: its count goes too, even if the caller's context
	// ends now (a local stack stopping once its orders ended), bounded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healthWriteTimeout)
	defer cancel()
	if _, err := s.db.UpdateItem(ctx, in); err != nil {
		return fmt.Errorf("count the end of %s: %w", e.OrderID, err)
	}
	return nil
}

// healthWriteTimeout bounds an end's count once the caller's context ended.
const healthWriteTimeout = 5 * time.Second
