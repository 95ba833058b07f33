package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

var motoEndpoint string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMoto(m, &motoEndpoint)) }

var seq atomic.Int64

// deployment is a running local pipeline the CLI is pointed at.
type deployment struct {
	t      *testing.T
	prefix string
	stack  *localrun.Stack
	sim    *remotesim.Simulator
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	sim := remotesim.New(3)
	srv, err := sim.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	prefix := fmt.Sprintf("cli%d-%d", time.Now().UnixNano()%1e6, seq.Add(1))
	stack, err := localrun.New(context.Background(), localrun.Options{Endpoint: motoEndpoint, Prefix: prefix,
		Settings:  workflow.Settings{StepTimeout: 3 * time.Second, MaxFailures: 3, PickupTimeout: 2 * time.Second},
		RemoteURL: srv.URL, VisibilityTimeout: 5 * time.Second, SupervisorEvery: 200 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = stack.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &deployment{t: t, prefix: prefix, stack: stack, sim: sim}
}

// ctl runs sasctl against the deployment: cmd, then flags, then arguments.
func (d *deployment) ctl(stdin string, cmd string, rest ...string) (code int, stdout, stderr string) {
	args := append([]string{cmd, "--endpoint", motoEndpoint, "--prefix", d.prefix}, rest...)
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func (d *deployment) waitEnded(ids ...string) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := d.stack.WaitEnded(ctx, ids, 100*time.Millisecond, nil)
	require.NoError(d.t, err)
}

func orderJSON(id string) string { return localrun.DemoOrder(id, 1).JSON() }

func TestSubmitFromAFileStdinAndGenerate(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	file := filepath.Join(t.TempDir(), "orders.jsonl")
	bad := `{"orderId":"o-bad","items":[]}`
	require.NoError(t, os.WriteFile(file, []byte(orderJSON("o-f1")+"\n"+bad+"\n\n"+orderJSON("o-f2")+"\n"), 0o644))
	code, out, errs := d.ctl("", "submit", file)
	require.Equal(t, 1, code, "an order was not sent")
	require.Equal(t, "sent 2 orders to "+d.prefix+"-orders\n", out)
	require.Contains(t, errs, "sasctl submit: order 2 not sent: order o-bad: customerId")

	code, out, _ = d.ctl("["+orderJSON("o-s1")+"]", "submit", "--output", "json", "-")
	require.Zero(t, code)
	var res operator.Submitted
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Equal(t, 1, res.Sent)
	require.Empty(t, res.Rejected)

	code, out, _ = d.ctl("", "submit", "--generate", "3")
	require.Zero(t, code)
	require.Contains(t, out, "sent 3 orders")
	d.waitEnded("o-f1", "o-f2", "o-s1")

	code, _, errs = d.ctl("", "submit", filepath.Join(t.TempDir(), "missing.json"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no such file")
	code, _, errs = d.ctl("", "submit")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "usage: sasctl submit")
	code, _, errs = d.ctl("[{", "submit", "-")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "not one")
}

func TestStatusOfACompensatedOrder(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.sim.SetFaults("shipping", remotesim.Faults{PermanentOrders: []string{"o-st"}})
	code, _, _ := d.ctl(orderJSON("o-st"), "submit", "-")
	require.Zero(t, code)
	d.waitEnded("o-st")

	code, out, _ := d.ctl("", "status", "o-st")
	require.Zero(t, code)
	t.Logf("sasctl status o-st:\n%s", out)
	require.Contains(t, out, "Order o-st: Failed (workflow order, round 1)")
	require.Contains(t, out, "last error: create-shipment: remote refused the request permanently (HTTP 422)")
	require.Regexp(t, `create-shipment\s+step\s+Error\s+1\s+0/3`, out)
	require.Regexp(t, `refund-payment\s+undo\s+Processed\s+1`, out)
	require.Regexp(t, `release-inventory\s+undo\s+Processed\s+1`, out)
	require.Less(t, strings.Index(out, "refund-payment"), strings.Index(out, "release-inventory"), "undos listed in the order they run")
	require.Contains(t, out, "Timeline")
	require.Contains(t, out, "failed for good (refused)")
	require.Regexp(t, `create-shipment\s+attempt 1 claimed by shipping/[0-9a-f]{12}`, out, "told by the record's own times")
	require.Regexp(t, `create-shipment\s+operator alerted`, out)

	code, out, _ = d.ctl("", "status", "--output", "json", "o-st")
	require.Zero(t, code)
	var st operator.Status
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, workflow.Failed, st.Task.State)
	require.Len(t, st.Records, 5)
	require.NotEmpty(t, st.Timeline)

	code, _, errs := d.ctl("", "status", "o-none")
	require.Equal(t, 1, code)
	require.Equal(t, "sasctl status: order o-none not found\n", errs)
	code, _, errs = d.ctl("", "status")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "need exactly one ORDER id")
	code, _, errs = d.ctl("", "status", "--output", "yaml", "o-st")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--output must be text or json")
}

func TestListByStateAndPaging(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.sim.SetFaults("inventory", remotesim.Faults{PermanentOrders: []string{"o-l2", "o-l3"}})
	for _, id := range []string{"o-l1", "o-l2", "o-l3"} {
		code, _, _ := d.ctl(orderJSON(id), "submit", "-")
		require.Zero(t, code)
	}
	d.waitEnded("o-l1", "o-l2", "o-l3")
	code, out, _ := d.ctl("", "list", "--state", "failed")
	require.Zero(t, code)
	require.Contains(t, out, "o-l2")
	require.Contains(t, out, "o-l3")
	require.NotContains(t, out, "o-l1")

	code, out, _ = d.ctl("", "list", "--state", "Failed", "--limit", "1", "--output", "json")
	require.Zero(t, code)
	var page struct {
		Orders []struct{ OrderID string }
		Next   string
	}
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Orders, 1)
	require.NotEmpty(t, page.Next)
	first := page.Orders[0].OrderID
	code, out, _ = d.ctl("", "list", "--state", "Failed", "--limit", "1", "--next", page.Next)
	require.Zero(t, code)
	require.Contains(t, out, map[string]string{"o-l2": "o-l3", "o-l3": "o-l2"}[first], "the second page has the other one")

	code, _, errs := d.ctl("", "list", "--state", "Stuck")
	require.Equal(t, 2, code)
	require.Contains(t, errs, `unknown state "Stuck"; the states are Pending, Compensating, Processed, Failed, CompensationFailed`)
	code, _, errs = d.ctl("", "list", "--next", "nonsense")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "bad page token")
}

func TestWatchCountsByState(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	code, _, _ := d.ctl("", "submit", "--generate", "4")
	require.Zero(t, code)
	// Until Submission accepts them, nothing is in flight and --until-idle
	// would rightly stop at once: wait for the four orders to exist.
	deadline := time.Now().Add(30 * time.Second)
	for {
		counts, err := d.stack.Store.CountTasks(context.Background())
		require.NoError(t, err)
		total := 0
		for _, n := range counts {
			total += n
		}
		if total == 4 {
			break
		}
		require.True(t, time.Now().Before(deadline), "orders not accepted")
		time.Sleep(50 * time.Millisecond)
	}
	code, out, _ := d.ctl("", "watch", "--until-idle", "--every", "100ms")
	require.Zero(t, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Contains(t, lines[len(lines)-1], "4 orders, 0 in flight | Pending 0, Compensating 0, Processed 4")
	require.Contains(t, lines[len(lines)-1], "[##############################]")
	require.Contains(t, lines[len(lines)-1], "steps: 0 waiting for a claim (longest 0s), 0 running")
	code, out, _ = d.ctl("", "watch", "--once", "--output", "json")
	require.Zero(t, code)
	var snap struct {
		Total, InFlight int
		ByState         map[string]int
		QueueDepths     map[string]int
	}
	require.NoError(t, json.Unmarshal([]byte(out), &snap))
	require.Equal(t, 4, snap.Total)
	require.Len(t, snap.QueueDepths, 7, "the scheduler queue and each agent's request and response queues")
	require.Equal(t, 4, snap.ByState["Processed"])
}

func TestResubmitAfterTheFaultIsCleared(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.sim.SetFaults("payment", remotesim.Faults{PermanentOrders: []string{"o-rs"}})
	for _, id := range []string{"o-rs", "o-ok"} {
		code, _, _ := d.ctl(orderJSON(id), "submit", "-")
		require.Zero(t, code)
	}
	d.waitEnded("o-rs", "o-ok")

	code, _, errs := d.ctl("", "resubmit", "o-ok")
	require.Equal(t, 1, code)
	require.Equal(t, "sasctl resubmit: order o-ok is Processed; only Failed or CompensationFailed orders can be resubmitted\n", errs)
	code, _, errs = d.ctl("", "resubmit", "--step", "reserve-inventory", "o-rs")
	require.Equal(t, 1, code)
	require.Contains(t, errs, `step "reserve-inventory" is not the one that failed (charge-payment)`)
	code, _, errs = d.ctl("", "resubmit", "o-missing")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "order o-missing not found")

	d.sim.SetFaults("payment", remotesim.Faults{}) // the operator fixed the cause
	code, out, _ := d.ctl("", "resubmit", "o-rs")
	require.Zero(t, code)
	require.Equal(t, "order o-rs resubmitted: step reserve-inventory is Pending again (round 2); the Scheduler was told\n", out)
	d.waitState("o-rs", workflow.Processed)
	require.Equal(t, []string{"o-rs/reserve-inventory", "o-rs/release-inventory", "o-rs/reserve-inventory/r2",
		"o-rs/charge-payment/r2", "o-rs/create-shipment/r2"}, d.keys("o-rs"), "undone in round 1, done again in round 2")
}

// waitState waits until the order's task is in state.
func (d *deployment) waitState(id string, state workflow.State) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		task, _, err := d.stack.Store.Load(ctx, id)
		require.NoError(d.t, err)
		if task.State == state {
			return
		}
		require.NoError(d.t, ctx.Err(), "%s not %s (it is %s)", id, state, task.State)
		time.Sleep(100 * time.Millisecond)
	}
}

// keys are the idempotency keys of the order's effects, oldest first.
func (d *deployment) keys(id string) []string {
	var keys []string
	for _, e := range d.sim.Ledger() {
		if e.OrderID == id {
			keys = append(keys, e.Key)
		}
	}
	return keys
}

// create-shipment has no undo action. Its effect happens but every reply is
// lost, so it times out for good: the order ends CompensationFailed with
// nothing undone, and once the operator resubmits, the step runs again with
// the same idempotency key and the order completes, shipped once.
func TestResubmitAPivotStepThatTimedOut(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.sim.SetFaults("shipping", remotesim.Faults{LostReplyOrders: []string{"o-piv"}})
	code, _, _ := d.ctl(orderJSON("o-piv"), "submit", "-")
	require.Zero(t, code)
	d.waitEnded("o-piv")
	task, _, err := d.stack.Store.Load(context.Background(), "o-piv")
	require.NoError(t, err)
	require.Equal(t, workflow.CompensationFailed, task.State)
	require.Equal(t, []string{"o-piv/reserve-inventory", "o-piv/charge-payment", "o-piv/create-shipment"}, d.keys("o-piv"),
		"shipped, and nothing undone")

	d.sim.SetFaults("shipping", remotesim.Faults{})
	code, out, _ := d.ctl("", "resubmit", "o-piv")
	require.Zero(t, code)
	require.Equal(t, "order o-piv resubmitted: step create-shipment is Pending again (round 1); the Scheduler was told\n", out)
	d.waitState("o-piv", workflow.Processed)
	require.Equal(t, []string{"o-piv/reserve-inventory", "o-piv/charge-payment", "o-piv/create-shipment"}, d.keys("o-piv"),
		"the resubmitted step replayed its effect: shipped once")
}

func TestRedriveMovesADeadLetterBack(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	ctx := context.Background()
	require.NoError(t, d.stack.SendOrders(ctx, `{"orderId":"o-dead"}`))
	dlq := d.stack.QueueURL(d.stack.Topology().OrdersQueue().DLQName)
	waitDLQ := func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			msgs, err := d.stack.Peek(ctx, dlq)
			require.NoError(t, err)
			if len(msgs) > 0 {
				// Peek hid them for a minute; redrive must see them: let them back.
				for _, m := range msgs {
					_, _ = d.stack.Deployment.Clients.SQS.ChangeMessageVisibility(ctx, changeVisibility(dlq, m.ReceiptHandle))
				}
				return
			}
			require.True(t, time.Now().Before(deadline), "nothing reached the DLQ")
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitDLQ()
	code, out, _ := d.ctl("", "redrive", "--queue", "orders")
	require.Zero(t, code)
	require.Equal(t, fmt.Sprintf("moved 1 messages from %[1]s-orders-dlq to %[1]s-orders\n", d.prefix), out)
	waitDLQ() // still malformed: Submission rejects it again, with its reason
	code, _, errs := d.ctl("", "redrive", "--queue", "payments")
	require.Equal(t, 1, code)
	require.Contains(t, errs, `no queue "payments"; the queues are orders, scheduler, agent-inventory-requests`)
}

func TestUnknownDeploymentSaysSo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"submit", "--generate", "1"}, {"status", "o-1"}, {"list"}, {"watch", "--once"},
		{"resubmit", "o-1"}, {"redrive"},
	} {
		var out, errb bytes.Buffer
		full := append([]string{args[0], "--endpoint", motoEndpoint, "--prefix", "nowhere"}, args[1:]...)
		code := run(context.Background(), full, strings.NewReader(""), &out, &errb)
		require.Equal(t, 1, code, args)
		require.Contains(t, errb.String(), "sasctl "+args[0]+": no deployment \"nowhere\" at this endpoint", args)
		require.Equal(t, 1, strings.Count(errb.String(), "\n"), "one line")
	}
	var errb bytes.Buffer
	code := run(context.Background(), []string{"watch", "--bogus"}, strings.NewReader(""), &bytes.Buffer{}, &errb)
	require.Equal(t, 2, code)
	require.Contains(t, errb.String(), "flag provided but not defined: -bogus")
}

func changeVisibility(url string, handle *string) *sqs.ChangeMessageVisibilityInput {
	return &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: handle, VisibilityTimeout: 0}
}

func TestCancelFromTheCLI(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.sim.SetFaults("payment"+"/charge-payment", remotesim.Faults{Latency: 2 * time.Second})
	code, _, _ := d.ctl(orderJSON("o-cx"), "submit", "-")
	require.Zero(t, code)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, recs, err := d.stack.Store.Load(context.Background(), "o-cx")
		if err == nil && recs[1].State == workflow.Processing {
			break
		}
		require.True(t, time.Now().Before(deadline), "the charge never ran")
		time.Sleep(50 * time.Millisecond)
	}
	code, out, errs := d.ctl("", "cancel", "--reason", "wrong size", "o-cx")
	require.Zero(t, code, errs)
	require.Contains(t, out, "order o-cx: a step is running: its outcome is awaited, then the completed steps are undone")
	d.waitEnded("o-cx")
	code, out, _ = d.ctl("", "status", "o-cx")
	require.Zero(t, code)
	require.Contains(t, out, "Order o-cx: Cancelled")
	require.Regexp(t, `cancel asked by sasctl( \(.+\))? at \S+: wrong size`, out)
	require.Regexp(t, `refund-payment\s+undo\s+Processed`, out)

	code, _, errs = d.ctl("", "cancel", "o-cx")
	require.Zero(t, code, "asking again is no error: %s", errs)
	code, _, _ = d.ctl(orderJSON("o-ok"), "submit", "-")
	require.Zero(t, code)
	d.waitEnded("o-ok")
	code, _, errs = d.ctl("", "cancel", "o-ok")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "order o-ok cannot be cancelled: the order is Processed: there is nothing to cancel")
	code, _, errs = d.ctl("", "cancel", "o-none")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "order o-none not found")
	code, out, _ = d.ctl("", "list", "--state", "cancelled")
	require.Zero(t, code)
	require.Contains(t, out, "o-cx")
}
