package sastest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// loans is a workflow whose orders are loan applications, named by their
// applicationId.
const loans = `name: loan
id: applicationId
schema:
  type: object
  required: [applicationId, amount]
  properties:
    applicationId: {type: string}
    orderId: {type: string}
    amount: {type: number}
defaults: {timeout: 10s, maxFailures: 2, retryBackoff: 5s}
agents:
  bank: {endpoint: "http://bank"}
steps:
  - name: check
    agent: bank
    undo: none
  - name: disburse
    agent: bank
    input: '{application: .order.applicationId, amount: .order.amount}'
    undo: {name: claw-back}
`

// The kit takes the orders of a workflow that names its id field by that
// field, as Submission does: an application runs under its applicationId,
// one without it (an orderId alone) is refused naming the field, and the
// same application twice is refused as a repeat.
func TestTheKitTakesOrdersByTheirWorkflowsIDField(t *testing.T) {
	k := kit(t, loans)
	o := k.Submit(`{"applicationId":"A-1","orderId":"shop-9","amount":1200}`)
	require.Equal(t, "A-1", o.ID)
	k.Run()
	require.Equal(t, workflow.Processed, o.State())
	calls := k.Calls("bank")
	require.Len(t, calls, 2)
	for _, c := range calls {
		require.Equal(t, "A-1", c.OrderID)
	}
	require.Equal(t, "A-1/disburse", calls[1].Key[:len("A-1/disburse")], "the idempotency key is the application's")
	require.JSONEq(t, `{"application":"A-1","amount":1200}`, string(calls[1].Input))

	_, err := k.TrySubmit(`{"orderId":"A-2","amount":5}`)
	require.ErrorContains(t, err, "its applicationId (workflow loan's id field)")
	require.Nil(t, k.Order("A-2"))
	_, err = k.TrySubmit(`{"applicationId":"A-1","amount":1200}`)
	require.ErrorContains(t, err, "order A-1 submitted twice")
	_, err = k.TrySubmit(`{"applicationId":"A-3"}`)
	require.ErrorContains(t, err, "missing property 'amount'", "its schema checks it as Submission does")
}
