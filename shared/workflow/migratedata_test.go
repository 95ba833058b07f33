package workflow_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// loanSchema gives loanV2 a schema whose amount is a number.
const loanSchema = `schema:
  type: object
  required: [orderId, amount]
  properties:
    amount: {type: number}
`

func TestAPlanRewritesTheOrdersDataAsItMoves(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	v2 := parse(t, loanV2+loanSchema+"migrate:\n  transform:\n    order: '.amount |= tonumber'\n")
	o := orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed")
	data := json.RawMessage(`{"orderId":"l-1","workflow":"loan","amount":"1200"}`)
	moved, err := workflow.Moving{From: v1, To: v2, Data: data}.Move(o)
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"l-1","workflow":"loan","amount":1200}`, string(moved.Data))

	_, err = workflow.Moving{From: v1, To: v2}.Move(o)
	require.NoError(t, err, "a move not given the data (a dry run of the rule) places the records all the same")

	plain := parse(t, loanV2)
	moved, err = workflow.Moving{From: v1, To: plain, Data: data}.Move(o)
	require.NoError(t, err)
	require.Nil(t, moved.Data, "a plan with no transform leaves the data as it is")
}

func TestARewriteThatBreaksTheOrderIsRefusedAndSaysWhy(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	o := orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed")
	data := json.RawMessage(`{"orderId":"l-1","workflow":"loan","amount":"12x0","replyQueue":"q"}`)
	for transform, why := range map[string]string{
		`.amount |= tonumber`:       "its data cannot be rewritten",
		`.orderId = "l-2"`:          "changes its orderId",
		`del(.replyQueue)`:          "changes its replyQueue",
		`.workflow = "other"`:       "changes its workflow",
		`[.]`:                       "not a JSON object",
		`.amount = {"a": 1}`:        "does not meet version",
		`.amount, .amount`:          "more than one value",
		`error("at \(.amount)")`:    "12x0",
		`.items = [range(1000)]`:    "",
		`.amount |= (. + "")`:       "does not meet version",
		`.amount |= ascii_downcase`: "does not meet version",
	} {
		v2 := parse(t, loanV2+loanSchema+"migrate:\n  transform:\n    order: '"+strings.ReplaceAll(transform, "'", "''")+"'\n")
		_, err := workflow.Moving{From: v1, To: v2, Data: data}.Move(o)
		var nm *workflow.NotMovableError
		require.ErrorAs(t, err, &nm, transform)
		require.Contains(t, err.Error(), why, transform)
	}
}

func TestARefusedRewriteOfASealedOrderQuotesNoneOfItsData(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	o := orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed")
	data := json.RawMessage(`{"orderId":"l-1","workflow":"loan","amount":"secret-IBAN-123"}`)
	for _, transform := range []string{`error("at \(.amount)")`, `.amount |= tonumber`} {
		v2 := parse(t, loanV2+loanSchema+"migrate:\n  transform:\n    order: '"+transform+"'\n")
		_, err := workflow.Moving{From: v1, To: v2, Data: data}.Move(o)
		require.Error(t, err, transform)
		_, err = workflow.Moving{From: v1, To: v2, Data: data}.Move(o)
		require.Contains(t, err.Error(), "secret-IBAN-123", "%s: the test's data is quoted unsealed", transform)
		_, err = workflow.Moving{From: v1, To: v2, Data: data, Sealed: true}.Move(o)
		require.Error(t, err)
		require.NotContains(t, err.Error(), "secret-IBAN-123", transform)
	}
}

func TestAPlanRewritesAStepsResult(t *testing.T) {
	t.Parallel()
	v2 := parse(t, loanV2+"migrate:\n  transform:\n    results:\n      credit: '{score: .score, band: (if .score > 700 then \"A\" else \"B\" end)}'\n")
	m := workflow.Moving{From: parse(t, loanV1), To: v2}
	out, ok, err := m.TransformResult("credit", json.RawMessage(`{"score":720,"raw":"..."}`))
	require.NoError(t, err)
	require.True(t, ok)
	require.JSONEq(t, `{"score":720,"band":"A"}`, string(out))
	_, ok, err = m.TransformResult("ocr", json.RawMessage(`{}`))
	require.NoError(t, err)
	require.False(t, ok, "a step the plan names not keeps its result")
	require.True(t, m.Transforms("credit"))
	require.False(t, m.Transforms("ocr"))
}

func TestATransformThatNamesNoStepOrDoesNotCompileIsAProblem(t *testing.T) {
	t.Parallel()
	_, err := workflow.ParseFile("loan.yaml", []byte(loanV2+"migrate:\n  transform:\n    order: '.a |'\n    results:\n      nope: '.'\n      credit: '.['\n"),
		workflow.Options{})
	require.ErrorContains(t, err, "migrate.transform.order")
	require.ErrorContains(t, err, `migrate.transform.results.nope: "nope" is not a step of this workflow`)
	require.ErrorContains(t, err, "migrate.transform.results.credit")
}

// shipping adds a step that runs per document before the approval.
const shipping = "  - {name: scan, agent: docs, forEach: documents, undo: none}\n  - name: approval\n"

func TestANewStepThatRunsPerItemCountsTheOrdersItems(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	v2 := parse(t, strings.Replace(loanV1, "  - name: approval\n", shipping, 1))
	o := orderAt(v1, []string{"validate", "ocr", "credit"}, "approval", "armed")
	_, err := workflow.Moving{From: v1, To: v2}.Move(o)
	require.ErrorContains(t, err, "step scan runs per item in version "+v2.Version+": a move counts its items from the order's data, which this one did not read")

	data := json.RawMessage(`{"orderId":"l-1","documents":["id","payslip","lease"]}`)
	moved, err := workflow.Moving{From: v1, To: v2, Data: data}.Move(o)
	require.NoError(t, err)
	scan := v2.Index("scan")
	var ready []workflow.Ref
	for k := 1; k <= 3; k++ {
		ref := workflow.Ref{Index: scan, Item: k}
		require.Equal(t, workflow.Placed{New: true, Ready: true}, moved.Recs[ref])
		ready = append(ready, ref)
	}
	require.NotContains(t, moved.Recs, workflow.Ref{Index: scan, Item: 4})
	require.NotContains(t, moved.Recs, workflow.Ref{Index: scan})
	require.ElementsMatch(t, ready, moved.Ready)

	_, err = workflow.Moving{From: v1, To: v2, Data: json.RawMessage(`{"orderId":"l-1","documents":[]}`)}.Move(o)
	require.ErrorContains(t, err, "want 1 to 100", "an order with no items could not run the step")
}

func TestARewriteMayNotChangeTheItemsOfAStepThatHasThem(t *testing.T) {
	t.Parallel()
	perItem := strings.Replace(loanV1, "  - name: approval\n", shipping, 1)
	v1 := parse(t, perItem)
	v2 := parse(t, strings.Replace(perItem, "timeout: 72h", "timeout: 96h", 1)+"migrate:\n  transform:\n    order: '.documents += [\"extra\"]'\n")
	data := json.RawMessage(`{"orderId":"l-1","documents":["id","payslip"]}`)
	o := v1.Start(map[int]int{v1.Index("scan"): 2})
	for ref, r := range o.Recs {
		if !ref.Undo && ref.Index < v1.Index("scan") {
			r.State, r.Attempt = workflow.Processed, 1
		}
		r.Ready = !ref.Undo && ref.Index == v1.Index("scan")
		o.Recs[ref] = r
	}
	_, err := workflow.Moving{From: v1, To: v2, Data: data}.Move(o)
	require.ErrorContains(t, err, "step scan runs once per item: the order has 2 of them and its data, as the move leaves it, 3")

	same := parse(t, strings.Replace(perItem, "timeout: 72h", "timeout: 96h", 1)+"migrate:\n  transform:\n    order: '.documents |= map(ascii_upcase)'\n")
	moved, err := workflow.Moving{From: v1, To: same, Data: data}.Move(o)
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"l-1","documents":["ID","PAYSLIP"]}`, string(moved.Data))
}

func TestTheDataOfAnOrderWithAnAsyncCallAtWorkIsNotRewritten(t *testing.T) {
	t.Parallel()
	async := strings.Replace(loanV1, "{name: credit, agent: bureau, undo: none}", "{name: credit, agent: bureau, async: true, undo: none}", 1)
	v1 := parse(t, async)
	data := json.RawMessage(`{"orderId":"l-1","customer":"c-1"}`)
	o := orderAt(v1, []string{"validate", "ocr"}, "credit", "accepted")
	v2 := parse(t, strings.Replace(async, "timeout: 72h", "timeout: 96h", 1)+"migrate:\n  transform:\n    order: '.customer = \"c-2\"'\n")
	_, err := workflow.Moving{From: v1, To: v2, Data: data}.Move(o)
	require.ErrorContains(t, err, "step credit's async call is at work, made from its data as it is")
	plain := parse(t, strings.Replace(async, "timeout: 72h", "timeout: 96h", 1))
	_, err = workflow.Moving{From: v1, To: plain, Data: data}.Move(o)
	require.NoError(t, err, "without a rewrite it keeps its place and its token")
}

func TestAMoveReadsTheOrdersDataOnlyWhenItMust(t *testing.T) {
	t.Parallel()
	v1 := parse(t, loanV1)
	perItem := parse(t, strings.Replace(loanV1, "  - name: approval\n", shipping, 1))
	longer := parse(t, strings.Replace(strings.Replace(loanV1, "  - name: approval\n", shipping, 1), "timeout: 72h", "timeout: 96h", 1))
	rewrites := parse(t, loanV2+"migrate:\n  transform:\n    results: {credit: '.'}\n")
	for _, c := range []struct {
		from, to workflow.Definition
		reads    bool
	}{
		{v1, parse(t, loanV2), false},
		{v1, perItem, true},      // a new step per item: its items counted
		{perItem, longer, false}, // the same step per item: its records carried
		{v1, rewrites, false},    // a result rewritten: the order's data not read
		{v1, parse(t, loanV2+"migrate:\n  transform:\n    order: '.'\n"), true},
	} {
		require.Equal(t, c.reads, workflow.Moving{From: c.from, To: c.to}.ReadsData(), "%s to %s", c.from.Version, c.to.Version)
	}
}
