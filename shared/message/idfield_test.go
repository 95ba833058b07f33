package message_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

// shopAndLoans runs shop orders by default (their id orderId) and loans,
// whose id is their applicationId.
var shopAndLoans = workflow.MustSet(workflow.Definition{Name: "order"}, workflow.Definition{Name: "loan", IDField: "applicationId"})

// An order's id is the member its workflow names; an order naming none
// runs the default workflow, and is read by its id field.
func TestAnOrdersIDIsTheMemberItsWorkflowNames(t *testing.T) {
	t.Parallel()
	loan := `{"applicationId":"A-1","workflow":"loan","orderId":"shop-9","amount":1200}`
	o, err := message.DecodeOrder(loan, shopAndLoans)
	require.NoError(t, err)
	require.Equal(t, "A-1", o.OrderID)
	require.Equal(t, "applicationId", o.IDField)
	require.Equal(t, loan, o.JSON(), "orderId is the loan's data, kept as sent")

	o, err = message.DecodeOrder(`{"orderId":"o-1","customerId":"c"}`, shopAndLoans)
	require.NoError(t, err)
	require.Equal(t, "o-1", o.OrderID)
	require.Equal(t, "orderId", o.IDField, "no workflow named: the default's")

	loansFirst := workflow.MustSet(workflow.Definition{Name: "loan", IDField: "applicationId"})
	o, err = message.DecodeOrder(`{"applicationId":"A-2"}`, loansFirst)
	require.NoError(t, err)
	require.Equal(t, "A-2", o.OrderID, "a default workflow's own id field")
	_, err = message.DecodeOrder(`{"orderId":"A-2"}`, loansFirst)
	require.ErrorContains(t, err, "an order needs its id, applicationId (the default workflow's id field); its orderId is not its id")

	m, err := message.DecodeOrdersMessage(loan, shopAndLoans)
	require.NoError(t, err)
	require.Equal(t, "A-1", m.(message.Order).OrderID)
	m, err = message.DecodeOrdersMessage(`{"kind":"cancel","orderId":"A-1"}`, shopAndLoans)
	require.NoError(t, err)
	require.Equal(t, "A-1", m.(message.Cancel).OrderID, "a cancel names its order by the product's own orderId")

	b, err := json.Marshal(message.Order{OrderID: "A-3", IDField: "applicationId", Workflow: "loan"})
	require.NoError(t, err)
	require.JSONEq(t, `{"applicationId":"A-3","workflow":"loan"}`, string(b))
	o, err = message.DecodeOrder(string(b), shopAndLoans)
	require.NoError(t, err)
	require.Equal(t, "A-3", o.OrderID)
}

// An order without its workflow's id field (one with only an orderId) is
// refused, the reason naming the field; the id's rules are the same
// whatever the field, at both ends of its length.
func TestAnOrderWithoutItsIDFieldIsRefusedNamingIt(t *testing.T) {
	t.Parallel()
	id64 := "A" + strings.Repeat("b", 63)
	for body, want := range map[string]string{
		`{"workflow":"loan","orderId":"A-1"}`:                         "an order needs its id, applicationId (workflow loan's id field); its orderId is not its id",
		`{"workflow":"loan","amount":1}`:                              "an order needs its id, applicationId (workflow loan's id field)",
		`{"workflow":"loan","applicationId":null}`:                    "an order needs its id, applicationId",
		`{"workflow":"loan","applicationId":7}`:                       `field "applicationId" must be string (the order's id), not number`,
		`{"workflow":"loan","applicationId":""}`:                      `applicationId "" must be 1-64 letters, digits or _.:-`,
		`{"workflow":"loan","applicationId":"has space"}`:             `applicationId "has space" must be 1-64`,
		`{"workflow":"loan","applicationId":"` + id64 + `b"}`:         `applicationId "` + id64 + `b" must be 1-64`,
		`{"workflow":"loan","applicationId":"A","APPLICATIONID":"B"}`: `member "APPLICATIONID": applicationId in another case`,
		`{"workflow":"loan","applicationId":"A","ORDERID":"B"}`:       `member "ORDERID": orderId in another case`,
		`{"workflow":"loan","applicationId":"A","kind":"cancel"}`:     `an order has no kind`,
		`{"applicationId":"A-1"}`:                                     "an order needs its id, orderId",
	} {
		_, err := message.DecodeOrder(body, shopAndLoans)
		require.True(t, message.IsInvalid(err), "%s: %v", body, err)
		require.ErrorContains(t, err, want, body)
	}
	o, err := message.DecodeOrder(`{"workflow":"loan","applicationId":"`+id64+`"}`, shopAndLoans)
	require.NoError(t, err, "64 characters: the longest id")
	require.Equal(t, id64, o.OrderID)
	_, err = message.DecodeOrder(`{"workflow":"loan","applicationId":"A"}`, nil)
	require.ErrorContains(t, err, "an order needs its id, orderId", "no workflows known: the default id field")
}

// A dead-letter queue names the order a refused body is about by the id
// field of the workflow it names: a refused loan by its applicationId, a
// cancel and an event by the product's own orderId.
func TestIDOfReadsARefusedBodysOrderByItsIDField(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"applicationId":"A-1","workflow":"loan","amount":"not a number"}`: "A-1",
		`{"applicationId":"A-1","workflow":"loan","orderId":"shop-9"}`:      "A-1",
		`{"orderId":"o-1","customerId":7}`:                                  "o-1",
		`{"kind":"cancel","orderId":"A-1","applicationId":"x"}`:             "A-1",
		`{"kind":"event","orderId":"A-1","event":"approved"}`:               "A-1",
		`{"workflow":"loan","orderId":"A-2"}`:                               "",
		`not json`:                                                          "",
	} {
		require.Equal(t, want, message.IDOf([]byte(body), shopAndLoans), body)
	}
	require.Equal(t, "", message.IDOf([]byte(`{"applicationId":"A-1","workflow":"loan"}`), nil), "no workflows known: orderId")
}
