package operator

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// A search read from a URL query is written back the same, and keeps the
// orders of its prefix, workflow and ages as of now.
func TestASearchReadsItsQueryAndKeepsWhatItSays(t *testing.T) {
	t.Parallel()
	q := url.Values{"prefix": {" web-"}, "workflow": {"order"}, "older": {"10m"}, "newer": {"2d"}, "state": {"Failed"}}
	s, err := SearchOf(q)
	require.NoError(t, err)
	require.Equal(t, Search{Prefix: "web-", Workflow: "order", OlderThan: 10 * time.Minute, NewerThan: 48 * time.Hour}, s)
	require.Equal(t, url.Values{"prefix": {"web-"}, "workflow": {"order"}, "older": {"10m"}, "newer": {"48h"}}, s.Query())
	require.False(t, s.Empty())

	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	f := s.Filter(now)
	require.Equal(t, now.Add(-10*time.Minute), f.CreatedBefore)
	require.Equal(t, now.Add(-48*time.Hour), f.CreatedAfter)
	task := statestore.Task{OrderID: "web-1", Workflow: "order", State: workflow.Failed, CreatedAt: now.Add(-time.Hour)}
	require.True(t, f.Keeps(task))
	for what, change := range map[string]func(*statestore.Task){
		"another prefix":   func(t *statestore.Task) { t.OrderID = "app-1" },
		"another workflow": func(t *statestore.Task) { t.Workflow = "approval" },
		"too new":          func(t *statestore.Task) { t.CreatedAt = now.Add(-time.Minute) },
		"too old":          func(t *statestore.Task) { t.CreatedAt = now.Add(-72 * time.Hour) },
	} {
		other := task
		change(&other)
		require.False(t, f.Keeps(other), what)
	}

	none, err := SearchOf(url.Values{})
	require.NoError(t, err)
	require.True(t, none.Empty())
	require.True(t, none.Filter(now).Keeps(task))
}

// An age that is not one, or a search that can keep nothing, is refused
// with the reason.
func TestABadSearchIsRefusedWithTheReason(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]string{
		"older=soon":          `older: "soon" is not an age: write one like 10m, 1h or 2d`,
		"newer=-1h":           `newer: "-1h" is not an age`,
		"newer=1.5d":          `newer: "1.5d" is not an age`,
		"older=1h&newer=10m":  "no order is older than 1h and newer than 10m",
		"older=1h&newer=60m":  "no order is older than 1h and newer than 1h",
		"older=10m&newer=10s": "no order is older than 10m and newer than 10s",
	} {
		v, err := url.ParseQuery(q)
		require.NoError(t, err)
		_, err = SearchOf(v)
		require.ErrorContains(t, err, want, q)
	}
	d, err := ParseAge("3d")
	require.NoError(t, err)
	require.Equal(t, 72*time.Hour, d)
}
