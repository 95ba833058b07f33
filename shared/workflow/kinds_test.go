package workflow_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

func TestTheApprovalExampleWaitsThenUsesTheApproval(t *testing.T) {
	t.Parallel()
	d := workflow.MustExample("approval")
	require.Equal(t, []workflow.Kind{workflow.KindAgent, workflow.KindEvent, workflow.KindAgent},
		[]workflow.Kind{d.Steps[0].Kind(), d.Steps[1].Kind(), d.Steps[2].Kind()})
	require.Equal(t, &workflow.Wait{Event: "approved", Timeout: 72 * time.Hour}, d.Steps[1].Wait)
	require.Equal(t, []string{"inventory", "payment"}, d.Agents(), "a wait calls no agent")
	i, ok := d.WaitFor("approved")
	require.True(t, ok)
	require.Equal(t, 1, i)

	doc := workflow.Document{Order: json.RawMessage(`{"orderId":"o-1","customerId":"c-1"}`),
		Results: map[string]json.RawMessage{"await-approval": json.RawMessage(`{"amountCents":1998,"by":"ana"}`)}}
	in, err := d.Steps[2].InputFor(doc)
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"o-1","customerId":"c-1","amountCents":1998,"approvedBy":"ana"}`, string(in))

	doc.Result = json.RawMessage(`{"chargeId":"ch-9"}`)
	in, err = d.Steps[2].Undo.InputFor(doc)
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"o-1","charge":{"chargeId":"ch-9"}}`, string(in), "an undo is given its step's result, and the order's id")
	doc.Result = nil // the charge timed out: its answer never came
	in, err = d.Steps[2].Undo.InputFor(doc)
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"o-1","charge":null}`, string(in), "the refund still finds the charge by the order")
}

// With no input expression a step receives its whole document.
func TestTheDefaultInputIsTheDocument(t *testing.T) {
	t.Parallel()
	a := workflow.MustExample("order").Steps[1].Action
	in, err := a.InputFor(workflow.Document{Order: json.RawMessage(`{"orderId":"o-1"}`),
		Results: map[string]json.RawMessage{"reserve-inventory": json.RawMessage(`{"held":2}`)}})
	require.NoError(t, err)
	require.JSONEq(t, `{"order":{"orderId":"o-1"},"results":{"reserve-inventory":{"held":2}}}`, string(in))
	in, err = a.InputFor(workflow.Document{Order: json.RawMessage(`{"orderId":"o-1"}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"order":{"orderId":"o-1"},"results":{}}`, string(in), "no results: an empty map, never null")
}

// An input expression that never ends is stopped, with the reason, rather
// than holding its handler's batch.
func TestAnInputExpressionThatLoopsIsStopped(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("loop.yaml", []byte(`name: loop
agents: {shop: {endpoint: 'http://shop'}}
steps:
  - {name: s, agent: shop, timeout: 1s, input: 'def f: f; f'}
`), workflow.Options{})
	require.NoError(t, err)
	_, err = d.Steps[0].InputFor(workflow.Document{Order: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, context.DeadlineExceeded, "stopped at MaxJQTime")
}

const parked = `name: parked
deadline: 48h
resultLimit: 16KB
agents:
  shop: {endpoint: http://shop.internal}
steps:
  - name: hold
    agent: shop
    async: true
    timeout: 6h
  - name: cool-off
    sleep: 2h
  - name: remind-at
    until: .order.remindAt
  - name: approve
    wait: {event: approved, timeout: 24h, onTimeout: continue}
`

func TestParkedStepsAndAsyncStepsParse(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("parked.yaml", []byte(parked), workflow.Options{MaxStepTimeout: 25 * time.Second})
	require.NoError(t, err, "an async step's timeout bounds its callback, not its agent function")
	require.True(t, d.Steps[0].Async)
	require.Equal(t, 16<<10, d.Limit())
	require.Equal(t, workflow.KindTimer, d.Steps[1].Kind())
	require.Equal(t, 2*time.Hour, d.Steps[1].Sleep.For)
	require.True(t, d.Steps[3].Wait.Continue)

	ready := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	at, err := d.Steps[1].Sleep.When(ready, workflow.Document{})
	require.NoError(t, err)
	require.Equal(t, ready.Add(2*time.Hour), at)
	for order, want := range map[string]time.Time{
		`{"remindAt":"2026-11-26T09:30:00Z"}`: time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC),
		`{"remindAt":1795000000}`:             time.Unix(1795000000, 0),
	} {
		at, err = d.Steps[2].Sleep.When(ready, workflow.Document{Order: json.RawMessage(order)})
		require.NoError(t, err, order)
		require.True(t, want.Equal(at), "%s: %s", order, at)
	}
	_, err = d.Steps[2].Sleep.When(ready, workflow.Document{Order: json.RawMessage(`{"remindAt":"next tuesday"}`)})
	require.ErrorContains(t, err, "not an RFC 3339 time")
	over := d.With(workflow.Settings{StepTimeout: 5 * time.Second})
	require.True(t, d.Steps[0].Async)
	require.Equal(t, d.Steps[0].Timeout, over.Steps[0].Timeout, "an async step keeps its timeout: it bounds a callback, not a call")
	sync := workflow.Orders(workflow.Settings{}).With(workflow.Settings{StepTimeout: 5 * time.Second})
	require.Equal(t, 5*time.Second, sync.Steps[0].Timeout, "an override reaches a step answered at once")
	require.Equal(t, d.Steps[3].Wait, over.Steps[3].Wait, "and leaves waits and timers as written")
	require.Equal(t, d.Steps[1].Sleep.For, over.Steps[1].Sleep.For)
}

const badParked = `name: bad
deadline: 24h
resultLimit: 1MB
agents:
  shop: {endpoint: http://shop.internal}
steps:
  - name: charge
    agent: shop
    input: '{amount: .order.total'
  - name: approve
    agent: shop
    wait: {event: approved, timeout: 72h, onTimeout: retry}
  - name: approve-again
    wait: {event: approved}
  - name: later
    until: .order.(
`

// Every problem of the new fields is reported at once, with its line and
// field: a jq expression that does not compile, a wait with an agent, a
// timeout past the deadline, an event waited for twice.
func TestParkedStepsProblemsNameTheLineAndField(t *testing.T) {
	t.Parallel()
	_, err := workflow.ParseFile("bad.yaml", []byte(badParked), workflow.Options{})
	ps := problems(err)
	require.Contains(t, ps, `bad.yaml:3: resultLimit: "1MB" is not a size like 4096 or 4KB`)
	require.Contains(t, joined(ps), "bad.yaml:9: steps[0].input: jq: ")
	require.Contains(t, ps, `bad.yaml:11: steps[1].agent: step "approve" waits or sleeps: it calls no agent, so it has no agent`)
	require.Contains(t, ps, `bad.yaml:12: steps[1].wait.timeout: 72h0m0s is longer than the order's deadline (24h0m0s), which would fail the order first: raise deadline`)
	require.Contains(t, ps, `bad.yaml:12: steps[1].wait.onTimeout: "retry": say fail (the default: the step fails for good) or continue`)
	require.Contains(t, ps, `bad.yaml:14: steps[2].wait.event: event "approved" is waited for by another step: each event is waited for once`)
	require.Contains(t, joined(ps), "bad.yaml:16: steps[3].until: jq: ")

	_, err = workflow.ParseFile("long.yaml", []byte("name: long\ndeadline: 1h\nagents: {a: {endpoint: 'http://a'}}\n"+
		"steps:\n  - {name: s, agent: a, timeout: 1s}\n  - {name: nap, sleep: 2h}\n"), workflow.Options{})
	require.Contains(t, problems(err), "long.yaml:6: steps[1].sleep: 2h0m0s is not shorter than the order's deadline (1h0m0s), "+
		"which would fail the order first: raise deadline")
}

func joined(ps []string) string {
	out := ""
	for _, p := range ps {
		out += p + "\n"
	}
	return out
}

// A parked record found due: a timer is woken; a wait that goes on at its
// timeout (or whose event was kept) is woken; any other wait fails for good
// at its timeout; the order's deadline fails any.
func TestDecideWakesTimersAndTimesOutWaits(t *testing.T) {
	t.Parallel()
	p := time.Minute
	d := func(f workflow.Found) workflow.Decision { return workflow.Decide(f, p) }
	require.Equal(t, workflow.Decision{Verdict: workflow.Wake, After: p}, d(workflow.Found{State: workflow.Pending, Parked: workflow.KindTimer}))
	require.Equal(t, workflow.Wake, d(workflow.Found{State: workflow.Pending, Parked: workflow.KindEvent, Continue: true}).Verdict)
	require.Equal(t, workflow.Wake, d(workflow.Found{State: workflow.Pending, Parked: workflow.KindEvent, EventKept: true}).Verdict)
	require.Equal(t, workflow.Decision{Verdict: workflow.GiveUp}, d(workflow.Found{State: workflow.Pending, Parked: workflow.KindEvent}))
	require.Equal(t, workflow.GiveUp, d(workflow.Found{State: workflow.Pending, Parked: workflow.KindTimer, PastDeadline: true}).Verdict)
	require.Equal(t, workflow.Resend, d(workflow.Found{State: workflow.Pending}).Verdict, "not armed yet: its start may be lost")

	// Woken before and found again: its wake is lost, or waits behind a
	// backlog. Held while the scheduler queue is backlogged; woken again
	// otherwise, looked at again at growing intervals either way.
	again := workflow.Found{State: workflow.Pending, Parked: workflow.KindTimer, SinceWoken: 5 * time.Minute}
	require.Equal(t, workflow.Decision{Verdict: workflow.Wake, After: 5 * time.Minute}, d(again))
	again.Backlogged = true
	require.Equal(t, workflow.Decision{Verdict: workflow.Hold, After: 5 * time.Minute}, d(again))
	again.SinceWoken = 2 * time.Hour
	require.Equal(t, workflow.MaxRecoveryDelay, d(again).After)
}
