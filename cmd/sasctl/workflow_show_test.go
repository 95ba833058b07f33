package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWorkflowShowOrder(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := sasctl(t, "workflow", "show", exampleFile("order"))
	require.Zero(t, code, stderr)
	require.Regexp(t, `^workflow order v[0-9a-f]{8} \(`, stdout)
	require.Contains(t, stdout, "deadline 24h (as long again for its undo actions), pickup timeout 1m\n")
	requireRow(t, stdout, "#", "KIND", "NAME", "AGENT", "ACTION", "TIMEOUT", "MAX", "FAILURES", "RETRY", "BACKOFF")
	requireRow(t, stdout, "1", "step", "reserve-inventory", "inventory", "reserve-inventory", "20s", "3", "5s")
	requireRow(t, stdout, "undo", "release-inventory", "inventory", "release-inventory", "20s", "3", "5s")
	requireRow(t, stdout, "2", "step", "charge-payment", "payment", "charge-payment", "20s", "3", "5s")
	requireRow(t, stdout, "undo", "refund-payment", "payment", "refund-payment", "20s", "3", "5s")
	requireRow(t, stdout, "3", "step", "create-shipment", "shipping", "create-shipment", "20s", "3", "5s")
	requireRow(t, stdout, "undo", "-", "(a", "pivot:", "the", "order", "cannot", "be", "undone", "past", "it", "once", "it", "ran)")
	require.Contains(t, stdout, "\n  reserve-inventory refused → Failed (nothing to undo)\n"+
		"  charge-payment refused → release-inventory → Failed\n"+
		"  create-shipment refused → refund-payment → release-inventory → Failed\n")
	requireRow(t, stdout, "inventory", "http", "${SAS_REMOTE_BASE_URL}/v1/services/inventory", "10s", "408,429,5xx", "(default)",
		"other", "4xx", "none")
	require.Contains(t, stdout, "\nneeds at deploy: SAS_REMOTE_BASE_URL\n")
}

func TestWorkflowShowAgentsAuthWithoutSecrets(t *testing.T) {
	t.Setenv("WAREHOUSE_SECRET", "s3cr3t") // never resolved: printed as written
	code, stdout, stderr := sasctl(t, "workflow", "show", exampleFile("fulfilment"))
	require.Zero(t, code, stderr)
	requireRow(t, stdout, "1", "step", "pick-items", "warehouse", "picks", "15s", "4", "2s")
	requireRow(t, stdout, "undo", "credit-invoice", "billing", "credit-invoice", "15s", "4", "2s")
	requireRow(t, stdout, "warehouse", "http", "${WAREHOUSE_URL}", "5s", "409,429,500,502,503,504",
		"other", "4xx", "(401,403:", "credentials)", "header", "X-Api-Key", "from", "secret", "${WAREHOUSE_SECRET}")
	require.Contains(t, stdout, `header Authorization ("Bearer " + value) from parameter ${BILLING_TOKEN_PARAMETER}`)
	requireRow(t, stdout, "loyalty", "custom", "-", "-", "-", "-", "Go", "code", "in", "functions/loyalty")
	require.Contains(t, stdout, "sigv4 execute-api in ${AWS_REGION}, resource ${COURIER_API_ARN}")
	require.NotContains(t, stdout, "s3cr3t")
}

func TestWorkflowShowMermaid(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := sasctl(t, "workflow", "show", exampleFile("order"), "--mermaid") // flags may follow the file
	require.Zero(t, code, stderr)
	out := outLines(stdout)
	require.Equal(t, "flowchart LR", out[0])
	for _, want := range []string{
		`  s1["reserve-inventory<br/>inventory"]`,
		`  u1["release-inventory<br/>inventory"]`,
		"  s1 --> s2",
		"  s2 --> s3",
		"  s3 --> processed",
		"  s1 -. undo .-> u1",
		"  s2 -. undo .-> u2",
		"  u2 --> u1",
		"  u1 --> failed",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, stdout, "u3")
	code, stdout, _ = sasctl(t, "workflow", "show", "--mermaid", exampleFile("fulfilment"))
	require.Zero(t, code)
	require.Contains(t, outLines(stdout), `  s1["pick-items<br/>warehouse: picks"]`)
	require.Contains(t, outLines(stdout), "  u3 --> u2")
	code, stdout, _ = sasctl(t, "workflow", "show", "--mermaid", "--", exampleFile("single"))
	require.Zero(t, code)
	require.Equal(t, []string{"flowchart LR", `  s1["charge-payment<br/>payment"]`, `  processed(["Processed"])`,
		"  s1 --> processed"}, outLines(stdout)) // no undo action: no Failed
}

func TestWorkflowShowJSON(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := sasctl(t, "workflow", "show", "--output", "json", exampleFile("fulfilment"))
	require.Zero(t, code, stderr)
	var v showView
	require.NoError(t, json.Unmarshal([]byte(stdout), &v))
	require.Equal(t, "48h", v.Deadline)
	require.Len(t, v.Steps, 4)
	require.Equal(t, "restock-items", v.Steps[0].Undo.Name)
	require.Nil(t, v.Steps[3].Undo)
	require.Equal(t, "${BILLING_TOKEN_PARAMETER}", v.Agents[1].Auth.Parameter)
}

// parkedSteps has an async step, a timer, a wait that goes on at its
// timeout and one bounded by the order's deadline.
const parkedSteps = `name: parked
agents:
  payment: {endpoint: "https://pay.example.com"}
defaults: {timeout: 20s, maxFailures: 3}
steps:
  - name: charge-later
    agent: payment
    async: true
    timeout: 2h
  - name: nap
    sleep: 2h
  - name: until-delivery
    until: .order.deliverAfter
  - name: maybe-approved
    wait: {event: approved, timeout: 1h, onTimeout: continue}
  - name: picked
    wait: {event: picked}
`

func TestWorkflowShowWaitsTimersAndAsyncSteps(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := sasctl(t, "workflow", "show", exampleFile("approval"))
	require.Zero(t, code, stderr)
	requireRow(t, stdout, "1", "step", "reserve-inventory", "inventory", "reserve-inventory", "20s", "3", "5s")
	requireRow(t, stdout, "2", "wait", "await-approval", "-", "event", "approved", "72h", "-", "-")
	requireRow(t, stdout, "3", "step", "charge-approved", "payment", "charge-payment", "20s", "3", "5s")
	require.Contains(t, stdout, "\n  charge-approved refused → release-inventory → Failed\n", "the wait has nothing to undo")
	require.NotContains(t, stdout, "await-approval refused", "a wait is not refused: it times out")
	require.Contains(t, stdout, `charge-approved: input {orderId: .order.orderId, customerId: .order.customerId, amountCents: .results["await-approval"].amountCents, approvedBy: .results["await-approval"].by}`)

	file := writeWorkflow(t, "parked.yaml", parkedSteps)
	code, stdout, stderr = sasctl(t, "workflow", "show", file)
	require.Zero(t, code, stderr)
	requireRow(t, stdout, "1", "async", "charge-later", "payment", "charge-later", "2h", "3", "0s")
	requireRow(t, stdout, "2", "timer", "nap", "-", "sleep", "2h", "-", "-", "-")
	requireRow(t, stdout, "3", "timer", "until-delivery", "-", "until", ".order.deliverAfter", "-", "-", "-")
	requireRow(t, stdout, "4", "wait", "maybe-approved", "-", "event", "approved", "(at", "the", "timeout,", "goes", "on)", "1h", "-", "-")
	requireRow(t, stdout, "5", "wait", "picked", "-", "event", "picked", "deadline", "-", "-")

	code, stdout, _ = sasctl(t, "workflow", "show", "--mermaid", file)
	require.Zero(t, code)
	out := outLines(stdout)
	for _, want := range []string{
		`  s1[["charge-later<br/>payment (answers later)"]]`,
		`  s2[/"nap<br/>sleep 2h"/]`,
		`  s3[/"until-delivery<br/>until .order.deliverAfter"/]`,
		`  s4{{"maybe-approved<br/>waits for event approved (at the timeout, goes on): timeout 1h"}}`,
		`  s5{{"picked<br/>waits for event picked: timeout deadline"}}`,
		"  s4 --> s5",
		"  classDef wait fill:#eef4ff,stroke:#3d6fd1,stroke-dasharray:5 3",
		"  class s4,s5 wait",
		"  class s2,s3 timer",
		"  class s1 async",
	} {
		require.Contains(t, out, want)
	}

	code, stdout, _ = sasctl(t, "workflow", "show", file, "-o", "json")
	require.Zero(t, code)
	var v showView
	require.NoError(t, json.Unmarshal([]byte(stdout), &v))
	require.Equal(t, actionView{Name: "charge-later", Kind: "agent", Agent: "payment", Action: "charge-later", Async: true,
		Timeout: "2h", MaxFailures: 3, RetryBackoff: "0s", Pivot: true}, v.Steps[0])
	require.Equal(t, actionView{Name: "nap", Kind: "timer", Sleep: &sleepView{For: "2h"}}, v.Steps[1])
	require.Equal(t, actionView{Name: "until-delivery", Kind: "timer", Sleep: &sleepView{Until: ".order.deliverAfter"}}, v.Steps[2])
	require.Equal(t, actionView{Name: "maybe-approved", Kind: "event", Wait: &waitView{Event: "approved", Timeout: "1h", OnTimeout: "continue"}}, v.Steps[3])
	require.Equal(t, actionView{Name: "picked", Kind: "event", Wait: &waitView{Event: "picked", OnTimeout: "fail"}}, v.Steps[4])
}

// An agent that lists refusals shows them (its 403 refuses the step).
func TestWorkflowShowAnAgentsRefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refuse.yaml")
	require.NoError(t, os.WriteFile(path, []byte("name: refuse\nagents:\n  pay: {endpoint: 'http://pay', refuse: [403, 422], "+
		"auth: {header: X-Api-Key, secret: pay-key}}\nsteps:\n  - {name: charge, agent: pay, timeout: 5s}\n"), 0o600))
	code, stdout, stderr := sasctl(t, "workflow", "show", path)
	require.Zero(t, code, stderr)
	requireRow(t, stdout, "pay", "http", "http://pay", "10s", "408,429,5xx", "(default)", "403,422", "header", "X-Api-Key", "from", "secret", "pay-key")
}

// A workflow whose steps run at once is shown level by level, and drawn as
// its graph: an arrow from each step a step needs.
func TestWorkflowShowParallel(t *testing.T) {
	code, stdout, stderr := sasctl(t, "workflow", "show", exampleFile("parallel"))
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "  1: reserve-east | reserve-west | authorize-payment\n")
	require.Contains(t, stdout, "  2: charge-payment after reserve-east+reserve-west+authorize-payment\n")
	require.Contains(t, stdout, "  3: pack-item (each of items) after charge-payment\n")
	require.Contains(t, stdout, "the latest completion is undone first")
	require.Contains(t, stdout, "\n  create-shipment refused → unpack-item (each item) → refund-payment → void-authorization → "+
		"release-west → release-east → Failed\n")
	code, stdout, stderr = sasctl(t, "workflow", "show", "--mermaid", exampleFile("parallel"))
	require.Zero(t, code, stderr)
	for _, e := range []string{"s1 --> s4", "s2 --> s4", "s3 --> s4", "s4 --> s5", "s5 --> s6", "s6 --> processed", "s5 -. undo .-> u5"} {
		require.Contains(t, stdout, "  "+e+"\n")
	}
	require.NotContains(t, stdout, "s1 --> s2", "no line between steps that run at once")
}

// pivotFlow has a step without undo between two with one: past it, the
// engine cannot undo what came before it. Its last step holds the order on
// failure; its agent's calls are bounded; its wait takes its event from
// one sender.
const pivotFlow = `name: pivot
agents:
  shop:
    endpoint: "https://shop.example.com"
    concurrency: 20
    rateLimit: 50/s
    rateBurst: 10
    perKey: {key: .order.customerId, inFlight: 2}
defaults: {timeout: 10s}
steps:
  - {name: reserve, agent: shop, undo: {name: release}}
  - {name: ship, agent: shop}
  - {name: charge, agent: shop, undo: {name: refund}}
  - {name: notify, agent: shop}
  - {name: confirm, agent: shop, onFailure: hold, holdFor: 2h}
  - name: delivered
    wait: {event: delivered, senders: [AROACOURIER]}
`

// show draws the undo the engine runs, from its rules: refused after a step
// that cannot be undone, the order undoes what came after that step only
// and ends CompensationFailed; it is not a line of every undo action to
// Failed.
func TestWorkflowShowDrawsTheEnginesUndo(t *testing.T) {
	t.Parallel()
	file := writeWorkflow(t, "pivot.yaml", pivotFlow)
	code, stdout, stderr := sasctl(t, "workflow", "show", file)
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "\n  reserve refused → Failed (nothing to undo)\n"+
		"  ship refused → release → Failed\n"+
		"  charge refused → CompensationFailed (ship has run and has no undo: the operator decides)\n"+
		"  notify refused → refund → CompensationFailed (ship has run and has no undo: the operator decides)\n"+
		"  confirm refused → Held for the operator (2h at most); if undone: CompensationFailed "+
		"(notify has run and has no undo: the operator decides)\n")
	require.NotContains(t, stdout, "refund → release")

	code, stdout, _ = sasctl(t, "workflow", "show", "--mermaid", file)
	require.Zero(t, code)
	out := outLines(stdout)
	for _, want := range []string{`  failed(["Failed"])`, `  compfailed(["CompensationFailed"])`, "  u1 --> failed",
		"  u3 --> compfailed", "  s2 -. no undo .-> compfailed"} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "  u3 --> u1")
}

// show lists every field of the file's agents and steps: the agents' flow
// control, a hold on failure, a wait's senders, in the text and the JSON.
func TestWorkflowShowListsEveryField(t *testing.T) {
	t.Parallel()
	file := writeWorkflow(t, "pivot.yaml", pivotFlow)
	code, stdout, stderr := sasctl(t, "workflow", "show", file)
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "\nconfirm: onFailure hold: its failure holds the order for the operator, 2h at most, then undoes it\n")
	require.Contains(t, stdout, "\ndelivered: takes event delivered only from senders AROACOURIER\n")
	require.Contains(t, stdout, "\nshop: rateLimit 50/s burst 10 (at most 59 calls in any second, as admitted); perKey: 2 in flight per "+
		".order.customerId; concurrency 20 instances\n")

	code, stdout, _ = sasctl(t, "workflow", "show", file, "-o", "json")
	require.Zero(t, code)
	var v showView
	require.NoError(t, json.Unmarshal([]byte(stdout), &v))
	require.Equal(t, agentView{Name: "shop", Endpoint: "https://shop.example.com", Timeout: "10s", Concurrency: 20,
		RateLimit: "50/s", RateBurst: 10, RateMost: 59, PerKey: &perKeyView{Key: ".order.customerId", InFlight: 2}}, v.Agents[0])
	require.Equal(t, "hold", v.Steps[4].OnFailure)
	require.Equal(t, "2h", v.Steps[4].HoldFor)
	require.Equal(t, []string{"AROACOURIER"}, v.Steps[5].Wait.Senders)
	require.Equal(t, refusalView{Step: "notify", Undo: []string{"refund"}, Ends: "CompensationFailed", Pivot: "ship"}, v.Refusals[3])
	require.Equal(t, refusalView{Step: "confirm", HeldFor: "2h", Undo: []string{}, Ends: "CompensationFailed", Pivot: "notify"},
		v.Refusals[4])
	require.Len(t, v.Refusals, 5, "a wait is not refused")
}
