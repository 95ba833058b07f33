package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// approvalOrder is an order of the approval workflow.
func approvalOrder(id string) string {
	o := localrun.DemoOrder(id, 1)
	o.Workflow = "approval"
	return o.JSON()
}

// parked waits until the order's step i is armed: waiting for its event or
// its time.
func (p *pipeline) parked(id string, i int) {
	p.t.Helper()
	require.Eventually(p.t, func() bool {
		_, recs, err := p.stack.Store.Load(context.Background(), id)
		return err == nil && !recs[i].Armed.IsZero() && recs[i].State == workflow.Pending
	}, 60*time.Second, 100*time.Millisecond, "%s's step %d never parked", id, i)
}

// An approval order waits for its event: status says for what, since when
// and until when; sasctl signal sends it, with its data, which becomes the
// step's result and the next step's input; the JSON shows every result.
func TestSignalAnOrderThatWaits(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	code, _, _ := p.ctl(approvalOrder("o-ap"), "submit", "-")
	require.Zero(t, code)
	p.parked("o-ap", 1)

	code, out, _ := p.ctl("", "status", "o-ap")
	require.Zero(t, code)
	t.Logf("sasctl status o-ap:\n%s", out)
	require.Regexp(t, `await-approval\s+wait\s+Pending\s+0`, out)
	require.Regexp(t, `\nWaiting\n  await-approval waits for event "approved" since \S+Z, until \S+Z\n`, out)
	require.Regexp(t, `await-approval\s+waits for event "approved" until \S+`, out, "the timeline says when it began to wait")
	var st operator.Status
	p.json("status", &st, "status", "o-ap")
	w := st.Records[1].Waiting
	require.NotNil(t, w)
	require.Equal(t, "event", w.For)
	require.Equal(t, "approved", w.Event)
	require.Equal(t, 72*time.Hour, w.Until.Sub(w.Since), "until its timeout, 72h after it was armed")
	require.Equal(t, "event", st.Records[1].Kind)
	require.Equal(t, "reserve-inventory", action(t, st.Records[0].Result), "the first step's answer")

	missing := "@" + filepath.Join(t.TempDir(), "none.json")
	big := filepath.Join(t.TempDir(), "big.json")
	require.NoError(t, os.WriteFile(big, []byte(`"`+strings.Repeat("x", message.MaxEventBytes)+`"`), 0o644))
	for want, args := range map[string][]string{
		"--data @" + big + " is over 16781312 bytes, the largest event": {"o-ap", "approved", "--data", "@" + big},
		"--data is not JSON":                    {"o-ap", "approved", "--data", "{amount: 1}"},
		`event "not allowed!" must be 1-64`:     {"o-ap", "not allowed!"},
		`eventId "a b" must be 1-128 letters`:   {"o-ap", "approved", "--event-id", "a b"},
		"need exactly an ORDER id and an EVENT": {"o-ap"},
		"--data " + missing + ": open":          {"o-ap", "approved", "--data", missing},
	} {
		code, _, errs := p.ctl("", "signal", args...)
		require.Equal(t, 2, code, want)
		require.Contains(t, errs, want)
	}
	require.Equal(t, workflow.Pending, st.Order.State, "nothing was sent")

	data := filepath.Join(t.TempDir(), "approval.json")
	require.NoError(t, os.WriteFile(data, []byte("{\"amountCents\": 1998,\n \"by\": \"ana\"}\n"), 0o644))
	var sent operator.Signalled
	p.json("signal", &sent, "signal", "o-ap", "approved", "--data", "@"+data, "--event-id", "e-7")
	require.Equal(t, operator.Signalled{OrderID: "o-ap", Event: "approved", EventID: "e-7", Queue: p.prefix + "-events"}, sent)
	p.waitState("o-ap", workflow.Processed)

	st = operator.Status{} // decoded afresh: what the JSON leaves out is not kept
	p.json("status", &st, "status", "o-ap")
	require.Nil(t, st.Records[1].Waiting)
	require.JSONEq(t, `{"amountCents": 1998, "by": "ana"}`, string(st.Records[1].Result), "the event's data is the wait's result")
	require.Equal(t, map[string]string{"approved": "e-7"}, st.Order.Events)
	require.Equal(t, "charge-payment", action(t, st.Records[2].Result))
	require.Equal(t, operator.NotNeeded, st.Records[3].State)
	i := slices.IndexFunc(p.sim.Ledger(), func(e remotesim.Effect) bool { return e.OrderID == "o-ap" && e.Action == "charge-payment" })
	require.GreaterOrEqual(t, i, 0, "o-ap was charged")
	require.JSONEq(t, `{"orderId":"o-ap","customerId":"customer-1","amountCents":1998,"approvedBy":"ana"}`, string(p.sim.Ledger()[i].Input),
		"the approval's data, through the step's input")
}

// An event sent before the order reaches its wait is kept; with no
// --event-id, sasctl makes one and says it.
func TestSignalBeforeTheWaitIsKept(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	p.sim.SetFaults("inventory", remotesim.Faults{Latency: 2 * time.Second})
	code, _, _ := p.ctl(approvalOrder("o-early"), "submit", "-")
	require.Zero(t, code)
	require.Eventually(t, func() bool {
		_, _, err := p.stack.Store.Load(context.Background(), "o-early")
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	code, out, errs := p.ctl("", "signal", "o-early", "approved", "--data", `{"amountCents": 500, "by": "bo"}`)
	require.Zero(t, code, errs)
	require.Regexp(t, regexp.MustCompile(`^sent event approved to order o-early \(eventId (sasctl-[0-9a-f]{16}): `+
		`send it again with --event-id sasctl-[0-9a-f]{16}, and it is a no-op\)\n$`), out)
	p.waitState("o-early", workflow.Processed)
	code, out, _ = p.ctl("", "status", "o-early")
	require.Zero(t, code)
	require.Contains(t, out, "done: its event came", "a wait done says so, not \"processed (attempt 0)\"")
	require.NotContains(t, out, "processed (attempt 0)")
	code, _, errs = p.ctl("", "signal", "o-nosuch", "approved")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "order o-nosuch not found: nothing sent", "said at once")
	require.Contains(t, errs, "--ahead sends the event all the same")
	var ahead operator.Signalled
	code, out, errs = p.ctl("", "signal", "o-nosuch", "approved", "--ahead", "--event-id", "e-ahead", "--output", "json")
	require.Zero(t, code, errs)
	requireShape(t, "signal", out)
	require.NoError(t, json.Unmarshal([]byte(out), &ahead))
	require.Equal(t, operator.Signalled{OrderID: "o-nosuch", Event: "approved", EventID: "e-ahead", Queue: p.prefix + "-events", Ahead: true}, ahead)
	require.Contains(t, errs, "order o-nosuch is not stored yet: Submission takes the event once it is")
	var st operator.Status
	p.json("status", &st, "status", "o-early")
	require.JSONEq(t, `{"amountCents": 500, "by": "bo"}`, string(st.Records[1].Result))
}

// action is the action a remote simulator's answer says it applied.
func action(t *testing.T, result json.RawMessage) string {
	t.Helper()
	var answer struct{ Action string }
	require.NoError(t, json.Unmarshal(result, &answer), string(result))
	return answer.Action
}

// parkedFlow has an async step, then a timer.
const parkedFlow = `name: parked
agents:
  payment: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/payment"}
defaults: {timeout: 20s, maxFailures: 3}
steps:
  - name: charge-later
    agent: payment
    async: true
    timeout: 1h
  - name: nap
    sleep: 1h
`

// status shows an async step waiting for its callback (until its
// CompleteBy), then a timer waiting for its time.
func TestStatusShowsCallbacksAndTimersWaiting(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("parked.yaml", []byte(parkedFlow), workflow.Options{})
	require.NoError(t, err)
	p := newPipelineOf(t, workflow.MustSet(d), workflow.Settings{PickupTimeout: 2 * time.Second})
	held := make(chan remotesim.Callback, 1)
	p.sim.OnCallback(func(c remotesim.Callback) { held <- c })
	code, _, _ := p.ctl(orderJSON("o-park"), "submit", "-")
	require.Zero(t, code)
	var cb remotesim.Callback
	select {
	case cb = <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("the async call was never made")
	}
	var st operator.Status
	p.json("status", &st, "status", "o-park")
	require.Equal(t, workflow.Processing, st.Records[0].State)
	require.True(t, st.Records[0].Async)
	require.Equal(t, &operator.Waiting{For: "callback", Since: st.Records[0].ClaimedAt, Until: st.Records[0].CompleteBy}, st.Records[0].Waiting)
	code, out, _ := p.ctl("", "status", "o-park")
	require.Zero(t, code)
	require.Regexp(t, `charge-later\s+async\s+Processing\s+1`, out)
	require.Contains(t, out, "charge-later waits for its service's callback since ")

	p.stack.Callbacks(nil)(cb)
	p.parked("o-park", 1)
	st = operator.Status{}
	p.json("status", &st, "status", "o-park")
	require.Equal(t, workflow.Processed, st.Records[0].State)
	require.Equal(t, "charge-later", action(t, st.Records[0].Result), "the callback's answer")
	w := st.Records[1].Waiting
	require.NotNil(t, w)
	require.Equal(t, "timer", w.For)
	require.Equal(t, time.Hour, w.Until.Sub(w.Since), "until its wake time")
	code, out, _ = p.ctl("", "status", "o-park")
	require.Zero(t, code)
	require.Regexp(t, `nap\s+timer\s+Pending`, out)
	require.Contains(t, out, "nap waits for a timer since ")
}
