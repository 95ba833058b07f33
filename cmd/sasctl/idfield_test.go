package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

// loanFile is a workflow whose orders are loan applications, named by
// their applicationId.
const loanFile = `name: loan
id: applicationId
schema:
  type: object
  required: [applicationId, amountCents]
  properties:
    applicationId: {type: string}
    workflow: {type: string}
    amountCents: {type: integer}
defaults: {timeout: 10s, maxFailures: 3, retryBackoff: 1s}
agents:
  bank: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/bank"}
steps:
  - name: disburse
    agent: bank
    input: '{application: .order.applicationId, amountCents: .order.amountCents}'
    undo: {name: claw-back}
`

// sasctl submit, given the deployment's workflow files, takes a loan
// application by its applicationId and waits for its verdict; status and
// list show it by that id; a conflicting resend is refused, and dlq show
// names it by that id; an application with only an orderId is not sent,
// the reason naming applicationId; workflow show says the id field.
func TestSasctlTakesAnApplicationByItsIDField(t *testing.T) {
	t.Parallel()
	file := writeWorkflow(t, "loan.yaml", loanFile)
	loan, err := workflow.LoadFile(file, workflow.Options{})
	require.NoError(t, err)
	p := newPipelineOf(t, workflow.MustSet(workflow.MustExample(workflow.OrderWorkflow), loan),
		workflow.Settings{StepTimeout: 8 * time.Second, MaxFailures: 3, PickupTimeout: 2 * time.Second})
	files := exampleFile("order") + "," + file

	application := `{"applicationId":"app-7","workflow":"loan","amountCents":120000}`
	code, out, errs := p.ctl(application+"\n"+orderJSON("o-7"), "submit", "-", "--workflows", files, "--wait", "30s")
	require.Zero(t, code, errs)
	require.Contains(t, out, "order app-7: taken\norder o-7: taken\n")
	p.waitEnded("app-7", "o-7")
	require.Len(t, p.keys("app-7"), 1, "its effect keyed by its applicationId")

	code, out, errs = p.ctl("", "status", "app-7")
	require.Zero(t, code, errs)
	require.Contains(t, out, "app-7")
	require.Contains(t, out, "Processed")
	code, out, errs = p.ctl("", "list", "--id-prefix", "app-")
	require.Zero(t, code, errs)
	require.Contains(t, out, "app-7")
	require.NotContains(t, out, "o-7")

	other := `{"applicationId":"app-7","workflow":"loan","amountCents":5}`
	code, _, errs = p.ctl(other, "submit", "-", "--workflows", files, "--wait", "30s")
	require.Equal(t, 1, code, "a conflict, refused")
	require.Contains(t, errs, "order app-7 refused: applicationId app-7 was already accepted with different content")
	var shown struct {
		Messages []struct {
			OrderID string `json:"orderId"`
		} `json:"messages"`
	}
	p.json("dlqShow", &shown, "dlq show", "orders", "--workflows", files)
	require.Len(t, shown.Messages, 1)
	require.Equal(t, "app-7", shown.Messages[0].OrderID, "the DLQ names the refused application by its applicationId")

	code, _, errs = p.ctl(`{"orderId":"app-8","workflow":"loan","amountCents":1}`, "submit", "-", "--workflows", files)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "order 1 not sent: an order needs its id, applicationId (workflow loan's id field); its orderId is not its id")
	code, _, errs = p.ctl(`{"applicationId":"app-8","workflow":"loan","amountCents":1}`, "submit", "-", "--workflows", "")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "the deployment's workflows are not known here", "without the files: why it cannot read the id")

	code, out, errs = sasctl(t, "workflow", "show", file)
	require.Zero(t, code, errs)
	require.Contains(t, out, "\nan order's id: its applicationId\n")
	code, _, errs = sasctl(t, "workflow", "validate", writeWorkflow(t, "bad.yaml", strings.Replace(loanFile, "id: applicationId", "id: replyQueue", 1)))
	require.Equal(t, 1, code)
	require.Contains(t, errs, `bad.yaml:2: id: "replyQueue": replyQueue is the product's own member of an order`)
}

// submit --generate names its made-up orders' id by the default
// workflow's id field.
func TestGeneratedOrdersAreNamedByTheDefaultWorkflowsIDField(t *testing.T) {
	t.Parallel()
	loan, err := workflow.ParseFile("loan.yaml", []byte(loanFile), workflow.Options{})
	require.NoError(t, err)
	set := workflow.MustSet(loan)
	bodies, err := orderBodies(nil, 2, "", set.IDField(""), nil)
	require.NoError(t, err)
	require.Len(t, bodies, 2)
	for _, b := range bodies {
		o, err := message.DecodeOrder(b, set)
		require.NoError(t, err, b)
		require.True(t, strings.HasPrefix(o.OrderID, "gen-"), o.OrderID)
		require.Equal(t, "applicationId", o.IDField)
	}
}
