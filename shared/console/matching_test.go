package console_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/workflow"
)

// The operator's Matching, a bulk action's selector, pages every id a
// search keeps, and nothing else: here the orders of one customer, by the
// field's index, more of them than a page holds.
func TestMatchingPagesTheIdsOfASearch(t *testing.T) {
	t.Parallel()
	p := thePipeline(t)
	n := operator.MatchingPage + 5
	var bodies, want []string
	for i := range n {
		id := fmt.Sprintf("match-%03d", i)
		bodies, want = append(bodies, localrun.DemoOrder(id, 81).JSON()), append(want, id)
	}
	bodies = append(bodies, localrun.DemoOrder("match-other", 82).JSON())
	require.NoError(t, p.stack.SendOrders(t.Context(), bodies...))
	for _, id := range want {
		p.waitState(t, id, workflow.Processed)
	}
	var got []string
	next, pages := "", 0
	for {
		ids, token, err := p.op.Matching(t.Context(), operator.Search{Field: "customerId", Value: "customer-81"}, next)
		require.NoError(t, err)
		got, pages = append(got, ids...), pages+1
		if next = token; next == "" {
			break
		}
	}
	require.ElementsMatch(t, want, got)
	require.GreaterOrEqual(t, pages, 2, "more than a page")
	ids, _, err := p.op.Matching(t.Context(), operator.Search{Field: "customerId", Value: "customer-81", State: workflow.Failed}, "")
	require.NoError(t, err)
	require.Empty(t, ids, "none of them failed")
}
