package sastest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/sastest"
	"github.com/sas-go/sas/shared/workflow"
)

// ats are when each call was made, from the kit's start.
func ats(calls []sastest.Call) []time.Duration {
	out := make([]time.Duration, len(calls))
	for i, c := range calls {
		out[i] = c.At.Sub(sastest.Epoch)
	}
	return out
}

// A refusal is a test's to assert: TrySubmit returns it, as Submission
// refuses the order (its schema's field at fault, an order twice).
func TestTrySubmitReturnsTheRefusal(t *testing.T) {
	k := sastest.NewOf(t, workflow.MustExample("approval"))
	o, err := k.TrySubmit(`{"orderId":"o-1","items":[]}`)
	require.ErrorContains(t, err, "order o-1: ")
	require.ErrorContains(t, err, "missing property 'customerId'")
	require.Nil(t, o)
	require.Nil(t, k.Order("o-1"), "a refused order is not kept")
	_, err = k.TrySubmit(`{"customerId":"c-1"}`)
	require.ErrorContains(t, err, "an order is a JSON object with its id, a string, as its orderId (workflow approval's id field)")

	o, err = k.TrySubmit(order)
	require.NoError(t, err)
	require.NotNil(t, o)
	_, err = k.TrySubmit(order)
	require.ErrorContains(t, err, "order o-1 submitted twice")
}

// A forEach step's result is its items' results, a list in item order (an
// item with no result null), as the steps after it read it.
func TestAForEachStepsResultIsItsItemsList(t *testing.T) {
	k := kit(t, `name: items
agents:
  shop: {endpoint: "http://shop"}
defaults: {timeout: 5s}
steps:
  - name: pack
    agent: shop
    forEach: items
    input: .item
  - name: label
    agent: shop
    input: .results.pack
`)
	k.Handle("shop", func(c sastest.Call) sastest.Answer {
		if c.Action == "pack" && c.Item == 2 {
			return sastest.OK(nil) // no result
		}
		if c.Action == "pack" {
			return sastest.OK(map[string]any{"packed": c.Item})
		}
		return sastest.OK(nil)
	})
	o := k.Submit(`{"orderId":"o-1","items":[{"sku":"A"},{"sku":"B"},{"sku":"C"}]}`)
	k.Run()
	require.Equal(t, workflow.Processed, o.State())
	require.JSONEq(t, `[{"packed":1},null,{"packed":3}]`, string(o.Result("pack")))
	require.JSONEq(t, `{"packed":3}`, string(o.Result("pack#3")))
	label := k.Calls("shop")[3]
	require.JSONEq(t, string(o.Result("pack")), string(label.Input), "what the next step reads")
	require.Nil(t, o.Result("nope"))
}

// An event is sent by a sender (From): a wait naming its senders takes
// only theirs, a role's every session if it names the role.
func TestSignalFromASender(t *testing.T) {
	k := kit(t, `name: approve
agents:
  shop: {endpoint: "http://shop"}
defaults: {timeout: 5s}
steps:
  - name: await-approval
    wait: {event: approved, timeout: 1h, senders: [AROAAPPROVER]}
  - name: charge
    agent: shop
`)
	o := k.Submit(`{"orderId":"o-1"}`)
	k.Run()
	require.ErrorContains(t, k.Signal("o-1", "approved", nil),
		`event "approved" for order o-1: its sender "" is not one step await-approval takes it from (senders: AROAAPPROVER`)
	require.ErrorContains(t, k.Signal("o-1", "approved", nil, sastest.From("AIDAMALLORY")), `its sender "AIDAMALLORY" is not one`)
	require.Equal(t, workflow.Pending, o.State())
	require.NoError(t, k.Signal("o-1", "approved", map[string]string{"by": "ana"}, sastest.From("AROAAPPROVER:ana")))
	k.Run()
	require.Equal(t, workflow.Processed, o.State())
}

// An agent's rate limit spaces its calls on the virtual clock (GCRA): each
// call at the earliest turn, an interval after the one before, a burst
// going at once after a quiet spell; a transient failure's call again
// takes its own turn.
func TestARateLimitSpacesTheCalls(t *testing.T) {
	const flow = `name: rated
agents:
  shop: {endpoint: "http://shop", rateLimit: 5/s%s}
defaults: {timeout: 5s}
steps:
  - name: charge
    agent: shop
`
	k := kit(t, strings.Replace(flow, "%s", "", 1))
	for _, id := range []string{"o-1", "o-2", "o-3", "o-4"} {
		k.Submit(`{"orderId":"` + id + `"}`)
	}
	k.Run()
	require.Equal(t, []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond}, ats(k.Calls("shop")))
	for _, id := range []string{"o-1", "o-2", "o-3", "o-4"} {
		require.Equal(t, workflow.Processed, k.Order(id).State(), id)
		charge, _ := k.Order(id).Step("charge")
		require.Equal(t, 1, charge.Attempt, "a call waiting for its turn is no failure")
	}

	third := kit(t, strings.Replace(flow, "5/s%s", "3/s", 1)) // an interval that is no whole number of nanoseconds
	for _, id := range []string{"o-1", "o-2", "o-3", "o-4"} {
		third.Submit(`{"orderId":"` + id + `"}`)
	}
	third.Run()
	require.Equal(t, []time.Duration{0, 333_333_334, 666_666_667, time.Second}, ats(third.Calls("shop")),
		"three calls in a second, the fourth a second after the first")

	burst := kit(t, strings.Replace(flow, "%s", ", rateBurst: 3", 1))
	for _, id := range []string{"o-1", "o-2", "o-3", "o-4", "o-5"} {
		burst.Submit(`{"orderId":"` + id + `"}`)
	}
	burst.Run()
	require.Equal(t, []time.Duration{0, 0, 0, 200 * time.Millisecond, 400 * time.Millisecond}, ats(burst.Calls("shop")),
		"three at once, then one an interval")
	burst.Advance(time.Minute) // a quiet spell: a burst again
	burst.Submit(`{"orderId":"o-6"}`)
	burst.Submit(`{"orderId":"o-7"}`)
	burst.Run()
	calls := burst.Calls("shop")
	require.Equal(t, calls[5].At, calls[6].At)

	retried := kit(t, strings.Replace(flow, "5/s%s", "1/s", 1))
	n := 0
	retried.Handle("shop", func(sastest.Call) sastest.Answer {
		if n++; n <= 2 {
			return sastest.Transient("HTTP 503")
		}
		return sastest.OK(nil)
	})
	o := retried.Submit(`{"orderId":"o-1"}`)
	retried.Run()
	require.Equal(t, workflow.Processed, o.State())
	require.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, ats(retried.Calls("shop")),
		"each call again waits for its turn, not only its 50 ms backoff")
}

// An agent's calls in flight per key queue the calls over it, first come
// first served: each is handed the slot the call before it lets go; other
// keys go at once.
func TestCallsInFlightPerKeyQueue(t *testing.T) {
	k := kit(t, `name: keyed
agents:
  pay: {endpoint: "http://pay", perKey: {key: .order.customerId, inFlight: 1}}
steps:
  - name: charge
    agent: pay
    async: true
    timeout: 1h
`)
	k.Handle("pay", func(sastest.Call) sastest.Answer {
		return sastest.Later(time.Minute, sastest.OK(nil)) // accepted, answered a minute later: it holds its slot till then
	})
	for _, o := range []string{`{"orderId":"o-1","customerId":"c-1"}`, `{"orderId":"o-2","customerId":"c-1"}`,
		`{"orderId":"o-3","customerId":"c-2"}`, `{"orderId":"o-4","customerId":"c-1"}`, `{"orderId":"o-5"}`} {
		k.Submit(o)
	}
	k.Run()
	got := map[string]time.Duration{}
	for _, c := range k.Calls("pay") {
		got[c.OrderID] = c.At.Sub(sastest.Epoch)
	}
	require.Equal(t, map[string]time.Duration{"o-1": 0, "o-3": 0, "o-5": 0, "o-2": time.Minute, "o-4": 2 * time.Minute}, got,
		"c-1's calls one at a time, in the order they came; c-2's, and o-5's (no key: not bounded), at once")
	for _, id := range []string{"o-1", "o-2", "o-3", "o-4", "o-5"} {
		require.Equal(t, workflow.Processed, k.Order(id).State(), id)
	}

	// A call given up on lets its slot go too: the next is handed it.
	k.Handle("pay", func(c sastest.Call) sastest.Answer {
		if c.OrderID == "o-6" {
			return sastest.Refuse("card declined")
		}
		return sastest.Accept()
	})
	k.Submit(`{"orderId":"o-6","customerId":"c-9"}`)
	k.Submit(`{"orderId":"o-7","customerId":"c-9"}`)
	k.Submit(`{"orderId":"o-8","customerId":"c-9"}`)
	k.Run()
	require.Equal(t, workflow.Failed, k.Order("o-6").State())
	calls := k.Calls("pay")
	require.Equal(t, "o-7", calls[len(calls)-1].OrderID, "o-8 waits for o-7's callback")
	o7 := calls[len(calls)-1]
	k.Advance(time.Hour) // no callback: o-7's attempt ends at its CompleteBy, and its slot goes to o-8, first in line
	calls = k.Calls("pay")
	require.Equal(t, "o-8", calls[len(calls)-1].OrderID)
	require.Equal(t, o7.At.Add(time.Hour), calls[len(calls)-1].At)
}

// The kit takes an order as Submission does: one whose timer would end
// after its deadline is refused with the reason, not taken to fail
// expired.
func TestATimerPastTheDeadlineIsRefusedAsSubmissionRefusesIt(t *testing.T) {
	k := kit(t, `name: later
deadline: 2h
agents:
  shop: {endpoint: "http://shop"}
defaults: {timeout: 5s}
steps:
  - name: wait-for-it
    until: .order.at
  - name: ship
    agent: shop
`)
	_, err := k.TrySubmit(`{"orderId":"o-1","at":"2026-01-01T12:00:00Z"}`)
	require.ErrorContains(t, err, "order o-1: step wait-for-it sleeps until 2026-01-01T12:00:00Z")
	require.ErrorContains(t, err, "after the order's deadline")
	o, err := k.TrySubmit(`{"orderId":"o-2","at":"2026-01-01T10:00:00Z"}`)
	require.NoError(t, err, "within the deadline")
	k.Handle("shop", func(sastest.Call) sastest.Answer { return sastest.OK(nil) })
	k.Run()
	require.Equal(t, workflow.Processed, o.State())
	require.Equal(t, "2026-01-01T10:00:00Z", k.Calls("shop")[0].At.UTC().Format(time.RFC3339))
}
