package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// The writes that change many records at once, at the documented limits:
// a sweep that gives back, or gives up on, a forEach step's 100 items; a
// cancel of 100 accepted async items; a held order going on with 100 items
// made ready. Each must land whole (written field by field while that fits
// DynamoDB's 4 KB expression, else its records whole on the order as read),
// never be refused for its size.

// items is a workflow of a step, then a step per item (100, async if
// async), then a step per item again, each with an undo; and an order of
// it.
func items(id string, async bool) (workflow.Definition, map[int]int, string) {
	d := def(3)
	d.Name = "items"
	d.Steps[1].ForEach, d.Steps[2].ForEach = "lines", "lines"
	d.Steps[1].Async = async
	d.Steps[2].Undo = &workflow.Action{Name: "undo-s2", Agent: "svc", Timeout: 10 * time.Second, MaxFailures: 3}
	n := workflow.MaxForEachItems
	order := fmt.Sprintf(`{"orderId":%q,"lines":[%s]}`, id, strings.TrimSuffix(strings.Repeat("1,", n), ","))
	return d, map[int]int{1: n, 2: n}, order
}

// itemsClaimed submits an items order, runs its first step and claims
// every item of the second (with a token if async): the claimed records.
func itemsClaimed(t *testing.T, s *statestore.Store, id string, async bool) (workflow.Definition, []statestore.Step) {
	ctx := context.Background()
	d, n, order := items(id, async)
	_, err := s.Submit(ctx, statestore.Submission{OrderID: id, Order: order, Workflow: d, Items: n, Now: t0})
	require.NoError(t, err)
	finish(t, s, d, claimedAs(t, s, id, workflow.Ref{Index: 0}, t0), "", t0)
	var claimed []statestore.Step
	for k := 1; k <= n[1]; k++ {
		token := ""
		if async {
			token = fmt.Sprintf("n%d", k)
		}
		st, err := s.Claim(ctx, statestore.Claim{OrderID: id, Ref: workflow.Ref{Index: 1, Item: k}, Agent: "svc", Owner: "a-1",
			Token: token, Now: t0})
		require.NoError(t, err)
		claimed = append(claimed, st)
	}
	return d, claimed
}

// sweepsAHundredItems: a hung service: every item of a step times out in
// one sweep; the Supervisor gives each back in one write, then, each at its
// threshold, gives up on each in one write, and the undoing starts.
func sweepsAHundredItems(t *testing.T, s *statestore.Store, m *measured) {
	ctx := context.Background()
	_, claimed := itemsClaimed(t, s, "o-sweep", false)
	reason := strings.Repeat("the service did not answer; ", 10)
	snap, err := s.Read(ctx, "o-sweep")
	require.NoError(t, err)
	o, w := snap.Order(), statestore.Write{Move: workflow.Move{Read: workflow.Read{Version: true}}, Now: t0.Add(time.Minute)}
	for _, st := range claimed {
		mv := o.GiveBack(st.Ref, true)
		o, w.Move = o.After(mv), w.Move.Then(mv)
		w.Looks = append(w.Looks, statestore.Look{Ref: st.Ref, FailureCount: 1, Reason: reason,
			ReadyAt: t0.Add(time.Minute + time.Second), Due: t0.Add(2 * time.Minute)})
	}
	_, err = s.Apply(ctx, snap, w)
	require.NoError(t, err, "a hundred give-backs, one write")
	_, recs, err := s.Load(ctx, "o-sweep")
	require.NoError(t, err)
	for _, r := range recs {
		if r.Index == 1 && !r.Undo {
			require.Equal(t, workflow.Pending, r.State, r.Key())
			require.Equal(t, 1, r.FailureCount, r.Key())
			require.Len(t, r.Incidents, 1, r.Key())
		}
	}
	for k := range claimed { // claimed again, and at their threshold
		claimed[k] = claimedAs(t, s, "o-sweep", workflow.Ref{Index: 1, Item: k + 1}, t0.Add(2*time.Minute))
	}
	snap, err = s.Read(ctx, "o-sweep")
	require.NoError(t, err)
	o, w = snap.Order(), statestore.Write{Move: workflow.Move{Read: workflow.Read{Version: true}}, Now: t0.Add(3 * time.Minute),
		Due: t0.Add(4 * time.Minute)}
	for _, st := range claimed {
		mv := o.Fail(st.Ref, workflow.TimedOut, true, t0.Add(3*time.Minute))
		o, w.Move = o.After(mv), w.Move.Then(mv)
		w.Looks = append(w.Looks, statestore.Look{Ref: st.Ref, FailureCount: 3, Reason: reason})
	}
	after, err := s.Apply(ctx, snap, w)
	require.NoError(t, err, "a hundred give-ups, one write")
	require.Equal(t, workflow.Compensating, after.Task().State)
	require.Len(t, w.Move.Ready, 1, "one undo at a time")
	m.report(t, "a sweep of a hundred items")
}

// cancelsAHundredAccepted: a cancel of an order whose 100 async items its
// service accepted gives every attempt back in one write and starts the
// undoing.
func cancelsAHundredAccepted(t *testing.T, s *statestore.Store, m *measured) {
	ctx := context.Background()
	_, claimed := itemsClaimed(t, s, "o-async", true)
	for _, st := range claimed {
		require.NoError(t, s.Accept(ctx, st, t0.Add(time.Second)))
	}
	res, err := outcome.Canceller{Store: s}.Cancel(ctx, statestore.CancelRequest{OrderID: "o-async", By: "test",
		Reason: strings.Repeat("the customer asked; ", 20), Pickup: time.Minute, Now: t0.Add(2 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, workflow.CancelStops, res.Verdict, "accepted calls are not awaited")
	require.NotNil(t, res.Undo, "the undoing starts")
	_, recs, err := s.Load(ctx, "o-async")
	require.NoError(t, err)
	for _, r := range recs {
		if r.Index == 1 && !r.Undo {
			require.Equal(t, workflow.Pending, r.State, "%s given back", r.Key())
			require.True(t, r.Ran, "%s may have taken effect", r.Key())
		}
	}
	m.report(t, "a cancel of a hundred accepted items")
}

// heldGoesOnWithAHundredReady: a held order whose other branch finished
// during its hold makes that branch's next step's 100 items ready when its
// operator retries the held step.
func heldGoesOnWithAHundredReady(t *testing.T, s *statestore.Store, m *measured) {
	ctx := context.Background()
	d, n, order := items("o-held", false)
	d.Steps = append(d.Steps, workflow.Step{Action: workflow.Action{Name: "audit", Agent: "svc", Timeout: 10 * time.Second,
		MaxFailures: 1}, NoNeeds: true, HoldFor: time.Hour})
	_, err := s.Submit(ctx, statestore.Submission{OrderID: "o-held", Order: order, Workflow: d, Items: n, Now: t0})
	require.NoError(t, err)
	audit := workflow.Ref{Index: 3}
	auditing := claimedAs(t, s, "o-held", audit, t0)
	finish(t, s, d, claimedAs(t, s, "o-held", workflow.Ref{Index: 0}, t0), "", t0)
	var running []statestore.Step
	for k := 1; k <= n[1]; k++ {
		running = append(running, claimedAs(t, s, "o-held", workflow.Ref{Index: 1, Item: k}, t0))
	}
	r := finish(t, s, d, auditing, "refused", t0)
	require.Equal(t, workflow.Held, r.State)
	for _, st := range running { // the items' step ends while the order is held: nothing made ready yet
		r = finish(t, s, d, st, "", t0.Add(time.Second))
		require.Empty(t, r.Ready)
	}
	snap, err := s.Read(ctx, "o-held")
	require.NoError(t, err)
	mv, err := d.RetryHeld(snap.Order(), audit)
	require.NoError(t, err)
	require.Len(t, mv.Ready, n[2], "the next step's hundred items")
	after, err := s.Apply(ctx, snap, statestore.Write{Move: mv, Due: t0.Add(time.Hour), Now: t0.Add(time.Minute),
		Looks: []statestore.Look{{Ref: audit, ReadyAt: t0.Add(time.Minute), Due: t0.Add(2 * time.Minute), Retry: true,
			By: "the operator", Reason: "retried"}}})
	require.NoError(t, err, "one write")
	require.Equal(t, workflow.Pending, after.Task().State)
	claimedAs(t, s, "o-held", workflow.Ref{Index: 2, Item: n[2]}, t0.Add(time.Minute))
	m.report(t, "a held order going on with a hundred items ready")
}

// twoHundredReadyAtOnce: two steps per item (100 items each) both need the
// first step: its completion makes 200 records ready in one write (each
// record whole), and each runs.
func twoHundredReadyAtOnce(t *testing.T, s *statestore.Store, m *measured) {
	ctx := context.Background()
	d, n, order := items("o-two", false)
	d.Steps[2].Needs, d.Steps[2].Undo = []string{d.Steps[0].Name}, nil
	_, err := s.Submit(ctx, statestore.Submission{OrderID: "o-two", Order: order, Workflow: d, Items: n, Now: t0})
	require.NoError(t, err)
	r := finish(t, s, d, claimedAs(t, s, "o-two", workflow.Ref{Index: 0}, t0), "", t0)
	require.Len(t, r.Ready, n[1]+n[2], "both steps' items, one write")
	for _, ref := range []workflow.Ref{{Index: 1, Item: 1}, {Index: 2, Item: n[2]}} {
		finish(t, s, d, claimedAs(t, s, "o-two", ref, t0.Add(time.Second)), "", t0.Add(time.Second))
	}
	m.report(t, "two hundred records made ready at once")
}

// largestDefinition: a workflow's definition of MaxDefinitionBytes (its
// schema included) is kept in one item and read back whole for its orders.
func largestDefinition(t *testing.T, s *statestore.Store, _ *measured) {
	ctx := context.Background()
	d := def(2)
	d.Name, d.Version = "big", "v-big"
	schema := func(n int) json.RawMessage {
		return json.RawMessage(`{"type":"object","description":"` + strings.Repeat("x", n) + `"}`)
	}
	d.Schema = schema(0)
	empty, err := d.StoredBytes()
	require.NoError(t, err)
	d.Schema = schema(workflow.MaxDefinitionBytes - empty)
	n, err := d.StoredBytes()
	require.NoError(t, err)
	require.Equal(t, workflow.MaxDefinitionBytes, n)
	_, err = s.Submit(ctx, statestore.Submission{OrderID: "o-bigdef", Order: `{"orderId":"o-bigdef"}`, Workflow: d, Now: t0})
	require.NoError(t, err)
	back, err := s.Definition(ctx, "o-bigdef")
	require.NoError(t, err)
	require.JSONEq(t, string(d.Schema), string(back.Schema), "read back whole")
	d.Version = "v-bigge" // as long: one byte more of schema is one over
	d.Schema = schema(workflow.MaxDefinitionBytes - empty + 1)
	require.ErrorContains(t, s.PutDefinition(ctx, d), "at most", "never sent to DynamoDB")
}
