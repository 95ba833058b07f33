package localrun_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/client"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// loanWorkflow is a loan's workflow: its orders are applications, named
// by their applicationId, and carry an orderId of their own as data (the
// shop order the loan pays for).
const loanWorkflow = `name: loan
id: applicationId
schema:
  type: object
  required: [applicationId, applicant, amountCents]
  properties:
    applicationId: {type: string}
    workflow: {type: string}
    orderId: {type: string}
    applicant: {type: string}
    amountCents: {type: integer}
search: [applicant]
deadline: 1h
defaults: {timeout: 10s, maxFailures: 3, retryBackoff: 1s}
agents:
  bureau: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/bureau"}
  bank: {endpoint: "${SAS_REMOTE_BASE_URL}/v1/services/bank"}
steps:
  - name: credit-check
    agent: bureau
    undo: none
    input: '{application: .order.applicationId, applicant: .order.applicant}'
  - name: disburse
    agent: bank
    input: '{application: .order.applicationId, amountCents: .order.amountCents}'
    undo: {name: claw-back}
`

// A workflow that names its id field (id: applicationId) runs end to end
// beside the shop's, whose orders keep their orderId: an application is
// submitted by the typed client, which returns its applicationId; it
// completes, each effect's idempotency key its applicationId; the client's
// status and list (sasctl status and list) find it by that id; a resend of
// the same application is a duplicate, one with other content a conflict
// whose refusal the client's verdict finds in the DLQ by its id; an
// application with only an orderId is refused naming applicationId, and a
// client not told the workflows says why it cannot read it.
func TestAWorkflowNamingItsIDFieldRunsEndToEnd(t *testing.T) {
	t.Parallel()
	loan, err := workflow.ParseFile("loan.yaml", []byte(loanWorkflow), workflow.Options{})
	require.NoError(t, err)
	set := workflow.MustSet(workflow.MustExample(workflow.OrderWorkflow), loan)
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) { o.Workflows = set })
	ctx := context.Background()
	op := operator.New(e.stack.Deployment.Clients, e.stack.Topology())
	op.Workflows = e.stack.Deployment.Config.Workflows
	c := client.Of(op)

	application := `{"applicationId":"app-1","workflow":"loan","orderId":"shop-9","applicant":"ana","amountCents":120000}`
	id, err := c.Submit(ctx, application)
	require.NoError(t, err)
	require.Equal(t, "app-1", id)
	shop := localrun.DemoOrder("shop-1", 1)
	require.NoError(t, e.stack.SendOrders(ctx, shop.JSON()))
	tasks := e.waitEnded([]string{"app-1", "shop-1"})
	require.Equal(t, workflow.Processed, tasks["app-1"].State)
	require.Equal(t, workflow.Processed, tasks["shop-1"].State, "the default workflow's orders keep their orderId")
	e.requireLedger("app-1", "credit-check", "disburse")
	e.requireLedger("shop-9") // the application's orderId is its data: no effect is its

	st, err := c.Status(ctx, "app-1")
	require.NoError(t, err)
	require.Equal(t, "app-1", st.Order.OrderID)
	require.Equal(t, "loan", st.Order.Workflow)
	found, _, err := c.Find(ctx, client.Search{Prefix: "app-"}, 10, "")
	require.NoError(t, err)
	require.Equal(t, []string{"app-1"}, idsOf(found), "sasctl list --id-prefix app-")
	found, _, err = c.Find(ctx, client.Search{Field: "applicant", Value: "ana"}, 10, "")
	require.NoError(t, err)
	require.Equal(t, []string{"app-1"}, idsOf(found), "sasctl list --field applicant=ana")

	await := func(body string) operator.Verdict {
		since := time.Now()
		res, err := op.Submit(ctx, []string{body})
		require.NoError(t, err)
		require.Equal(t, 1, res.Sent)
		verdicts, err := op.AwaitOrders(ctx, []string{body}, since, e.rejectionWait(), 200*time.Millisecond)
		require.NoError(t, err)
		require.Len(t, verdicts, 1)
		return verdicts[0]
	}
	require.Equal(t, operator.Taken, await(application).Verdict, "a resend of the same application is a duplicate")
	v := await(`{"applicationId":"app-1","workflow":"loan","applicant":"bob","amountCents":5}`)
	require.Equal(t, operator.Refused, v.Verdict, "its refusal found in the DLQ by its applicationId")
	require.Equal(t, "app-1", v.OrderID)
	require.Contains(t, v.Reason, "applicationId app-1 was already accepted with different content")
	e.eventually("the resend taken as a duplicate", 30*time.Second, func() bool {
		return strings.Contains(e.logs.String(), `msg="duplicate order ignored" function=submission order_id=app-1`)
	})
	e.requireLedger("app-1", "credit-check", "disburse") // nothing ran twice

	_, err = c.Submit(ctx, `{"orderId":"app-2","workflow":"loan","applicant":"ana","amountCents":1}`)
	var rejected *client.RejectedError
	require.ErrorAs(t, err, &rejected)
	require.Contains(t, rejected.Reason, "an order needs its id, applicationId (workflow loan's id field); its orderId is not its id")
	unknowing := client.Of(operator.New(e.stack.Deployment.Clients, e.stack.Topology()))
	_, err = unknowing.Submit(ctx, `{"applicationId":"app-3","workflow":"loan","applicant":"ana","amountCents":1}`)
	require.ErrorAs(t, err, &rejected)
	require.Contains(t, rejected.Reason, "the deployment's workflows are not known here")
}

// idsOf are the orders' ids, in their order.
func idsOf(orders []operator.Order) []string {
	out := make([]string, len(orders))
	for i, o := range orders {
		out[i] = o.OrderID
	}
	return out
}
