package localrun_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/localrun"
)

// With sealData, an order Submission refuses is on the orders DLQ as it was
// sent (to be mended and sent again), but the reason it is refused for
// (the DLQ message's attribute, the handlers' log line, the metric line)
// names the field at fault and the schema's keyword, never the value: of a
// deployment that does not seal, the schema's message quotes it.
func TestASealedOrdersRefusalQuotesNoneOfItsData(t *testing.T) {
	t.Parallel()
	flow := strings.Replace(largeFlow, "name: large\n", `name: large
schema:
  type: object
  properties:
    doc: {type: string, pattern: "^d*$"}
    answer: {type: integer, maximum: 100}
`, 1)
	const secret = "ssn-987-65-4321"
	body := `{"orderId":"refused-1","workflow":"large","answer":7777777,"doc":"` + secret + `"}`
	for _, sealed := range []bool{true, false} {
		var metricLines bytes.Buffer
		e, _ := largeEnv(t, flow, func(o *localrun.Options) {
			o.SealData = sealed
			o.Metrics = &metricLines
		})
		e.send(e.stack.Topology().OrdersQueue().Name, body)
		reason := e.rejection(e.stack.Topology().OrdersQueue().DLQName, secret)
		if !sealed {
			require.Contains(t, reason, secret, "the schema's message quotes the value")
			require.Contains(t, reason, "answer: maximum: got ")
			continue
		}
		require.Contains(t, reason, "order refused-1: answer: maximum; doc: pattern (workflow large's schema)", "the field and the keyword")
		e.eventually("the refusal's metric line", e.rejectionWait(), func() bool {
			return strings.Contains(metricLines.String(), "doc: pattern")
		})
		for what, text := range map[string]string{"the DLQ reason": reason, "the logs": e.logs.String(), "the metric lines": metricLines.String()} {
			require.NotContains(t, text, secret, what)
			require.NotContains(t, text, "7777777", what)
		}
	}
}
