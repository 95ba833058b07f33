package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// everyKind runs every kind of write the store makes on one order at the
// documented limits, its largest results and reasons, each kind measured
// apart: a claim and an acceptance of each of 100 async items, a give-back
// of one, their callbacks (each carrying the largest result), an event
// kept before its wait, the wait woken by it, an event completing an armed
// wait, a refusal that undoes the 100 items one at a time, and the
// resubmission of the failed order (its 205 records written whole). Each kind's largest expressions must
// fit 4 KB, and the order's item 400 KB, whatever the kind.
func everyKind(t *testing.T, s *statestore.Store, m *measured) {
	ctx := context.Background()
	const id = "o-kinds"
	d := def(5)
	d.Name = "kinds"
	d.ResultLimit = payload.MaxInline
	d.Steps[1].ForEach, d.Steps[1].Async = "lines", true
	d.Steps[1].Timeout = time.Hour
	d.Steps[2] = workflow.Step{Action: workflow.Action{Name: "approve", MaxFailures: 1, Timeout: time.Hour},
		Wait: &workflow.Wait{Event: "approved", Timeout: time.Hour}}
	d.Steps[3] = workflow.Step{Action: workflow.Action{Name: "ship", MaxFailures: 1, Timeout: time.Hour},
		Wait: &workflow.Wait{Event: "shipped", Timeout: time.Hour}}
	n := workflow.MaxForEachItems
	order := fmt.Sprintf(`{"orderId":%q,"lines":[%s]}`, id, strings.TrimSuffix(strings.Repeat("1,", n), ","))
	items := map[int]int{1: n}
	_, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: order, Workflow: d, Items: items, Now: t0})
	require.NoError(t, err)
	rec := outcome.Recorder{Store: s}
	reason := strings.Repeat("é", 4096) // 8 KB: every text kept is cut

	m.as("claim")
	first := claimedAs(t, s, id, step0, t0)
	m.as("completion")
	r := finish(t, s, d, first, "", t0)
	require.Len(t, r.Ready, n)
	var claimed []statestore.Step
	for k := 1; k <= n; k++ {
		m.as("claim")
		st, err := s.Claim(ctx, statestore.Claim{OrderID: id, Ref: workflow.Ref{Index: 1, Item: k}, Agent: "svc", Owner: "a-1",
			Token: fmt.Sprintf("n%d", k), Now: t0})
		require.NoError(t, err)
		if k == n { // the last item's call waits for its key: given back, then claimed again
			m.as("give-back")
			back, err := rec.Release(ctx, d, outcome.Attempt{OrderID: id, Ref: st.Ref, Attempt: st.Attempt, Round: 1,
				Token: st.Token, Now: t0}, t0, reason)
			require.NoError(t, err)
			require.False(t, back.Stale)
			m.as("claim")
			st, err = s.Claim(ctx, statestore.Claim{OrderID: id, Ref: st.Ref, Agent: "svc", Owner: "a-1", Token: "again", Now: t0})
			require.NoError(t, err)
		}
		m.as("accept")
		require.NoError(t, s.Accept(ctx, st, t0.Add(time.Second)))
		claimed = append(claimed, st)
	}
	m.as("event kept")
	early, err := rec.Event(ctx, d, outcome.Event{OrderID: id, Name: "approved", EventID: "e-approved",
		Data: json.RawMessage(`{"by":"` + noise(payload.MaxInline-16) + `"}`), Now: t0.Add(time.Second)})
	require.NoError(t, err)
	require.True(t, early.Kept, "the order does not wait for it yet")

	answer := `{"pad":"` + noise(payload.MaxInline-16) + `"}` // the largest answer, that does not compress
	var ready []workflow.Ref
	for _, st := range claimed {
		m.as("callback")
		tok := outcome.Token{OrderID: id, Ref: st.Ref, Round: 1, Attempt: st.Attempt, Nonce: st.Token}
		got, err := rec.Event(ctx, d, outcome.Event{OrderID: id, Token: tok.String(), Data: json.RawMessage(answer), Now: t0.Add(2 * time.Second)})
		require.NoError(t, err)
		require.False(t, got.Stale || got.Repeat, "%s's callback recorded", st.Key())
		ready = append(ready, got.Ready...)
	}
	require.Equal(t, []workflow.Ref{{Index: 2}}, ready, "the last callback readies the wait")

	m.as("arm")
	_, events, err := s.Arm(ctx, id, workflow.Ref{Index: 2}, workflow.KindEvent, t0.Add(time.Hour), t0.Add(3*time.Second))
	require.NoError(t, err)
	require.Equal(t, "e-approved", events["approved"], "the kept event is there for the wait")
	m.as("wake")
	woke, err := rec.Wake(ctx, d, id, workflow.Ref{Index: 2}, t0.Add(3*time.Second))
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{{Index: 3}}, woke.Ready)
	m.as("arm")
	_, _, err = s.Arm(ctx, id, workflow.Ref{Index: 3}, workflow.KindEvent, t0.Add(time.Hour), t0.Add(4*time.Second))
	require.NoError(t, err)
	m.as("event")
	shipped, err := rec.Event(ctx, d, outcome.Event{OrderID: id, Name: "shipped", EventID: "e-shipped",
		Data: json.RawMessage(answer), Now: t0.Add(5 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{{Index: 4}}, shipped.Ready)

	m.as("claim")
	last := claimedAs(t, s, id, workflow.Ref{Index: 4}, t0.Add(6*time.Second))
	m.as("refusal")
	r = finish(t, s, d, last, reason, t0.Add(7*time.Second))
	undone := 0
	for len(r.Ready) == 1 {
		m.as("claim")
		st := claimedAs(t, s, id, r.Ready[0], t0.Add(8*time.Second))
		m.as("undo")
		r = finish(t, s, d, st, "", t0.Add(9*time.Second))
		undone++
	}
	require.Equal(t, workflow.Failed, r.State)
	require.Equal(t, 1+n, undone, "every step that took effect is undone, one at a time")

	m.as("resubmit")
	res, err := s.Resubmit(ctx, id, "s4", time.Minute, t0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, step0, res.Ref, "a failed order runs again from its start, every record pending")
	require.Equal(t, 2, res.Round)
	size, err := s.ItemBytes(ctx, id)
	require.NoError(t, err)
	require.Less(t, size, 400*1024/3, "a third of DynamoDB's 400 KB at most")
	m.table(t, size)
}

// noise is n letters that no compression shortens much.
func noise(n int) string {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}

// as names the kind of the writes that follow, measured apart.
func (m *measured) as(kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kind = kind
	if m.kinds == nil {
		m.kinds = map[string]*kindSize{}
	}
	if m.kinds[kind] == nil {
		m.kinds[kind] = &kindSize{}
		m.order = append(m.order, kind)
	}
}

// kindSize is what one kind of write sent at its largest.
type kindSize struct {
	writes, update, cond, item int
}

// note counts a write of the current kind: its expressions, and the item it
// wrote whole (0 for an update).
func (m *measured) note(update, cond, item int) {
	if m.kind == "" {
		return
	}
	k := m.kinds[m.kind]
	k.writes++
	k.update, k.cond, k.item = max(k.update, update), max(k.cond, cond), max(k.item, item)
}

// table logs each kind's largest write, and checks it against DynamoDB's
// limits; size is the order's item at the end.
func (m *measured) table(t *testing.T, size int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "every kind of write at the limits (the order's item at the end: %d bytes):\n", size)
	fmt.Fprintf(&b, "%-12s %7s %14s %14s %12s\n", "kind", "writes", "update (B)", "condition (B)", "item (B)")
	for _, kind := range m.order {
		k := m.kinds[kind]
		fmt.Fprintf(&b, "%-12s %7d %14d %14d %12d\n", kind, k.writes, k.update, k.cond, k.item)
		require.LessOrEqual(t, k.update, statestore.MaxExpressionBytes, kind)
		require.LessOrEqual(t, k.cond, statestore.MaxExpressionBytes, kind)
		require.Less(t, k.item, 400*1024, kind)
		require.Positive(t, k.writes, "%s: no write made", kind)
	}
	t.Log(b.String())
	require.True(t, slices.Contains(m.order, "resubmit"))
}
