package workflow_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// searchFile is a one-step workflow declaring search, with schema (a
// "schema:" block, or "" for none) at its end.
func searchFile(search, schema string) []byte {
	return fmt.Appendf(nil, `name: t
agents:
  a: {endpoint: "http://127.0.0.1:1"}
steps:
  - {name: s, agent: a, timeout: 5s}
search: %s
%s`, search, schema)
}

const closedCustomer = `schema:
  type: object
  additionalProperties: false
  properties:
    orderId: {type: string}
    customerId: {type: string}
    region: {type: object, additionalProperties: false, properties: {code: {type: string}}}
`

func TestASearchableFieldIsAPathTheOrderSchemaProduces(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("t.yaml", searchFile("[customerId, region.code]", closedCustomer), workflow.Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"customerId", "region.code"}, d.Search)

	_, err = workflow.ParseFile("t.yaml", searchFile("[customerID]", closedCustomer), workflow.Options{})
	require.ErrorContains(t, err, "search[0]")
	require.ErrorContains(t, err, "no field customerID")

	// With no schema it cannot be checked: a warning, the file valid.
	d, err = workflow.ParseFile("t.yaml", searchFile("[customerId]", ""), workflow.Options{})
	require.NoError(t, err)
	require.Len(t, d.Warnings, 1)
	require.Equal(t, "search[0]", d.Warnings[0].Field)
}

func TestSearchableFieldsAreBoundedInNumberAndLength(t *testing.T) {
	t.Parallel()
	fields := func(n int) string {
		var f []string
		for i := range n {
			f = append(f, fmt.Sprintf("f%d", i))
		}
		return "[" + strings.Join(f, ", ") + "]"
	}
	_, err := workflow.ParseFile("t.yaml", searchFile(fields(workflow.MaxSearchFields), ""), workflow.Options{})
	require.NoError(t, err)
	_, err = workflow.ParseFile("t.yaml", searchFile(fields(workflow.MaxSearchFields+1), ""), workflow.Options{})
	require.ErrorContains(t, err, "at most 8 searchable")

	longest := "a" + strings.Repeat("b", workflow.MaxSearchPathBytes-1)
	_, err = workflow.ParseFile("t.yaml", searchFile("["+longest+"]", ""), workflow.Options{})
	require.NoError(t, err)
	_, err = workflow.ParseFile("t.yaml", searchFile("["+longest+"b]", ""), workflow.Options{})
	require.ErrorContains(t, err, "a searchable field is a path")
	for _, bad := range []string{`"a..b"`, `"a b"`, `"a[0]"`, `".a"`, `[x]`, `"a", "a"`} {
		_, err = workflow.ParseFile("t.yaml", searchFile("["+bad+"]", ""), workflow.Options{})
		require.Error(t, err, bad)
	}
}

func TestSearchValuesAreTheOrdersScalarsAtEachPath(t *testing.T) {
	t.Parallel()
	d, err := workflow.ParseFile("t.yaml", searchFile("[customerId, region.code, n, vip, gone, obj]", ""), workflow.Options{})
	require.NoError(t, err)
	got := d.SearchValues(json.RawMessage(`{"orderId":"o","customerId":"c-<1>&","region":{"code":"eu"},"n":12.50,"vip":true,"obj":{"a":1}}`))
	require.Equal(t, map[string]string{"customerId": "c-<1>&", "region.code": "eu", "n": "12.50", "vip": "true"}, got)
	require.Empty(t, d.SearchValues(json.RawMessage(`not json`)))
}
