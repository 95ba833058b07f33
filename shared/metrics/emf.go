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
	FlowWaits            = "FlowWaits"            // a call held by its agent's flow control (rate limit, back-off, pause): its request sent again, delayed
	AgentDeadlineExpired = "AgentDeadlineExpired" // agent attempts abandoned at CompleteBy
	SupervisorRecoveries = "SupervisorRecoveries" // attempts not completed by CompleteBy, sent back to Pending
	MessagesResent       = "MessagesResent"       // ready steps found unclaimed with no backlog: their message re-sent
	WaitsHeld            = "WaitsHeld"            // waits a queue's backlog explains: nothing sent, looked at again later
	DeadlinesPassed      = "DeadlinesPassed"      // orders failed by their deadline
	OrdersHeld           = "OrdersHeld"           // orders held for their operator by a step's failure (onFailure: hold)
	HoldsEnded           = "HoldsEnded"           // held orders no operator decided on within their hold: undone
	QueueWait            = "QueueWait"            // milliseconds from a step ready to claimed (alarmed on)
	ReplyWait            = "ReplyWait"            // milliseconds an Agent's reply waited for the Scheduler
	EventsReceived       = "EventsReceived"       // events taken: a wait completed, kept for one, or an async callback
	EventsRefused        = "EventsRefused"        // events no order can take, rejected to the DLQ
	SweepLooks           = "SweepLooks"           // orders the Supervisor looked at: its due index entries read
	SweepsOutOfTime      = "SweepsOutOfTime"      // sweeps whose time budget ended with due orders unread
	PayloadsStreamed     = "PayloadsStreamed"     // payloads an Agent sent its service as it read them back from the bucket
	// OrdersOfUndeployedVersions are the orders in flight of a workflow's
	// versions the deployment no longer runs, per workflow (dimension
	// Workflow), as the Supervisor's census last counted them: 0 for a
	// workflow with none, so that the alarm on it clears (alarmed on).
	OrdersOfUndeployedVersions = "OrdersOfUndeployedVersions"
)

// OperatorFunction is the Function dimension of the metrics the operator's
// tools emit (sasctl, its console, the typed client): the ends their own
// writes make (shared/operator, Operator.WithMetrics).
const OperatorFunction = "operator"

// DimensionWorkflow is the dimension CountBy's per-workflow metrics carry.
const DimensionWorkflow = "Workflow"

// Emitter writes EMF documents; safe for concurrent use.
//
// The metrics of an order's normal path (perInvocation) are kept until
// Flush, which writes them as one document: every value of each metric, in
// an array (EMF takes up to 100 values a metric), so CloudWatch computes
// every statistic, Sum and Maximum included, as from one document a value.
// A handler flushes at the end of each invocation (sqsbatch.Processor.Handle,
// the Supervisor's Sweep): one document per batch, not per message. The
// others, incidents, are written at once with their properties (the order's
// id, the step), so a crash cannot lose one an alarm counts and an operator
// can find each by its order.
type Emitter struct {
	mu       sync.Mutex
	w        io.Writer
	function string
	now      func() time.Time
	pending  keptSeries            // the normal path's metrics, kept for Flush
	byDims   map[string]*dimSeries // ObserveBy's series, by their dimensions
	dimKeys  []string              // byDims' keys, in the order first kept
}

// series are the values of one metric kept for the next document.
type series struct {
	unit   string
	values []float64
}

// MaxValues is how many values of one metric one EMF document may carry.
const MaxValues = 100

// perInvocation are the metrics every order's normal path emits, each
// message: kept and written once per invocation by Flush.
var perInvocation = map[string]bool{
	OrdersAccepted: true, DuplicateOrders: true, OrdersProcessed: true, OrdersCompensated: true,
	OrdersCancelled: true, CancelsRequested: true, StepsClaimed: true, NothingToClaim: true,
	AgentRetries: true, QueueWait: true, ReplyWait: true, EventsReceived: true, SweepLooks: true, PayloadsStreamed: true,
}

// Aggregated reports whether the named metric is kept until Flush (its
// properties dropped) rather than written at once.
func Aggregated(name string) bool { return perInvocation[name] }

// New returns an emitter writing to w, every document tagged with the
// function's name as its one dimension.
func New(w io.Writer, function string) *Emitter {
	return &Emitter{w: w, function: function, now: time.Now}
}

// Count emits one metric with the given value; props are searchable
// properties of an incident's document (such as OrderID), not dimensions,
// dropped for a metric kept until Flush.
func (e *Emitter) Count(name string, value float64, props map[string]any) {
	e.emit(name, "Count", value, props)
}

// CountBy emits one metric with the given value at once, in two series:
// the function's (dimension Function, as every metric) and, beside it, the
// function's and dimension's = value's (Function, and e.g. Workflow).
func (e *Emitter) CountBy(name string, value float64, dimension, dimValue string, props map[string]any) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	doc := e.document(props)
	dir := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]map[string]any)[0]
	dir["Dimensions"] = [][]string{{"Function"}, {"Function", dimension}}
	doc[dimension] = dimValue
	addMetric(doc, name, "Count", []float64{value})
	e.write(doc)
}

// Duration emits one metric of d, in milliseconds.
func (e *Emitter) Duration(name string, d time.Duration, props map[string]any) {
	e.emit(name, "Milliseconds", float64(d.Milliseconds()), props)
}

// Flush writes the metrics kept since the last Flush as one document (more
// if a metric has over MaxValues values), and those kept by ObserveBy as a
// document per dimension values. A nil emitter, or one with
// nothing kept, writes nothing.
func (e *Emitter) Flush() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.pending.names) > 0 {
		doc := e.document(nil)
		e.pending.fill(doc)
		e.write(doc)
	}
	e.flushDims()
}

func (e *Emitter) emit(name, unit string, value float64, props map[string]any) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !perInvocation[name] {
		doc := e.document(props)
		addMetric(doc, name, unit, []float64{value})
		e.write(doc)
		return
	}
	e.pending.add(name, unit, value)
}

// document is an EMF document with no metric yet: the function's
// dimension, the time, and props.
func (e *Emitter) document(props map[string]any) map[string]any {
	doc := map[string]any{
		"_aws": map[string]any{
			"Timestamp": e.now().UnixMilli(),
			"CloudWatchMetrics": []map[string]any{{
				"Namespace":  Namespace,
				"Dimensions": [][]string{{"Function"}},
				"Metrics":    []map[string]string{},
			}},
		},
		"Function": e.function,
	}
	for k, v := range props {
		doc[k] = v
	}
	return doc
}

// addMetric adds a metric's values to doc: a number for one, else an array.
func addMetric(doc map[string]any, name, unit string, values []float64) {
	dir := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]map[string]any)[0]
	dir["Metrics"] = append(dir["Metrics"].([]map[string]string), map[string]string{"Name": name, "Unit": unit})
	if len(values) == 1 {
		doc[name] = values[0]
	} else {
		doc[name] = values
	}
}

// write writes doc as one line; e.mu is held.
func (e *Emitter) write(doc map[string]any) {
	b, _ := json.Marshal(doc) // only plain values go in
	_, _ = e.w.Write(append(b, '\n'))
}
