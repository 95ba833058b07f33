package operator_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/operator"
)

// A redrive's query keeps a message by its order, its kind, its reject
// reason (text in any case, or none: SQS moved it) and its age.
func TestADLQQueryKeepsTheMessagesItNames(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	order := operator.DLQMessage{OrderID: "web-1", SentAt: now.Add(-time.Hour)}
	event := operator.DLQMessage{Kind: "event", OrderID: "web-2", RejectReason: "order web-2 is not stored", SentAt: now.Add(-time.Minute)}
	odd := operator.DLQMessage{RejectReason: "not JSON", SentAt: now}
	all := []operator.DLQMessage{order, event, odd}
	for what, c := range map[string]struct {
		q    operator.DLQQuery
		want []operator.DLQMessage
	}{
		"nothing asked":           {operator.DLQQuery{}, all},
		"an order":                {operator.DLQQuery{OrderIDs: []string{"web-2", "web-9"}}, []operator.DLQMessage{event}},
		"a prefix":                {operator.DLQQuery{Prefix: "web-"}, []operator.DLQMessage{order, event}},
		"an order's kind":         {operator.DLQQuery{Kind: "ORDER"}, []operator.DLQMessage{order}},
		"an event":                {operator.DLQQuery{Kind: "event"}, []operator.DLQMessage{event}},
		"a reason, any case":      {operator.DLQQuery{Reason: "NOT STORED"}, []operator.DLQMessage{event}},
		"no reason":               {operator.DLQQuery{Reason: operator.NoReason}, []operator.DLQMessage{order}},
		"older than ten minutes":  {operator.DLQQuery{OlderThan: 10 * time.Minute}, []operator.DLQMessage{order}},
		"every part must match":   {operator.DLQQuery{Prefix: "web-", Reason: "stored", OlderThan: time.Hour}, nil},
		"a prefix keeps no other": {operator.DLQQuery{Prefix: "x"}, nil},
	} {
		var got []operator.DLQMessage
		for _, m := range all {
			if c.q.Keeps(m, now) {
				got = append(got, m)
			}
		}
		require.Equal(t, c.want, got, what)
		require.Equal(t, what == "nothing asked", c.q.IsZero(), what)
	}
}
