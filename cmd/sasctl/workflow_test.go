package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

const wfExamplesDir = "../../shared/workflow/examples"

func exampleFile(name string) string { return filepath.Join(wfExamplesDir, name+".yaml") }

// writeWorkflow writes a workflow file into a fresh directory.
func writeWorkflow(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

// outLines are out's lines, without the empty last one.
func outLines(out string) []string { return strings.Split(strings.TrimSuffix(out, "\n"), "\n") }

// requireRow requires a line of out whose space-separated fields are want.
func requireRow(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, l := range outLines(out) {
		if strings.Join(strings.Fields(l), " ") == strings.Join(want, " ") {
			return
		}
	}
	require.Failf(t, "no such row", "want a row %q in\n%s", want, out)
}

func TestWorkflowValidateExamples(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := sasctl(t, "workflow", "validate", exampleFile("order"), exampleFile("single"), exampleFile("fulfilment"))
	require.Zero(t, code, stderr)
	require.Empty(t, stderr)
	out := outLines(stdout)
	require.Len(t, out, 7, stdout)
	require.Regexp(t, `^\.\./\.\./shared/workflow/examples/order\.yaml: workflow order v[0-9a-f]{8}, 3 steps \(2 with an undo action\), agents inventory, payment, shipping$`, out[0])
	require.Equal(t, "  needs at deploy: SAS_REMOTE_BASE_URL", out[1])
	require.Regexp(t, `examples/single\.yaml: workflow single v[0-9a-f]{8}, 1 step \(0 with an undo action\), agents payment$`, out[2])
	require.Regexp(t, `examples/fulfilment\.yaml: workflow fulfilment v[0-9a-f]{8}, 4 steps \(3 with an undo action\), agents warehouse, billing, loyalty, courier$`, out[4])
	require.Equal(t, "  needs at deploy: AWS_REGION, BILLING_TOKEN_PARAMETER, BILLING_URL, COURIER_API_ARN, COURIER_URL, WAREHOUSE_SECRET, WAREHOUSE_URL", out[5])
	require.Equal(t, "3 workflows valid together; the default (an order naming none) is order", out[6])
}

// brokenSteps has an unknown agent, a duplicate step name and a step with
// no timeout and no default.
const brokenSteps = `name: broken
deadline: 24h
agents:
  payment:
    endpoint: https://pay.example.com
steps:
  - name: charge
    agent: payment
    timeout: 10s
  - name: charge
    agent: payment
    timeout: 10s
  - name: ship
    agent: shipping
    timeout: 5s
  - name: notify
    agent: payment
`

// brokenFields has an unknown field and a bad duration. (A file the
// decoder rejects is not checked further: its other problems show once
// these are fixed.)
const brokenFields = `name: fields
deadline: 24h
agents:
  payment:
    endpoint: https://pay.example.com
    colour: blue
steps:
  - name: charge
    agent: payment
    timeout: ten seconds
`

func TestWorkflowValidateReportsEveryProblemWithLineAndField(t *testing.T) {
	t.Parallel()
	steps, fields := writeWorkflow(t, "steps.yaml", brokenSteps), writeWorkflow(t, "fields.yaml", brokenFields)
	code, stdout, stderr := sasctl(t, "workflow", "validate", steps, fields, exampleFile("order"))
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, []string{
		steps + `:10: steps[1].name: duplicate step "charge": every step and undo action needs its own name`,
		steps + `:14: steps[2].agent: unknown agent "shipping": declare it under agents`,
		steps + `:16: steps[3].timeout: step "notify" has no timeout (set it, or defaults.timeout)`,
		fields + `:6: agents.payment.colour: unknown field colour`,
		fields + `:10: steps[0].timeout: "ten seconds" is not a duration like 30s, 5m or 24h`,
		"sasctl workflow validate: 5 problems",
	}, outLines(stderr))
}

func TestWorkflowValidateJSON(t *testing.T) {
	t.Parallel()
	fields := writeWorkflow(t, "fields.yaml", brokenFields)
	code, stdout, _ := sasctl(t, "workflow", "validate", "--output", "json", fields)
	require.Equal(t, 1, code)
	var r validateReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &r))
	require.False(t, r.Valid)
	require.Equal(t, []problemView{
		{File: fields, Line: 6, Field: "agents.payment.colour", Problem: "unknown field colour"},
		{File: fields, Line: 10, Field: "steps[0].timeout", Problem: `"ten seconds" is not a duration like 30s, 5m or 24h`},
	}, r.Problems)
}

// perCustomer bounds its calls per customer, reading the order with no
// schema to check the path against.
const perCustomer = `name: per-customer
defaults: {timeout: 5s}
agents:
  crm:
    endpoint: https://crm.example.com
    perKey: {key: .order.customerId}
steps:
  - name: note
    agent: crm
`

func TestWorkflowValidateWarnsOfUncheckedOrderPaths(t *testing.T) {
	t.Parallel()
	file := writeWorkflow(t, "per-customer.yaml", perCustomer)
	warning := file + `:6: warning: agents.crm.perKey.key: reads .order.customerId unchecked: the workflow has no schema, ` +
		`and a field an order lacks is null (a null key bounds nothing); declare the order's schema to check it`
	code, stdout, stderr := sasctl(t, "workflow", "validate", file)
	require.Zero(t, code, "warnings only: valid")
	require.Regexp(t, `per-customer\.yaml: workflow per-customer v[0-9a-f]{8}, 1 step`, stdout)
	require.Equal(t, []string{warning, "sasctl workflow validate: 1 warning (valid)"}, outLines(stderr))

	code, stdout, _ = sasctl(t, "workflow", "validate", "--output", "json", file)
	require.Zero(t, code)
	var r validateReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &r))
	require.True(t, r.Valid)
	require.Empty(t, r.Problems)
	require.Len(t, r.Warnings, 1)
	require.Equal(t, "agents.crm.perKey.key", r.Warnings[0].Field)

	// With problems, the warnings are said too, after them.
	broken := writeWorkflow(t, "per-customer.yaml", perCustomer+"deadline: soon\n")
	code, stdout, stderr = sasctl(t, "workflow", "validate", broken)
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, []string{
		broken + `:10: deadline: "soon" is not a duration like 30s, 5m or 24h`,
		strings.Replace(warning, file, broken, 1),
		"sasctl workflow validate: 1 problem, 1 warning",
	}, outLines(stderr))

	// With a schema, a path it cannot produce is a problem.
	dir := filepath.Dir(file)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "customer.json"), []byte(`{"type":"object","additionalProperties":false,"properties":{"customer":{"type":"string"}}}`), 0o644))
	require.NoError(t, os.WriteFile(file, []byte(perCustomer+"schema: customer.json\n"), 0o644))
	code, _, stderr = sasctl(t, "workflow", "validate", file)
	require.Equal(t, 1, code)
	require.Equal(t, []string{
		file + ":6: agents.crm.perKey.key: reads .order.customerId: the schema allows no field customerId in .order (only customer)",
		"sasctl workflow validate: 1 problem",
	}, outLines(stderr))
}

func TestWorkflowValidateAcrossFiles(t *testing.T) {
	t.Parallel()
	single, err := os.ReadFile(exampleFile("single"))
	require.NoError(t, err)
	// Copied elsewhere, without the schema file beside it.
	single = []byte(strings.Replace(string(single), "# The data of its orders: a shop order (orderId, customerId, items).\nschema: shop-order.schema.json\n", "", 1))
	sameName := writeWorkflow(t, "same-name.yaml", strings.Replace(string(single), "name: single", "name: order", 1))
	otherPayment := writeWorkflow(t, "other-payment.yaml", strings.Replace(string(single), "/v1/services/payment", "/v2/payment", 1))
	code, stdout, stderr := sasctl(t, "workflow", "validate", exampleFile("order"), sameName, otherPayment)
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, []string{
		sameName + `:3: name: workflow "order" is also defined in ` + exampleFile("order"),
		otherPayment + `:10: agents.payment: agent "payment" is declared differently in ` + exampleFile("order") +
			": one service, one declaration",
		"sasctl workflow validate: 2 problems",
	}, outLines(stderr))
}

func TestWorkflowValidateChecksStepTimeoutsAgainstTheFunctionTimeout(t *testing.T) {
	t.Parallel()
	code, _, stderr := sasctl(t, "workflow", "validate", "--function-timeout", "20s", exampleFile("single"))
	require.Equal(t, 1, code)
	require.Equal(t, []string{
		exampleFile("single") + `:15: steps[0].timeout: step "charge-payment"'s timeout 20s is longer than its agent function allows (15s: its timeout less the time to reply)`,
		"sasctl workflow validate: 1 problem",
	}, outLines(stderr))
}

func TestWorkflowMissingFileIsNamed(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	for _, sub := range []string{"validate", "show"} {
		code, stdout, stderr := sasctl(t, "workflow", sub, missing)
		require.Equal(t, 1, code, sub)
		require.Empty(t, stdout, sub)
		require.Equal(t, "sasctl workflow "+sub+": workflow file: open "+missing+": no such file or directory\n", stderr)
	}
}

func TestWorkflowUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"workflow"}, {"workflow", "lint"}, {"workflow", "validate"}, {"workflow", "show"},
		{"workflow", "show", "a.yaml", "b.yaml"}, {"workflow", "show", "--bogus", "a.yaml"},
		{"workflow", "validate", "--output", "yaml", "a.yaml"}, {"workflow", "show", "--mermaid", "--output", "json", "a.yaml"},
		{"workflow", "validate", "--function-timeout", "5s", "a.yaml"},
	} {
		code, stdout, stderr := sasctl(t, args...)
		require.Equal(t, 2, code, args)
		require.Empty(t, stdout, args)
		require.Contains(t, stderr, "sasctl workflow", args)
		require.Contains(t, stderr, "--help' for usage.", args)
	}
	_, _, stderr := sasctl(t, "workflow", "lint")
	require.Contains(t, stderr, `sasctl workflow: unknown command "lint"`)
	_, _, stderr = sasctl(t, "workflow")
	require.Contains(t, stderr, "validate    check workflow files as a deployment loads them")
	code, stdout, _ := sasctl(t, "workflow", "validate", "-h")
	require.Zero(t, code)
	require.Contains(t, stdout, "--function-timeout")
	code, stdout, _ = sasctl(t, "help")
	require.Zero(t, code)
	require.Contains(t, stdout, "\n  workflow    validate workflow files")
}

// validate --from says, before any order moves, what a move does to the
// earlier version's orders at each of their steps: what runs next, what
// they would undo, and which cannot move, why.
func TestWorkflowValidateFromSaysWhatAMoveDoesAtEachStep(t *testing.T) {
	t.Parallel()
	text, err := workflow.ExampleFile("approval")
	require.NoError(t, err)
	v1 := writeWorkflow(t, "approval.yaml", string(text))
	v2 := strings.Replace(string(text), "  - name: await-approval\n", "  - name: fraud-check\n    agent: payment\n    undo: none\n  - name: await-approval\n", 1)
	v2File := writeWorkflow(t, "approval.yaml", v2)
	code, stdout, stderr := sasctl(t, "workflow", "validate", "--from", v1, v2File)
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "  at reserve-inventory: moves; runs next reserve-inventory\n")
	require.Contains(t, stdout, "  at await-approval: moves; runs next fraud-check; would undo release-inventory\n")
	require.Contains(t, stdout, "  at charge-approved: cannot move: step fraud-check comes before a step this order started")

	code, stdout, stderr = sasctl(t, "workflow", "validate", "--from", v1, writeWorkflow(t, "approval.yaml", v2+"migrate:\n  skip: [fraud-check]\n"))
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "  at charge-approved: moves; runs next charge-approved; skips fraud-check; would undo release-inventory\n")

	code, _, stderr = sasctl(t, "workflow", "validate", "--from", v1, exampleFile("order"))
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `is workflow "approval", which none of the files is`)
}

// validate --from says which orders keep a step the new version removed
// (migrate.keep), done, for its undo, and what they would undo then; a
// kept step the earlier version has not is a problem of the plan.
func TestWorkflowValidateFromSaysWhatAnOrderKeeps(t *testing.T) {
	t.Parallel()
	text, err := workflow.ExampleFile("approval")
	require.NoError(t, err)
	v1 := writeWorkflow(t, "approval.yaml", string(text))
	reserve := string(text)[strings.Index(string(text), "  - name: reserve-inventory\n"):strings.Index(string(text), "  - name: await-approval\n")]
	v2 := strings.Replace(string(text), reserve, "  - name: check-stock\n    agent: inventory\n    undo: none\n", 1) +
		"migrate:\n  skip: [check-stock]\n  keep: [reserve-inventory]\n"
	code, stdout, stderr := sasctl(t, "workflow", "validate", "--from", v1, writeWorkflow(t, "approval.yaml", v2))
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, "  at reserve-inventory: moves; runs next check-stock; leaves reserve-inventory\n")
	require.Contains(t, stdout, "  at await-approval: moves to ")
	require.Contains(t, stdout, "; skips check-stock; keeps reserve-inventory (done: for its undo only); "+
		"would undo release-inventory\n")

	code, _, stderr = sasctl(t, "workflow", "validate", "--from", v1, writeWorkflow(t, "approval.yaml",
		strings.Replace(v2, "keep: [reserve-inventory]", "keep: [reserve-inventory, reserve-stock]", 1)))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `migrate.keep[1]: "reserve-stock" is not a step of version`)
}
