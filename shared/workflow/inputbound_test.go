package workflow_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/workflow"
)

// loanFlow runs a step per document of a loan application (a jq path), its
// input the document, its calls in flight bounded per document.
const loanFlow = `name: loan
resultLimit: 16MB
agents:
  ocr:
    endpoint: http://ocr
    perKey: {key: .item.scan}
steps:
  - {name: extract, agent: ocr, timeout: 20s, forEach: .application.documents, input: .item}
  - {name: file, agent: ocr, timeout: 20s, input: '{scans: .order.application.documents, pages: .results.extract}'}
`

// A step's input may be any part of its document up to the payload limit
// (payload.MaxBytes, on its encoded bytes), and so may a forEach path's
// array and a perKey key: the bound of 1 MB, there against values an
// expression makes, refused what it selects, which its document counted
// already ("extract's input: it gave 1572937 bytes, over the
// 1048576-byte bound": a forEach over 1-3 MB documents could not pass each
// its document). At the bound, a value is taken; a byte over, refused with
// the reason, before it is encoded.
func TestAStepsInputIsAnyPartOfItsDocumentUpToAPayload(t *testing.T) {
	require.Equal(t, payload.MaxBytes, workflow.MaxJQOutputBytes, "the payload limit")
	d, err := workflow.ParseFile("loan.yaml", []byte(loanFlow), workflow.Options{})
	require.NoError(t, err)
	scan := func(i, n int) string {
		return fmt.Sprintf(`{"scan":"%d%s"}`, i, strings.Repeat("s", n-len(`{"scan":"0"}`)))
	}
	docs := []string{scan(1, 1572937), scan(2, 3<<20), scan(3, 3<<20)}
	order := json.RawMessage(`{"orderId":"o-1","application":{"documents":[` + strings.Join(docs, ",") + `]}}`)
	items, err := d.Items(order)
	require.NoError(t, err, "the forEach path gives its 7.5 MB array")
	require.Equal(t, map[int]int{0: 3}, items)
	for k := 1; k <= 3; k++ {
		item, err := d.Item(order, 0, k)
		require.NoError(t, err)
		doc := workflow.Document{Order: order, Item: item}
		in, err := d.Steps[0].InputFor(doc)
		require.NoError(t, err, "item %d", k)
		require.Equal(t, docs[k-1], string(in))
		key, err := d.AgentSpecs["ocr"].PerKey.KeyFor(doc)
		require.NoError(t, err)
		require.Len(t, key, len(docs[k-1])-len(`{"scan":""}`), "a key of %d MB", len(key)>>20)
	}

	// A value made of two parts: exactly the bound, and a byte over.
	pages := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("p", n) + `"`) }
	results := func(n int) map[string]json.RawMessage { return map[string]json.RawMessage{"extract": pages(n)} }
	doc := workflow.Document{Order: order, Results: results(0)}
	base, err := d.Steps[1].InputFor(doc)
	require.NoError(t, err)
	room := workflow.MaxJQOutputBytes - len(base)
	doc.Results = results(room)
	in, err := d.Steps[1].InputFor(doc)
	require.NoError(t, err)
	require.Len(t, in, workflow.MaxJQOutputBytes, "at the bound")
	doc.Results = results(room + 1)
	_, err = d.Steps[1].InputFor(doc)
	var ee *workflow.ExpressionError
	require.ErrorAs(t, err, &ee)
	require.EqualError(t, err, "file's input: it gave more than 16777216 bytes once encoded, the most a payload may be")

	// Weighed as it is encoded: a part of 2.7 MB of DEL characters (jq
	// writes each as \u007f) is 16 MB and more.
	del := json.RawMessage(`"` + strings.Repeat("\x7f", workflow.MaxJQOutputBytes/6+1) + `"`)
	doc.Results = map[string]json.RawMessage{"extract": del}
	_, err = workflow.Action{Name: "file", Input: ".results.extract"}.InputFor(doc)
	require.EqualError(t, err, "file's input: it gave more than 16777216 bytes once encoded, the most a payload may be")
}
