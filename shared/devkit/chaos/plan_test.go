package chaos

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/workflow"
)

// A 10,000-order run takes about an hour on a 2-core machine: the default
// wait must not cut it short (sasctl chaos uses it when --timeout is unset).
func TestDefaultWaitGrowsWithTheOrders(t *testing.T) {
	require.Equal(t, 10*time.Minute+150*time.Second, DefaultPlan(1, 300).Timeout)
	require.Greater(t, DefaultPlan(1, 10000).Timeout, 90*time.Minute)
}

// The generated and flow shapes declare searchable fields (none for some,
// several for others, the longest path among them), and each order of
// theirs, as sent, holds the values the judge expects it to be found by:
// the product reads them from the bytes that travel (escaped, nested, at
// and over the longest value kept as it is).
func TestShapesDeclareSearchableFieldsTheirOrdersCarry(t *testing.T) {
	p := DefaultPlan(20261121, 400)
	p.Flow = DefaultFlow()
	p.Hostile = 1 // hostile customers: keys of 141 to 400 bytes
	set := p.workflows()
	declared := p.searchedFields()
	counts := map[int]int{}
	for _, d := range set.Definitions() {
		if strings.HasPrefix(d.Name, "shape") {
			counts[len(d.Search)]++
		}
		if strings.HasPrefix(d.Name, "flow") {
			require.Equal(t, customerField, d.Search[0], "%s searches its customers", d.Name)
		}
	}
	require.Positive(t, counts[0], "a shape declares no field")
	require.Positive(t, counts[2]+counts[3]+counts[4]+counts[5], "a shape declares several")
	long, values := 0, map[string]bool{}
	for i := range p.Orders {
		id := p.orderID(i)
		d, ok := set.Get(p.workflowOf(id))
		require.True(t, ok)
		got := d.SearchValues(json.RawMessage(p.orderBody(id, i)))
		want := map[string]string{}
		for _, f := range declared[d.Name] {
			if v, ok := p.carried(id, f); ok {
				want[f] = v
				values[v] = true
			}
		}
		if len(want) == 0 {
			require.Empty(t, got, "%s", id)
			continue
		}
		require.Equal(t, want, got, "%s on %s", id, d.Name)
		if v, ok := want[longestSearchPath]; ok && len(v) > keyname.MaxKeyBytes {
			long++
		}
	}
	require.Positive(t, long, "values one byte over the longest kept as it is")
	require.True(t, values[longestSearchValue] && values["east <&\"\x01é/= x"] && values["2"] && values["true"],
		"values at the longest, escaped, numbers and booleans")
	require.Len(t, longestSearchValue, keyname.MaxKeyBytes)
	require.Len(t, longestSearchPath, workflow.MaxSearchPathBytes)
}
