package operator

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// A search by where an order is, its end and a searchable field reads its
// query and writes it back the same, and keeps what it says.
func TestASearchByWhereAnOrderIsReadsAndWritesItsQuery(t *testing.T) {
	t.Parallel()
	q := url.Values{"version": {"ab12"}, "step": {"charge-payment"}, "agent": {"payment"}, "reason": {"refused"},
		"ended-after": {"2h"}, "ended-before": {"2036-12-07T10:00:00Z"}, "field": {"customerId=c = 1&"}}
	s, err := SearchOf(q)
	require.NoError(t, err)
	end := time.Date(2036, 12, 7, 10, 0, 0, 0, time.UTC)
	require.Equal(t, Search{Version: "ab12", Step: "charge-payment", Agent: "payment", Reason: "refused",
		EndedAfter: Moment{Ago: 2 * time.Hour}, EndedBefore: Moment{At: end}, Field: "customerId", Value: "c = 1&"}, s)
	require.Equal(t, q, s.Query())
	require.False(t, s.Empty())

	now := end.Add(time.Hour)
	f := s.Filter(now)
	require.Equal(t, now.Add(-2*time.Hour), f.EndedAfter)
	require.Equal(t, end, f.EndedBefore)
	task := statestore.Task{OrderID: "o", Version: "ab12", State: workflow.Failed, CompletedAt: end.Add(-time.Minute),
		At: []statestore.Spot{{Step: "charge-payment", Agent: "payment", State: workflow.Error, Cause: workflow.Refused}}}
	require.True(t, f.Keeps(task))
	for what, change := range map[string]func(*statestore.Task){
		"another version": func(t *statestore.Task) { t.Version = "cd34" },
		"ended too early": func(t *statestore.Task) { t.CompletedAt = now.Add(-3 * time.Hour) },
		"ended too late":  func(t *statestore.Task) { t.CompletedAt = end },
		"not ended":       func(t *statestore.Task) { t.CompletedAt = time.Time{} },
		"at another step": func(t *statestore.Task) {
			t.At = []statestore.Spot{{Step: "ship", Agent: "payment", Cause: workflow.Refused}}
		},
		"another agent": func(t *statestore.Task) {
			t.At = []statestore.Spot{{Step: "charge-payment", Agent: "bank", Cause: workflow.Refused}}
		},
		"timed out instead": func(t *statestore.Task) {
			t.At = []statestore.Spot{{Step: "charge-payment", Agent: "payment", Cause: workflow.TimedOut}}
		},
		"nowhere": func(t *statestore.Task) { t.At = nil },
	} {
		other := task
		change(&other)
		require.False(t, f.Keeps(other), what)
	}
}

// A reason class names what its records say; any other word is text.
func TestAReasonIsAClassOrText(t *testing.T) {
	t.Parallel()
	for reason, spot := range map[string]statestore.Spot{
		"timeout":     {Cause: workflow.Expired},
		"TIMEOUT":     {Error: "context deadline: call timed out"},
		"refused":     {Cause: workflow.Refused},
		"oversized":   {Cause: workflow.Oversized},
		"pause":       {Why: "agent payment is paused (by ops)"},
		"line":        {Why: `waiting for a slot of key "k1" (2nd in line)`},
		"rate":        {Why: "waiting for its rate turn (agent a, 5/s)"},
		"503":         {Why: "agent bank's service asked for no calls before 10:00"},
		"bad gateway": {Error: "HTTP 502 Bad Gateway"},
	} {
		require.True(t, spot.Matches(reason), reason)
	}
	require.False(t, statestore.Spot{Cause: workflow.TimedOut}.Matches("refused"))
	require.False(t, statestore.Spot{Why: "agent a is paused (by ops)"}.Matches("line"))
}

// A bad end time or field is refused with the reason.
func TestABadEndOrFieldIsRefused(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]string{
		"ended-after=soon":               `ended-after: "soon" is neither a time`,
		"field=customerId":               `field: "customerId": write a searchable field's value as name=value`,
		"field==x":                       `field: "=x"`,
		"ended-after=1h&ended-before=2h": "no order ended after 1h and before 2h",
	} {
		v, err := url.ParseQuery(q)
		require.NoError(t, err)
		_, err = SearchOf(v)
		require.ErrorContains(t, err, want, q)
	}
}
