package sastest_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/sastest"
	"github.com/sas-go/sas/shared/workflow"
)

// kit is a kit of a workflow written in the test.
func kit(t *testing.T, yaml string) *sastest.Kit {
	t.Helper()
	d, err := workflow.ParseFile("test.yaml", []byte(yaml), workflow.Options{})
	require.NoError(t, err)
	return sastest.NewOf(t, d)
}

const line = `name: line
defaults: {timeout: 10s, maxFailures: 3, retryBackoff: 5s}
agents:
  shop: {endpoint: "http://shop"}
steps:
  - name: reserve
    agent: shop
    undo: {name: release}
  - name: charge
    agent: shop
    undo: {name: refund, input: '{charge: .result}'}
  - name: ship
    agent: shop
`

// by answers each action as the map says (OK(nil) for the others).
func by(answers map[string]func(sastest.Call) sastest.Answer) sastest.Handler {
	return func(c sastest.Call) sastest.Answer {
		if f, ok := answers[c.Action]; ok {
			return f(c)
		}
		return sastest.OK(nil)
	}
}

// A transient failure is called again within its attempt; an attempt that
// hangs ends at its CompleteBy and is retried after the step's backoff; at
// maxFailures the step fails and the order is undone, the step's own undo
// first (its call may have taken effect).
func TestRetriesFollowTheWorkflowsTimeoutsAndBackoff(t *testing.T) {
	k := kit(t, line)
	n := 0
	k.Handle("shop", by(map[string]func(sastest.Call) sastest.Answer{
		"charge": func(c sastest.Call) sastest.Answer {
			if c.OrderID == "o-2" {
				return sastest.Hang()
			}
			if n++; n <= 2 {
				return sastest.Transient("503")
			}
			return sastest.OK(map[string]string{"charge": "ch-1"})
		},
	}))
	o := k.Submit(`{"orderId":"o-1"}`)
	k.Run()
	require.Equal(t, workflow.Processed, o.State())
	charge, _ := o.Step("charge")
	require.Equal(t, 1, charge.Attempt, "two transient failures, called again within the attempt")
	require.Zero(t, charge.FailureCount)
	require.Len(t, k.Calls("shop"), 5, "reserve, charge three times, ship")

	hung := k.Submit(`{"orderId":"o-2"}`)
	start := k.Now()
	k.Run()
	require.Equal(t, workflow.Failed, hung.State())
	charge, _ = hung.Step("charge")
	require.Equal(t, workflow.Error, charge.State)
	require.Equal(t, workflow.TimedOut, charge.Cause)
	require.Equal(t, 3, charge.Attempt)
	require.Equal(t, 3, charge.FailureCount)
	require.Equal(t, []string{"refund", "release"}, hung.Undone(), "its own undo first, then the earlier step's")
	calls := k.Calls("shop")
	refund := calls[len(calls)-2]
	require.Equal(t, "refund", refund.Action)
	require.JSONEq(t, `{"charge":null}`, string(refund.Input), "no answer came: its undo reads none")
	require.Equal(t, "o-2/refund", refund.Key)
	// Three attempts of 10 s, 5 s then 10 s apart (retryBackoff doubling).
	require.Equal(t, start.Add(45*time.Second), hung.EndedAt())
}

// An async step: accepted, then answered by a callback later (Later), or
// by the test's own Callback; a used token is refused.
func TestAnAsyncStepIsAnsweredByItsCallback(t *testing.T) {
	k := kit(t, `name: async
agents:
  pay: {endpoint: "http://pay"}
steps:
  - name: charge
    agent: pay
    async: true
    timeout: 1h
    maxFailures: 1
    undo: {name: refund, timeout: 5s}
`)
	var token string
	k.Handle("pay", by(map[string]func(sastest.Call) sastest.Answer{
		"charge": func(c sastest.Call) sastest.Answer {
			if c.OrderID == "o-1" {
				return sastest.Later(20*time.Minute, sastest.OK(map[string]int{"charged": 1}))
			}
			token = c.Token
			return sastest.Accept()
		},
	}))
	o := k.Submit(`{"orderId":"o-1"}`)
	k.Run()
	require.Equal(t, workflow.Processed, o.State())
	require.Equal(t, sastest.Epoch.Add(20*time.Minute), k.Now(), "answered 20 minutes later")
	require.JSONEq(t, `{"charged":1}`, string(o.Result("charge")))

	o2 := k.Submit(`{"orderId":"o-2"}`)
	k.Run()
	require.Equal(t, workflow.Pending, o2.State(), "it waits for its callback")
	require.NotEmpty(t, token)
	require.NoError(t, k.Callback(token, sastest.Refuse("card declined")))
	k.Run()
	require.Equal(t, workflow.Failed, o2.State())
	require.ErrorContains(t, k.Callback(token, sastest.OK(nil)), "was used, or its attempt ended")

	o3 := k.Submit(`{"orderId":"o-3"}`)
	k.Run()
	k.Advance(time.Hour) // no callback by its timeout: it may have taken effect, its undo runs
	require.Equal(t, workflow.Failed, o3.State())
	require.Equal(t, []string{"refund"}, o3.Undone())
}

// A timer sleeps on the virtual clock; a forEach step's items each get
// their item and index; an input expression that fails on the document
// refuses its step.
func TestTimersItemsAndInputs(t *testing.T) {
	k := kit(t, `name: items
agents:
  shop: {endpoint: "http://shop"}
defaults: {timeout: 5s}
steps:
  - name: cool-off
    sleep: 2h
  - name: pack
    agent: shop
    forEach: items
    input: '{sku: .item.sku, at: .index}'
  - name: label
    agent: shop
    input: '{labels: (.results.pack | length), first: .results.pack[0].packed}'
`)
	k.Handle("shop", by(map[string]func(sastest.Call) sastest.Answer{
		"pack": func(c sastest.Call) sastest.Answer {
			var in struct{ SKU string }
			require.NoError(t, json.Unmarshal(c.Input, &in))
			return sastest.OK(map[string]string{"packed": in.SKU})
		},
	}))
	o := k.Submit(`{"orderId":"o-1","items":[{"sku":"A"},{"sku":"B"}]}`)
	k.Run()
	require.Equal(t, workflow.Processed, o.State())
	calls := k.Calls("shop")
	require.Len(t, calls, 3)
	require.Equal(t, sastest.Epoch.Add(2*time.Hour), calls[0].At, "after its 2 h sleep")
	require.JSONEq(t, `{"sku":"A","at":0}`, string(calls[0].Input))
	require.JSONEq(t, `{"sku":"B","at":1}`, string(calls[1].Input))
	require.Equal(t, "pack#2", calls[1].Step)
	require.JSONEq(t, `{"labels":2,"first":"A"}`, string(calls[2].Input))

	bad := k.Submit(`{"orderId":"o-2","items":[{"sku":"A"}],"x":1}`)
	k.Handle("shop", func(c sastest.Call) sastest.Answer { return sastest.OK("a string, not an object") })
	k.Run()
	require.Equal(t, workflow.CompensationFailed, bad.State(), "pack took effect and has no undo: the undoing stops there")
	label, _ := bad.Step("label")
	require.Equal(t, workflow.Refused, label.Cause)
	require.Contains(t, label.LastError, "label's input")
}

// A cancel stops what is ready, awaits what runs and undoes what
// completed; an event for an order that waits for nothing is refused.
func TestCancelsAndEvents(t *testing.T) {
	k := sastest.NewOf(t, workflow.MustExample("approval"))
	o := k.Submit(order)
	k.Run()
	require.ErrorContains(t, k.Signal("o-1", "nope", nil), `waits for no event "nope"`)
	require.NoError(t, k.Cancel("o-1"))
	k.Run()
	require.Equal(t, workflow.Cancelled, o.State())
	require.Equal(t, []string{"release-inventory"}, o.Undone())
	require.ErrorContains(t, k.Signal("o-1", "approved", nil), "order o-1 is Cancelled: it waits for nothing")
	require.ErrorContains(t, k.Cancel("o-9"), "order o-9 not found")

	// An event before its wait is ready is kept for it.
	early := k.Submit(strings.Replace(order, `"o-1"`, `"o-2"`, 1))
	require.NoError(t, k.Signal("o-2", "approved", map[string]any{"amountCents": 1, "by": "bo"}))
	k.Run()
	require.Equal(t, workflow.Processed, early.State())
}

// A step that holds its order on failure: the order waits for its
// operator, who retries it, skips it with a result, or undoes it; past its
// hold it is undone.
func TestAHeldOrderWaitsForItsOperator(t *testing.T) {
	held := strings.Replace(line, "  - name: charge\n    agent: shop\n", "  - name: charge\n    agent: shop\n    onFailure: hold\n    holdFor: 2h\n", 1)
	k := kit(t, held)
	declined := map[string]bool{"o-retry": true, "o-skip": true, "o-undo": true, "o-late": true}
	k.Handle("shop", by(map[string]func(sastest.Call) sastest.Answer{
		"charge": func(c sastest.Call) sastest.Answer {
			if declined[c.OrderID] {
				return sastest.Refuse("card expired")
			}
			return sastest.OK(map[string]string{"charge": "ch"})
		},
	}))
	orders := map[string]*sastest.Order{}
	for id := range declined {
		orders[id] = k.Submit(`{"orderId":"` + id + `"}`)
	}
	k.Run()
	for id, o := range orders {
		require.Equal(t, workflow.Held, o.State(), id)
		require.Empty(t, o.Undone(), id)
	}
	declined["o-retry"] = false // the card is replaced
	require.NoError(t, k.Retry("o-retry", "charge"))
	require.NoError(t, k.Skip("o-skip", "charge", map[string]string{"charge": "by phone"}))
	require.NoError(t, k.Undo("o-undo"))
	k.Run()
	require.Equal(t, workflow.Processed, orders["o-retry"].State())
	require.Equal(t, workflow.Processed, orders["o-skip"].State())
	require.JSONEq(t, `{"charge":"by phone"}`, string(orders["o-skip"].Result("charge")))
	require.Equal(t, workflow.Failed, orders["o-undo"].State())
	require.Equal(t, []string{"release"}, orders["o-undo"].Undone())
	require.Equal(t, workflow.Held, orders["o-late"].State())
	require.Error(t, k.Retry("o-undo", "charge"), "not held")
	k.Advance(2 * time.Hour)
	require.Equal(t, workflow.Failed, orders["o-late"].State(), "undone when its hold ended")
}

// The order's deadline fails what is at work; an answer over the result
// limit fails its step (it took effect: its undo runs).
func TestDeadlinesAndResultLimits(t *testing.T) {
	k := kit(t, `name: slow
deadline: 1m
resultLimit: 10
defaults: {timeout: 5s}
agents:
  shop: {endpoint: "http://shop"}
steps:
  - name: reserve
    agent: shop
    undo: {name: release}
  - name: charge
    agent: shop
    maxFailures: 100
    undo: {name: refund}
`)
	k.Handle("shop", by(map[string]func(sastest.Call) sastest.Answer{
		"charge": func(sastest.Call) sastest.Answer { return sastest.Hang() },
	}))
	o := k.Submit(`{"orderId":"o-1"}`)
	k.Run()
	require.Equal(t, workflow.Pending, o.State(), "Run stops at the deadline: only time passing brings it")
	require.True(t, k.Now().Before(sastest.Epoch.Add(time.Minute)))
	k.Advance(time.Minute)
	require.Equal(t, workflow.Failed, o.State())
	charge, _ := o.Step("charge")
	require.Equal(t, workflow.Expired, charge.Cause)
	require.Equal(t, []string{"refund", "release"}, o.Undone(), "the running attempt may have taken effect")

	k.Handle("shop", func(sastest.Call) sastest.Answer { return sastest.OK("more than ten bytes") })
	big := k.Submit(`{"orderId":"o-2"}`)
	k.Run()
	require.Equal(t, workflow.Failed, big.State())
	reserve, _ := big.Step("reserve")
	require.Equal(t, workflow.Oversized, reserve.Cause)
	require.Equal(t, []string{"release"}, big.Undone(), "it took effect: its own undo runs (its answer over the limit is not kept)")
}

// The test docs/workflows.md shows, as it is written there (the example
// file loaded from its path).
func TestTheDocsExample(t *testing.T) {
	k := sastest.New(t, "../workflow/examples/approval.yaml")
	k.Handle("inventory", func(c sastest.Call) sastest.Answer { return sastest.OK(map[string]string{"reservation": "r-1"}) })
	calls := 0
	k.Handle("payment", func(c sastest.Call) sastest.Answer {
		if calls++; calls == 1 {
			return sastest.Transient("503") // called again 50 ms later, within the attempt
		}
		return sastest.OK(map[string]string{"charge": "ch-1"})
	})
	o := k.Submit(`{"orderId":"o-1","customerId":"c-7","items":[{"sku":"A-1","quantity":1,"unitPriceCents":499}]}`)
	k.Run()
	k.Advance(48 * time.Hour)
	require.NoError(t, k.Signal("o-1", "approved", map[string]any{"amountCents": 2248, "by": "ana"}))
	k.Run()
	require.Equal(t, workflow.Processed, o.State())
	require.Len(t, k.Calls("payment"), 2)
	step, _ := o.Step("charge-approved")
	require.Equal(t, 1, step.Attempt)
}
