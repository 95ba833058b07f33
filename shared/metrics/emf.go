// Package metrics writes CloudWatch metrics as Embedded Metric Format lines on
// a writer (stdout in Lambda): CloudWatch extracts them from the log, so the
// hot path makes no PutMetricData call.
package metrics

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Namespace is the CloudWatch namespace of every metric the product emits.
const Namespace = "SchedulerAgentSupervisor"

// Metric names the product emits.
const (
	StepErrors           = "StepErrors"           // a step became Error (alarmed on)
	AlertsPublished      = "AlertsPublished"      // failure events sent to the alert topic
	MalformedMessages    = "MalformedMessages"    // messages rejected to a DLQ
	OrdersAccepted       = "OrdersAccepted"       // new orders stored
	DuplicateOrders      = "DuplicateOrders"      // orders whose OrderID already existed
	OrdersProcessed      = "OrdersProcessed"      // tasks that ended Processed
	OrdersCompensated    = "OrdersCompensated"    // tasks that ended Failed, their work undone
	CompensationFailures = "CompensationFailures" // tasks that ended CompensationFailed
	OrdersCancelled      = "OrdersCancelled"      // tasks that ended Cancelled, their work undone
	CancelsRequested     = "CancelsRequested"     // cancels accepted (or asked again)
	ConflictingOrders    = "ConflictingOrders"    // OrderIDs resent with other content, rejected
	NotificationsFailed  = "NotificationsFailed"  // status messages that could not be sent
	StepsClaimed         = "StepsClaimed"         // claims won by a scheduler
	NothingToClaim       = "NothingToClaim"       // schedule messages dropped: the record was not claimable
	StaleReplies         = "StaleReplies"         // outcomes of an attempt no longer current, fenced off (nothing recorded)
	AgentRetries         = "AgentRetries"         // an agent waiting to retry a remote call (after a transient fault, or while its breaker is open)
	AgentDeadlineExpired = "AgentDeadlineExpired" // agent attempts abandoned at CompleteBy
	SupervisorRecoveries = "SupervisorRecoveries" // attempts not completed by CompleteBy, sent back to Pending
	MessagesResent       = "MessagesResent"       // ready steps found unclaimed with no backlog: their message re-sent
	WaitsHeld            = "WaitsHeld"            // waits a queue's backlog explains: nothing sent, looked at again later
	DeadlinesPassed      = "DeadlinesPassed"      // orders failed by their deadline
	QueueWait            = "QueueWait"            // milliseconds from a step ready to claimed (alarmed on)
	ReplyWait            = "ReplyWait"            // milliseconds an Agent's reply waited for the Scheduler
	EventsReceived       = "EventsReceived"       // events taken: a wait completed, kept for one, or an async callback
	EventsRefused        = "EventsRefused"        // events no order can take, rejected to the DLQ
)

// Emitter writes EMF lines; safe for concurrent use.
type Emitter struct {
	mu       sync.Mutex
	w        io.Writer
	function string
	now      func() time.Time
}

// New returns an emitter writing to w, every line tagged with the function's
// name as its one dimension.
func New(w io.Writer, function string) *Emitter {
	return &Emitter{w: w, function: function, now: time.Now}
}

// Count emits one metric with the given value; props are extra searchable
// properties of the log line (such as OrderID), not dimensions.
func (e *Emitter) Count(name string, value float64, props map[string]any) {
	e.emit(name, "Count", value, props)
}

// Duration emits one metric of d, in milliseconds.
func (e *Emitter) Duration(name string, d time.Duration, props map[string]any) {
	e.emit(name, "Milliseconds", float64(d.Milliseconds()), props)
}

func (e *Emitter) emit(name, unit string, value float64, props map[string]any) {
	if e == nil {
		return
	}
	line := map[string]any{
		"_aws": map[string]any{
			"Timestamp": e.now().UnixMilli(),
			"CloudWatchMetrics": []map[string]any{{
				"Namespace":  Namespace,
				"Dimensions": [][]string{{"Function"}},
				"Metrics":    []map[string]string{{"Name": name, "Unit": unit}},
			}},
		},
		"Function": e.function,
	}
	for k, v := range props {
		line[k] = v
	}
	line[name] = value
	b, _ := json.Marshal(line) // only plain values go in
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
}
