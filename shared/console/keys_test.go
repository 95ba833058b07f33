package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/workflow"
)

var orderLinkRE = regexp.MustCompile(`href="/orders/([^"]+)"`)

// between is the part of s from the first from to the next to after it.
func between(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	require.GreaterOrEqual(t, i, 0, "no %q in:\n%s", from, s)
	j := strings.Index(s[i:], to)
	require.GreaterOrEqual(t, j, 0, "no %q after %q", to, from)
	return s[i : i+j]
}

// linkedOrders are the orders s links to, in its order.
func linkedOrders(s string) []string {
	var out []string
	for _, m := range orderLinkRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// The agents page shows an agent's keys in use: a key with two calls in
// flight and three waiting shows its holders and its line, in line order
// (not the orders' names' order), each order linked to its page, with the
// count and the oldest's age.
func TestTheAgentsPageShowsAKeysCallsInFlightAndItsLine(t *testing.T) {
	p := thePipeline(t)
	base := serve(t, p, nil)
	ctx, s := context.Background(), p.op.Lines
	key := fmt.Sprintf("cust-%d", time.Now().UnixNano())
	now, ref := time.Now(), workflow.Ref{}
	for _, o := range []string{"o-kh1", "o-kh2"} {
		got, err := s.Hold(ctx, "inventory", key, 2, keyline.Holder(o, ref, 1, 1), now.Add(time.Hour), now)
		require.NoError(t, err)
		require.True(t, got.Held)
	}
	line := []string{"o-kw3", "o-kw1", "o-kw2"}
	for i, o := range line {
		w := keyline.Waiter{ID: keyline.WaiterID(o, ref, 1), Request: json.RawMessage(`{}`)}
		_, err := s.Wait(ctx, "inventory", key, 2, w, now.Add(time.Duration(i-3)*10*time.Second))
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, o := range line {
			_, _ = s.Leave(ctx, "inventory", key, keyline.WaiterID(o, ref, 1), time.Now())
		}
		for _, o := range []string{"o-kh1", "o-kh2"} {
			_, _ = s.Release(ctx, "inventory", key, keyline.Holder(o, ref, 1, 1), time.Now())
		}
	})

	_, body := get(t, base+"/agents")
	require.Contains(t, body, `data-agent="inventory"`, "the agents table is as it was")
	require.Contains(t, between(t, body, `id="keys-of-inventory"`, "</h2>"), "1 key in use, 3 calls waiting in line (longest 3")
	row := between(t, between(t, body, `id="keys-inventory"`, "</table>"), `data-key="`+key+`"`, "</tr>")
	require.Contains(t, row, `<td class="inflight">2 / 2</td>`)
	require.Regexp(t, `<td class="waiting">3, the oldest 3\ds</td>`, row)
	require.Equal(t, []string{"o-kh1", "o-kh2"}, linkedOrders(between(t, row, `class="calls holders"`, "</ul>")))
	require.Equal(t, line, linkedOrders(between(t, row, `class="calls waiters"`, "</ol>")), "in line order")
	require.NotContains(t, body, `id="keys-payment"`, "an agent with no key in use has no table")
}
