package workflow_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// applicationSchema declares a loan's id, applicationId, a string.
const applicationSchema = `schema:
  type: object
  required: [applicationId, amount]
  properties:
    applicationId: {type: string}
    amount: {type: number}
`

func TestAWorkflowNamesItsOrdersIDField(t *testing.T) {
	t.Parallel()
	d := parse(t, "id: applicationId\n"+loanV1+applicationSchema)
	require.Equal(t, "applicationId", d.IDField)
	require.Equal(t, "applicationId", d.IDMember())

	plain := parse(t, loanV1+applicationSchema)
	require.Empty(t, plain.IDField)
	require.Equal(t, workflow.DefaultIDField, plain.IDMember(), "none named: orderId")
	require.NotEqual(t, plain.Version, d.Version, "what an order must carry is part of the version")
	require.Equal(t, plain.Version, parse(t, "id: orderId\n"+loanV1+applicationSchema).Version,
		"id: orderId is the default: the version of a file that says nothing")

	set := workflow.MustSet(parse(t, strings.Replace(loanV1, "name: loan", "name: order", 1)), d)
	require.Equal(t, "orderId", set.IDField(""), "an order naming no workflow runs the default")
	require.Equal(t, "applicationId", set.IDField("loan"))
	require.Equal(t, "orderId", set.IDField("retired"), "a workflow the set does not run: the default")
	require.Equal(t, "orderId", workflow.Set{}.IDField("loan"), "no workflows known: the default")
	require.Equal(t, "applicationId", workflow.MustSet(d).IDField(""), "the default workflow's own")
}

// Each bad id field is a problem at the file's id: line, as any other.
func TestABadIDFieldIsAProblemAtItsLine(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"a.b":                   `"a.b": an order's id field is a member of the order (not a path)`,
		"9lives":                `"9lives": an order's id field is a member`,
		strings.Repeat("x", 65): "an order's id field is a member",
		"workflow":              `"workflow": workflow is the product's own member of an order (workflow, replyQueue, kind), not an id`,
		"ReplyQueue":            `"ReplyQueue": replyQueue is the product's own member`,
		"kind":                  "kind is the product's own member",
		"orderid":               `"orderid" is orderId in another case`,
		"$sasKey":               "an order's id field is a member",
	} {
		_, err := workflow.ParseFile("loan.yaml", []byte("name: loan\nid: '"+id+"'\n"+strings.TrimPrefix(loanV1, "\nname: loan\n")), workflow.Options{})
		ps := workflow.AsProblems(err)
		require.Len(t, ps, 1, "%s: %v", id, err)
		require.Equal(t, 2, ps[0].Line, id)
		require.Equal(t, "id", ps[0].Field, id)
		require.Contains(t, ps[0].What, want, id)
		require.True(t, strings.HasPrefix(err.Error(), "loan.yaml:2: id: "), err.Error())
	}
	good := parse(t, "id: claim_id\n"+loanV1)
	require.Equal(t, "claim_id", good.IDMember())
}

// With a schema, the id field a workflow names is declared a string, and
// one the schema cannot produce is refused: every order would be.
func TestAnIDFieldTheSchemaDoesNotDeclareAStringIsAProblem(t *testing.T) {
	t.Parallel()
	for schema, want := range map[string]string{
		"schema: {type: object, properties: {amount: {type: number}}}\n":                                                `the schema does not declare the order's id, applicationId, a string`,
		"schema: {type: object, properties: {applicationId: {}}}\n":                                                     `the schema does not declare the order's id, applicationId, a string`,
		"schema: {type: object, properties: {applicationId: {type: integer}}}\n":                                        "the schema makes the order's id, applicationId, an integer: an id is a string",
		"schema: {type: object, additionalProperties: false, properties: {amount: {}}}\n":                               "every order carries its id, applicationId: the schema allows no field applicationId in the order (only amount)",
		"schema: {allOf: [{$ref: '#/$defs/a'}], $defs: {a: {properties: {applicationId: {type: [number, 'null']}}}}}\n": "an id is a string",
	} {
		_, err := workflow.ParseFile("loan.yaml", []byte("name: loan\nid: applicationId\n"+strings.TrimPrefix(loanV1, "\nname: loan\n")+schema), workflow.Options{})
		ps := workflow.AsProblems(err)
		require.Len(t, ps, 1, "%s: %v", schema, err)
		require.Equal(t, "id", ps[0].Field)
		require.Equal(t, 2, ps[0].Line, "at the id: line")
		require.Contains(t, ps[0].What, want, schema)
	}
	for _, schema := range []string{
		"schema: {properties: {applicationId: {type: string, pattern: '^A-'}}}\n",
		"schema: {$ref: '#/$defs/app', $defs: {app: {properties: {applicationId: {type: [string, 'null']}}}}}\n",
		"schema: {allOf: [{properties: {applicationId: {type: string}}}]}\n",
	} {
		parse(t, "name: loan\nid: applicationId\n"+strings.TrimPrefix(loanV1, "\nname: loan\n")+schema)
	}
	parse(t, "id: applicationId\n"+loanV1) // no schema: nothing to check it against
}

// An order keeps the id it was sent with: a version that names another id
// field takes none of the earlier one's orders, and a transform keeps it.
func TestAMoveKeepsTheOrdersIDField(t *testing.T) {
	t.Parallel()
	v1 := parse(t, "id: applicationId\n"+loanV1+applicationSchema)
	o := orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed")
	other := parse(t, "id: loanId\n"+loanV2)
	_, err := workflow.Moving{From: v1, To: other}.Move(o)
	require.ErrorContains(t, err, "names an order's id by its applicationId, version "+other.Version+" by its loanId")
	ps := workflow.Moving{From: v1, To: other}.Problems()
	require.Len(t, ps, 1)
	require.Equal(t, "id", ps[0].Field)
	require.Equal(t, 1, ps[0].Line, "at the later version's id: line")

	data := json.RawMessage(`{"applicationId":"l-1","orderId":"shop-9","workflow":"loan","amount":"1200"}`)
	for transform, why := range map[string]string{
		`.applicationId = "l-2"`:               "changes its applicationId, which names the order",
		`.amount |= tonumber | .orderId = "x"`: "", // orderId is this workflow's data
	} {
		v2 := parse(t, "id: applicationId\n"+loanV2+applicationSchema+"migrate:\n  transform:\n    order: '"+transform+"'\n")
		require.Empty(t, workflow.Moving{From: v1, To: v2}.Problems())
		moved, err := workflow.Moving{From: v1, To: v2, Data: data}.Move(o)
		if why == "" {
			require.NoError(t, err, transform)
			require.JSONEq(t, `{"applicationId":"l-1","orderId":"x","workflow":"loan","amount":1200}`, string(moved.Data))
			continue
		}
		require.ErrorContains(t, err, why, transform)
	}
	require.Equal(t, map[string]string{"orderId": "l-1", "workflow": "loan", "replyQueue": ""},
		workflow.OrderHead("l-1", data), "the claim check's head names the order by the product's own member, orderId")
}
