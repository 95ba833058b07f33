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
	k := submitKinds(t, s, m)
	claimed := k.claimAndAcceptEachItem(t)
	k.keepAnEarlyEvent(t)
	k.callBackEachItem(t, claimed)
	k.armWakeAndDeliver(t)
	k.refuseAndUndoEachItem(t)
	m.as("resubmit")
	res, err := s.Resubmit(context.Background(), k.id, "s4", time.Minute, t0.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, step0, res.Ref, "a failed order runs again from its start, every record pending")
	require.Equal(t, 2, res.Round)
	size, err := s.ItemBytes(context.Background(), k.id)
	require.NoError(t, err)
	require.Less(t, size, 400*1024/3, "a third of DynamoDB's 400 KB at most")
	m.table(t, size)
}

// kinds is everyKind's order: a step, a step of 100 async items, two waits
// and a last step, with the largest results and reasons.
type kinds struct {
	s      *statestore.Store
	m      *measured
	rec    outcome.Recorder
	d      workflow.Definition
	id     string
	reason string // 8 KB: every text kept is cut
	answer string // the largest answer, that does not compress
}

// submitKinds submits everyKind's order.
func submitKinds(t *testing.T, s *statestore.Store, m *measured) kinds {
	d := def(5)
	d.Name = "kinds"
	d.ResultLimit = payload.MaxInline
	d.Steps[1].ForEach, d.Steps[1].Async = "lines", true
	d.Steps[1].Timeout = time.Hour
	d.Steps[2] = workflow.Step{Action: workflow.Action{Name: "approve", MaxFailures: 1, Timeout: time.Hour},
		Wait: &workflow.Wait{Event: "approved", Timeout: time.Hour}}
	d.Steps[3] = workflow.Step{Action: workflow.Action{Name: "ship", MaxFailures: 1, Timeout: time.Hour},
		Wait: &workflow.Wait{Event: "shipped", Timeout: time.Hour}}
	k := kinds{s: s, m: m, rec: outcome.Recorder{Store: s}, d: d, id: "o-kinds", reason: strings.Repeat("é", 4096),
		answer: `{"pad":"` + noise(payload.MaxInline-16) + `"}`}
	n := workflow.MaxForEachItems
	order := fmt.Sprintf(`{"orderId":%q,"lines":[%s]}`, k.id, strings.TrimSuffix(strings.Repeat("1,", n), ","))
	_, err := s.Submit(context.Background(), statestore.Submission{OrderID: k.id, Order: order, Workflow: d, Items: map[int]int{1: n},
		Now: t0})
	require.NoError(t, err)
	return k
}

// claimAndAcceptEachItem claims and completes the first step, then claims
// each of the 100 items and has its call accepted; the last item's call
// waits for its key: given back, then claimed again.
func (k kinds) claimAndAcceptEachItem(t *testing.T) []statestore.Step {
	ctx := context.Background()
	k.m.as("claim")
	first := claimedAs(t, k.s, k.id, step0, t0)
	k.m.as("completion")
	r := finish(t, k.s, k.d, first, "", t0)
	n := workflow.MaxForEachItems
	require.Len(t, r.Ready, n)
	var claimed []statestore.Step
	for i := 1; i <= n; i++ {
		k.m.as("claim")
		st, err := k.s.Claim(ctx, statestore.Claim{OrderID: k.id, Ref: workflow.Ref{Index: 1, Item: i}, Agent: "svc", Owner: "a-1",
			Token: fmt.Sprintf("n%d", i), Now: t0})
		require.NoError(t, err)
		if i == n {
			k.m.as("give-back")
			back, err := k.rec.Release(ctx, k.d, outcome.Attempt{OrderID: k.id, Ref: st.Ref, Attempt: st.Attempt, Round: 1,
				Token: st.Token, Now: t0}, t0, k.reason)
			require.NoError(t, err)
			require.False(t, back.Stale)
			k.m.as("claim")
			st, err = k.s.Claim(ctx, statestore.Claim{OrderID: k.id, Ref: st.Ref, Agent: "svc", Owner: "a-1", Token: "again", Now: t0})
			require.NoError(t, err)
		}
		k.m.as("accept")
		require.NoError(t, k.s.Accept(ctx, st, t0.Add(time.Second)))
		claimed = append(claimed, st)
	}
	return claimed
}

// keepAnEarlyEvent sends the first wait's event before the order waits
// for it: kept.
func (k kinds) keepAnEarlyEvent(t *testing.T) {
	k.m.as("event kept")
	early, err := k.rec.Event(context.Background(), k.d, outcome.Event{OrderID: k.id, Name: "approved", EventID: "e-approved",
		Data: json.RawMessage(`{"by":"` + noise(payload.MaxInline-16) + `"}`), Now: t0.Add(time.Second)})
	require.NoError(t, err)
	require.True(t, early.Kept, "the order does not wait for it yet")
}

// callBackEachItem calls each claimed item back with the largest answer:
// the last readies the first wait.
func (k kinds) callBackEachItem(t *testing.T, claimed []statestore.Step) {
	var ready []workflow.Ref
	for _, st := range claimed {
		k.m.as("callback")
		tok := outcome.Token{OrderID: k.id, Ref: st.Ref, Round: 1, Attempt: st.Attempt, Nonce: st.Token}
		got, err := k.rec.Event(context.Background(), k.d, outcome.Event{OrderID: k.id, Token: tok.String(),
			Data: json.RawMessage(k.answer), Now: t0.Add(2 * time.Second)})
		require.NoError(t, err)
		require.False(t, got.Stale || got.Repeat, "%s's callback recorded", st.Key())
		ready = append(ready, got.Ready...)
	}
	require.Equal(t, []workflow.Ref{{Index: 2}}, ready, "the last callback readies the wait")
}

// armWakeAndDeliver arms the first wait, which its kept event wakes, then
// the second, which an event completes.
func (k kinds) armWakeAndDeliver(t *testing.T) {
	ctx := context.Background()
	k.m.as("arm")
	_, events, err := k.s.Arm(ctx, k.id, workflow.Ref{Index: 2}, workflow.KindEvent, t0.Add(time.Hour), t0.Add(3*time.Second), "")
	require.NoError(t, err)
	require.Equal(t, "e-approved", events["approved"], "the kept event is there for the wait")
	k.m.as("wake")
	woke, err := k.rec.Wake(ctx, k.d, k.id, workflow.Ref{Index: 2}, t0.Add(3*time.Second))
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{{Index: 3}}, woke.Ready)
	k.m.as("arm")
	_, _, err = k.s.Arm(ctx, k.id, workflow.Ref{Index: 3}, workflow.KindEvent, t0.Add(time.Hour), t0.Add(4*time.Second), "")
	require.NoError(t, err)
	k.m.as("event")
	shipped, err := k.rec.Event(ctx, k.d, outcome.Event{OrderID: k.id, Name: "shipped", EventID: "e-shipped",
		Data: json.RawMessage(k.answer), Now: t0.Add(5 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, []workflow.Ref{{Index: 4}}, shipped.Ready)
}

// refuseAndUndoEachItem has the last step refused, then undoes every step
// that took effect, one at a time: the order ends Failed.
func (k kinds) refuseAndUndoEachItem(t *testing.T) {
	k.m.as("claim")
	last := claimedAs(t, k.s, k.id, workflow.Ref{Index: 4}, t0.Add(6*time.Second))
	k.m.as("refusal")
	r := finish(t, k.s, k.d, last, k.reason, t0.Add(7*time.Second))
	undone := 0
	for len(r.Ready) == 1 {
		k.m.as("claim")
		st := claimedAs(t, k.s, k.id, r.Ready[0], t0.Add(8*time.Second))
		k.m.as("undo")
		r = finish(t, k.s, k.d, st, "", t0.Add(9*time.Second))
		undone++
	}
	require.Equal(t, workflow.Failed, r.State)
	require.Equal(t, 1+workflow.MaxForEachItems, undone, "every step that took effect is undone, one at a time")
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
