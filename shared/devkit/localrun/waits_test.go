package localrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/workflow"
)

// running sets the stack's workflows from YAML texts (the first the default).
func running(t *testing.T, files ...string) func(*localrun.Options) {
	var defs []workflow.Definition
	for i, f := range files {
		d, err := workflow.ParseFile(fmt.Sprintf("test-%d.yaml", i), []byte(f), workflow.Options{})
		require.NoError(t, err)
		defs = append(defs, d)
	}
	return func(o *localrun.Options) { o.Workflows = workflow.MustSet(defs...) }
}

// approval is the example approval workflow with a wait timeout of its own.
func approval(timeout, onTimeout string) string {
	b, _ := workflow.ExampleFile("approval")
	s := strings.Replace(string(b), "timeout: 72h", "timeout: "+timeout, 1)
	if onTimeout != "" {
		s = strings.Replace(s, "event: approved", "event: approved\n      onTimeout: "+onTimeout, 1)
	}
	return s
}

// parked waits until the order's step i is armed: parked, waiting for its
// event or its time.
func (e *env) parked(id string, i int) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s step %d parked", id, i), 60*time.Second, func() bool {
		_, recs, err := e.stack.Store.Load(context.Background(), id)
		return err == nil && !recs[i].Armed.IsZero() && recs[i].State == workflow.Pending
	})
}

// signal sends an event to an order.
func (e *env) signal(id, event, eventID, data string) {
	e.t.Helper()
	ev := message.Event{OrderID: id, Event: event, EventID: eventID}
	if data != "" {
		ev.Data = json.RawMessage(data)
	}
	require.NoError(e.t, e.stack.Signal(context.Background(), ev))
}

// input is what a service got for the order's action (its first applied call).
func (e *env) input(id, action string) map[string]any {
	e.t.Helper()
	for _, eff := range e.sim.Ledger() {
		if eff.OrderID == id && eff.Action == action {
			var v map[string]any
			require.NoError(e.t, json.Unmarshal(eff.Input, &v))
			return v
		}
	}
	e.t.Fatalf("%s: no %s applied", id, action)
	return nil
}

// sweeps waits until the Supervisor has swept n more times: time passing,
// measured by the pipeline's own clock.
func (e *env) sweeps(n int) {
	e.t.Helper()
	from := e.stack.Stats.Snapshot()["supervisor"].Invocations
	e.eventually(fmt.Sprintf("%d supervisor sweeps", n), 60*time.Second, func() bool {
		return e.stack.Stats.Snapshot()["supervisor"].Invocations >= from+n
	})
}

// An order waits for a person's approval at no cost: once its wait is
// armed, no message circulates and no handler runs for it while the
// Supervisor keeps sweeping. The event's data becomes the wait's result, and
// the next step's input expression picks from it what is charged.
func TestAnOrderWaitsForItsApprovalAndChargesWhatWasApproved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, approval("1h", "")))
	e.order("o-ok", "")
	e.parked("o-ok", 1)
	// The reply that armed the wait is counted once its invocation returns,
	// a moment after the arming write: the count starts from there.
	replies := e.stack.Topology().AgentResponses("inventory").Name
	e.eventually("the arming reply counted", 30*time.Second, func() bool { return e.stack.Stats.Deliveries()[replies] >= 1 })
	before := e.stack.Stats.Deliveries()
	parked, err := e.stack.Store.Read(context.Background(), "o-ok")
	require.NoError(t, err)
	e.sweeps(5)
	for q, n := range e.stack.Stats.Deliveries() {
		// SQS may deliver a message again (the local queues do, one in
		// fifty, within 2 s of its receive): a queue may count one more
		// delivery of a message it delivered before, and none on a queue
		// that had none.
		require.Positive(t, before[q], "parked: nothing circulates while it waits (%s)", q)
		require.LessOrEqual(t, n, before[q]+1, "parked: nothing circulates while it waits (%s)", q)
	}
	still, err := e.stack.Store.Read(context.Background(), "o-ok")
	require.NoError(t, err)
	require.Equal(t, parked.Version(), still.Version(), "parked: no handler and no sweep wrote the order")
	e.signal("o-ok", "approved", "e-1", `{"amountCents":1998,"by":"ana"}`)
	tasks := e.waitEnded([]string{"o-ok"})
	require.Equal(t, workflow.Processed, tasks["o-ok"].State)
	e.requireLedger("o-ok", "reserve-inventory", "charge-payment")
	in := e.input("o-ok", "charge-payment")
	require.EqualValues(t, 1998, in["amountCents"], "the approval's data, through the step's input expression")
	require.Equal(t, "ana", in["approvedBy"])
	require.Equal(t, "o-ok", in["orderId"])
	res, err := e.stack.Store.Results(context.Background(), "o-ok", 1)
	require.NoError(t, err)
	require.JSONEq(t, `{"amountCents":1998,"by":"ana"}`, string(res[workflow.Ref{Index: 1}].JSON))
	require.Contains(t, string(res[workflow.Ref{Index: 2}].JSON), `"action":"charge-payment"`, "the service's answer kept")
	e.stop() // every invocation ended: its metrics are written
	require.EqualValues(t, 1, e.stack.Tally.Sum(metrics.EventsReceived))
}

// An event that arrives before the order reaches its wait is kept, and the
// wait takes it when it is armed (as Temporal keeps a signal).
func TestAnEventBeforeTheWaitIsKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, approval("1h", "")))
	e.sim.SetFaults("inventory", remotesim.Faults{Latency: 2 * time.Second}) // the event overtakes the first step
	e.order("o-early", "")
	e.eventually("the order stored", 30*time.Second, func() bool {
		_, _, err := e.stack.Store.Load(context.Background(), "o-early")
		return err == nil
	})
	e.signal("o-early", "approved", "e-early", `{"amountCents":500,"by":"bo"}`)
	e.eventually("the event kept", 30*time.Second, func() bool {
		task, _, err := e.stack.Store.Load(context.Background(), "o-early")
		return err == nil && task.Events["approved"] == "e-early"
	})
	require.Equal(t, workflow.Pending, e.step("o-early", 1).State, "kept: the order has not reached the wait")
	tasks := e.waitEnded([]string{"o-early"})
	require.Equal(t, workflow.Processed, tasks["o-early"].State)
	require.EqualValues(t, 500, e.input("o-early", "charge-payment")["amountCents"])
}

// An event read before its order is stored (sent just ahead of it, or read
// in the same batch) waits for its order a little, then comes back within
// seconds, and the wait takes it. The orders queue hides a message ten
// minutes here: only the prompt way can end the order in the test's time.
func TestAnEventAheadOfItsOrderIsTaken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		running(t, approval("1h", ""))(o)
		o.VisibilityTimeout = 10 * time.Minute
	})
	e.signal("o-ahead", "approved", "e-ahead", `{"amountCents":700,"by":"di"}`)
	e.eventually("the event sent back for later", 30*time.Second, func() bool {
		return strings.Contains(e.logs.String(), "record comes back later")
	})
	e.order("o-ahead", "")
	tasks := e.waitEnded([]string{"o-ahead"})
	require.Equal(t, workflow.Processed, tasks["o-ahead"].State)
	require.EqualValues(t, 700, e.input("o-ahead", "charge-payment")["amountCents"], "the early event's data")
}

// Events have their own queue: an order or a cancel sent there is refused
// with the reason; an event sent to the orders queue, as before this
// version, is still taken, with a warning in the log.
func TestTheEventsQueueTakesEventsAndTheOrdersQueueStillDoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, approval("1h", "")))
	e.order("o-q", "")
	e.parked("o-q", 1)
	require.NoError(t, e.stack.SendEvents(context.Background(), localrun.DemoOrder("o-misrouted", 1).JSON()))
	require.Contains(t, e.rejection(e.stack.Topology().EventsQueue().DLQName, `"orderId":"o-misrouted"`),
		"the events queue takes events only")
	b, err := json.Marshal(message.Event{Kind: message.KindEvent, OrderID: "o-q", Event: "approved", EventID: "e-old",
		Data: json.RawMessage(`{"amountCents":300,"by":"ed"}`)})
	require.NoError(t, err)
	require.NoError(t, e.stack.SendOrders(context.Background(), string(b)))
	require.Equal(t, workflow.Processed, e.waitEnded([]string{"o-q"})["o-q"].State)
	require.Contains(t, e.logs.String(), "an event on the orders queue: send events and callbacks to the events queue")
}

// An event is taken once: a repeat of its eventId is a no-op; one the order
// cannot take goes to the orders DLQ with the reason, never dropped in
// silence: another eventId for an event received, an event the workflow
// never waits for, an event for an order that ended or does not exist.
func TestEventsTheOrderCannotTakeAreRejectedWithTheReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, approval("1h", "")))
	dlq := e.stack.Topology().EventsQueue().DLQName
	e.order("o-ev", "")
	e.parked("o-ev", 1)
	e.signal("o-ev", "shipped", "e-x", "")
	require.Contains(t, e.rejection(dlq, `"event":"shipped"`), `workflow approval waits for no event "shipped"`)
	e.signal("o-ev", "approved", "e-1", `{"amountCents":100,"by":"cy"}`)
	e.waitEnded([]string{"o-ev"})
	e.signal("o-ev", "approved", "e-1", `{"amountCents":100,"by":"cy"}`) // a repeat: no-op
	e.signal("o-ev", "approved", "e-2", `{"amountCents":9,"by":"cy"}`)
	require.Contains(t, e.rejection(dlq, `"eventId":"e-2"`), "order o-ev is Processed: it waits for nothing")
	e.signal("o-none", "approved", "e-3", "")
	require.Contains(t, e.rejection(dlq, `"orderId":"o-none"`), "no such order")
	e.drained(e.stack.Topology().EventsQueue().Name) // the repeat was taken, one way or the other
	for body := range e.deadLetters(dlq) {
		require.NotContains(t, body, `"eventId":"e-1"`, "a repeat of an event taken is no error, also after the end")
	}
	require.EqualValues(t, 100, e.input("o-ev", "charge-payment")["amountCents"], "the first event's data, not a later one's")
}

// No approval by the wait's timeout: the step fails for good (alerted, the
// reserved stock released); with onTimeout: continue the order goes on with
// the wait's result null.
func TestAWaitTimesOutIntoFailureOrOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, approval("2s", "")))
	e.order("o-late", "")
	tasks := e.waitEnded([]string{"o-late"})
	require.Equal(t, workflow.Failed, tasks["o-late"].State, "its completed step undone")
	wait := e.step("o-late", 1)
	require.Equal(t, workflow.Error, wait.State)
	require.Equal(t, workflow.TimedOut, wait.Cause)
	require.Contains(t, wait.LastError, "no event by its timeout")
	e.requireLedger("o-late", "reserve-inventory", "release-inventory")
	require.Len(t, e.alerts(1), 1)

	on := newEnv(t, remotesim.Faults{}, running(t, approval("2s", "continue")))
	on.order("o-on", "")
	tasks = on.waitEnded([]string{"o-on"})
	require.Equal(t, workflow.Processed, tasks["o-on"].State, "it went on without the approval")
	in := on.input("o-on", "charge-payment")
	require.Nil(t, in["amountCents"], "the wait's result is null")
}

// A timer parks the order for its time, then the order goes on: a few
// writes in all (made ready, armed, woken, done), not one per look.
func TestATimerSleepsThenGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, `name: nap
agents:
  inventory: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/inventory"}
  payment: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/payment"}
defaults: {timeout: 3s}
steps:
  - name: reserve-inventory
    agent: inventory
  - name: cool-off
    sleep: 3s
  - name: charge-payment
    agent: payment
`))
	e.order("o-nap", "")
	e.parked("o-nap", 1)
	tasks := e.waitEnded([]string{"o-nap"})
	require.Equal(t, workflow.Processed, tasks["o-nap"].State)
	nap := e.step("o-nap", 1)
	require.GreaterOrEqual(t, nap.DoneAt.Sub(nap.Armed), 3*time.Second, "it slept its time")
	require.LessOrEqual(t, nap.Waits, 2, "the Supervisor looked at it once or twice, not once per sweep")
	charge := e.step("o-nap", 2)
	require.False(t, charge.ClaimedAt.Before(nap.DoneAt), "the next step ran after it")
}

// asyncFlow is a workflow whose payment step's service answers later.
const asyncFlow = `name: async
agents:
  inventory: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/inventory"}
  payment: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/payment"}
defaults: {timeout: 4s, maxFailures: 3}
steps:
  - name: reserve-inventory
    agent: inventory
    undo: {name: release-inventory}
  - name: charge-payment
    agent: payment
    async: true
    timeout: 6s
`

// An async step's service accepts the call and answers later with an event
// carrying the attempt's token: its answer is the step's result. A token is
// single-use.
func TestAnAsyncStepIsCompletedByItsCallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, asyncFlow))
	e.sim.SetFaults("payment", remotesim.Faults{CallbackDelay: time.Second})
	e.order("o-async", "")
	tasks := e.waitEnded([]string{"o-async"})
	require.Equal(t, workflow.Processed, tasks["o-async"].State)
	charge := e.step("o-async", 1)
	require.Equal(t, 1, charge.Attempt)
	require.Zero(t, charge.FailureCount)
	res, err := e.stack.Store.Results(context.Background(), "o-async", 1)
	require.NoError(t, err)
	require.Contains(t, string(res[workflow.Ref{Index: 1}].JSON), `"action":"charge-payment"`, "the callback's answer is its result")
	e.stop() // every invocation ended: its metrics are written
	require.EqualValues(t, 1, e.stack.Tally.Sum(metrics.EventsReceived))
}

// Cancelling an order whose async step's service has accepted the call
// (its answer an hour away) does not wait out the hour: the attempt is
// undone at once, then what came before it, and the order ends Cancelled.
func TestCancelUndoesAnAsyncStepItsServiceAccepted(t *testing.T) {
	t.Parallel()
	flow := strings.Replace(asyncFlow, "    async: true\n    timeout: 6s", "    async: true\n    timeout: 1h\n    undo: {name: refund-payment}", 1)
	e := newEnv(t, remotesim.Faults{}, running(t, flow))
	e.sim.SetFaults("payment", remotesim.Faults{CallbackDelay: time.Hour})
	e.order("o-acc", "")
	e.eventually("the charge accepted by its service", 60*time.Second, func() bool {
		_, recs, err := e.stack.Store.Load(context.Background(), "o-acc")
		return err == nil && !recs[1].AcceptedAt.IsZero()
	})
	e.cancelMessage("o-acc")
	tasks := e.waitEnded([]string{"o-acc"})
	require.Equal(t, workflow.Cancelled, tasks["o-acc"].State)
	e.requireLedger("o-acc", "reserve-inventory", "charge-payment", "refund-payment", "release-inventory")
}

// A wait that names its senders takes the event of one of them, and sends
// another's to the DLQ with the reason. (moto says every message was sent by
// AIDAIT2UOQQY3AUEKVGXU.)
func TestAWaitTakesOnlyTheEventsOfTheSendersItNames(t *testing.T) {
	t.Parallel()
	only := func(sender string) string {
		return strings.Replace(approval("1h", ""), "event: approved", "event: approved\n      senders: ["+sender+"]", 1)
	}
	e := newEnv(t, remotesim.Faults{}, running(t, only("AROAAPPROVERS")))
	e.order("o-who", "")
	e.parked("o-who", 1)
	e.signal("o-who", "approved", "e-1", `{"amountCents":1998,"by":"mallory"}`)
	reason := e.rejection(e.stack.Topology().EventsQueue().DLQName, "mallory")
	require.Contains(t, reason, `event "approved" for order o-who: its sender "AIDAIT2UOQQY3AUEKVGXU" is not one step await-approval takes it from (senders: AROAAPPROVERS)`)
	_, recs, err := e.stack.Store.Load(context.Background(), "o-who")
	require.NoError(t, err)
	require.Equal(t, workflow.Pending, recs[1].State, "still waiting")

	x := newEnv(t, remotesim.Faults{}, running(t, only("AIDAIT2UOQQY3AUEKVGXU")))
	x.order("o-ok", "")
	x.parked("o-ok", 1)
	x.signal("o-ok", "approved", "e-1", `{"amountCents":1998,"by":"ana"}`)
	tasks := x.waitEnded([]string{"o-ok"})
	require.Equal(t, workflow.Processed, tasks["o-ok"].State)
}

// A callback that never comes: the attempt is recovered at its CompleteBy
// and tried again with a new token; the service then answers. The first
// attempt's token, arriving late, is refused with the reason.
func TestALostCallbackIsRecoveredAndItsTokenRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, asyncFlow))
	var first message.Event
	e.sim.OnCallback(func(c remotesim.Callback) {
		if first.Token == "" {
			first = message.Event{OrderID: c.OrderID, Token: c.Token, Data: c.Answer} // lost, for now
			return
		}
		e.stack.Callbacks(nil)(c)
	})
	e.order("o-lost", "")
	tasks := e.waitEnded([]string{"o-lost"})
	require.Equal(t, workflow.Processed, tasks["o-lost"].State)
	charge := e.step("o-lost", 1)
	require.Equal(t, 2, charge.Attempt)
	require.Equal(t, 1, charge.FailureCount, "no callback by CompleteBy: the attempt failed")
	require.Contains(t, charge.Incidents[0].What, "no callback by")
	require.NoError(t, e.stack.Signal(context.Background(), first))
	reason := e.rejection(e.stack.Topology().EventsQueue().DLQName, first.Token)
	require.Contains(t, reason, "the token of attempt 1 of charge-payment was used, or its attempt recovered, or the order ended")
	e.requireLedger("o-lost", "reserve-inventory", "charge-payment")
}

// A waiting order can be cancelled (its wait stops, its completed steps are
// undone) and is failed by its deadline like any other.
func TestAWaitingOrderIsCancelledOrExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, approval("1h", "")))
	e.order("o-cx", "")
	e.parked("o-cx", 1)
	e.cancelMessage("o-cx")
	tasks := e.waitEnded([]string{"o-cx"})
	require.Equal(t, workflow.Cancelled, tasks["o-cx"].State)
	e.requireLedger("o-cx", "reserve-inventory", "release-inventory")

	x := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		running(t, strings.Replace(approval("1h", ""), "\n      timeout: 1h", "", 1))(o) // the deadline bounds the wait
		o.Settings.OrderDeadline = 3 * time.Second
	})
	x.order("o-dl", "")
	tasks = x.waitEnded([]string{"o-dl"})
	require.Equal(t, workflow.Failed, tasks["o-dl"].State)
	require.Equal(t, workflow.Expired, x.step("o-dl", 1).Cause, "the deadline, the one clock that fails a waiting order")
}

// resultFlow passes results on: the charge is given the reservation's
// answer, and the refund, when the shipment is refused, the charge's.
const resultFlow = `name: results
resultLimit: 2KB
agents:
  inventory: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/inventory"}
  payment: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/payment"}
  shipping: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/shipping"}
defaults: {timeout: 4s}
steps:
  - name: reserve-inventory
    agent: inventory
    undo: {name: release-inventory}
  - name: charge-payment
    agent: payment
    input: '{order: .order.orderId, reservedAt: .results["reserve-inventory"].appliedAt}'
    undo: {name: refund-payment}
  - name: create-shipment
    agent: shipping
`

// Results flow to the steps after them and to an undo, and a result over
// the workflow's limit fails its step for good, with a reason naming the
// sizes (its own undo runs: its service applied it; an undo's oversized
// answer is not kept, and fails nothing).
func TestResultsFlowOnAndAnOversizedOneFailsItsStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, resultFlow))
	e.sim.SetFaults("shipping", remotesim.Faults{PermanentOrders: []string{"o-ship"}})
	e.order("o-ship", "")
	tasks := e.waitEnded([]string{"o-ship"})
	require.Equal(t, workflow.Failed, tasks["o-ship"].State)
	reserved := e.input("o-ship", "charge-payment")
	require.NotEmpty(t, reserved["reservedAt"], "the reservation's answer, through the charge's input")
	refund := e.input("o-ship", "refund-payment")
	require.Equal(t, "charge-payment", refund["result"].(map[string]any)["action"], "the refund is given the charge's answer")
	e.requireLedger("o-ship", "reserve-inventory", "charge-payment", "refund-payment", "release-inventory")

	e.sim.SetFaults("payment", remotesim.Faults{ResultBytes: 3000})
	e.order("o-big", "")
	tasks = e.waitEnded([]string{"o-big"})
	require.Equal(t, workflow.Failed, tasks["o-big"].State)
	charge := e.step("o-big", 1)
	require.Equal(t, workflow.Oversized, charge.Cause)
	require.Contains(t, charge.LastError, "over workflow results's 2048-byte result limit")
	require.Equal(t, workflow.Processed, e.records("o-big")[workflow.Ref{Index: 1, Undo: true}].State,
		"the refund's answer was as large: not kept, and the refund done")
	e.requireLedger("o-big", "reserve-inventory", "charge-payment", "refund-payment", "release-inventory")
}

// until: a timer whose time comes from a result: the charge waits until three
// seconds after the reservation was applied, as its service answered.
func TestATimerUntilATimeFromAResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, `name: until
agents:
  inventory: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/inventory"}
  payment: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/payment"}
defaults: {timeout: 3s}
steps:
  - name: reserve-inventory
    agent: inventory
  - name: settle
    until: '(.results["reserve-inventory"].appliedAt | .[0:19] + "Z" | fromdate) + 3'
  - name: charge-payment
    agent: payment
`))
	e.order("o-until", "")
	tasks := e.waitEnded([]string{"o-until"})
	require.Equal(t, workflow.Processed, tasks["o-until"].State)
	var reserved, charged time.Time
	for _, eff := range e.sim.Ledger() {
		switch eff.Action {
		case "reserve-inventory":
			reserved = eff.AppliedAt
		case "charge-payment":
			charged = eff.AppliedAt
		}
	}
	require.False(t, charged.Before(reserved.Truncate(time.Second).Add(3*time.Second)),
		"charged at %s, reserved at %s: the timer waited for the time the result gave", charged, reserved)
}

// An until that gives no instant (a time without its UTC offset) fails its
// timer at once, with the reason, and what was done before it is undone,
// rather than parking the order until its deadline.
func TestATimerWhoseUntilGivesNoInstantFailsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, `name: until
agents:
  inventory: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/inventory"}
deadline: 1h
defaults: {timeout: 3s}
steps:
  - name: reserve-inventory
    agent: inventory
    undo: {name: release-inventory}
  - name: deliver-after
    until: .order.deliverAfter
`))
	require.NoError(t, e.stack.SendOrders(context.Background(), `{"orderId":"o-local","deliverAfter":"2026-12-01T10:00:00"}`))
	tasks := e.waitEnded([]string{"o-local"})
	require.Equal(t, workflow.Failed, tasks["o-local"].State)
	timer := e.step("o-local", 1)
	require.Equal(t, workflow.Refused, timer.Cause)
	require.Equal(t, `until: "2026-12-01T10:00:00" has no UTC offset (end it with Z or one like +01:00)`, timer.LastError)
	e.requireLedger("o-local", "reserve-inventory", "release-inventory")
}

// A waiting order failed by its wait's timeout is resubmitted: it runs again
// in a new round, its wait armed again, and an event (its eventId new to the
// round) completes it.
func TestAWaitingOrderResubmittedWaitsAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, remotesim.Faults{}, running(t, approval("2s", "")))
	e.order("o-again", "")
	tasks := e.waitEnded([]string{"o-again"})
	require.Equal(t, workflow.Failed, tasks["o-again"].State, "no approval by the timeout")
	_, err := e.operatorOf().Resubmit(context.Background(), "o-again", "")
	require.NoError(t, err)
	e.eventually("round 2 parked at its wait", 60*time.Second, func() bool {
		task, recs, err := e.stack.Store.Load(context.Background(), "o-again")
		return err == nil && task.Round == 2 && !recs[1].Armed.IsZero() && recs[1].State == workflow.Pending
	})
	e.signal("o-again", "approved", "e-r2", `{"amountCents":700,"by":"dee"}`)
	e.eventually("processed in round 2", 60*time.Second, func() bool {
		task, _, err := e.stack.Store.Load(context.Background(), "o-again")
		return err == nil && task.State == workflow.Processed
	})
	task, _, err := e.stack.Store.Load(context.Background(), "o-again")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"approved": "e-r2"}, task.Events, "the round's events, not the first round's")
	require.EqualValues(t, 700, e.input("o-again", "charge-payment")["amountCents"])
}
