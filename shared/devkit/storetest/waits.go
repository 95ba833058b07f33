package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// waitsTests are the cases of what an order's records wait for.
var waitsTests = map[string]func(*testing.T, *statestore.Store){
	"ASpotSaysWhatItsRecordWaitsFor": spotsSayWhatTheyWaitFor,
}

// named is d under another name: each order of waitingOrders runs a
// workflow of its own.
func named(d workflow.Definition, name string) workflow.Definition {
	d.Name = name
	return d
}

// waitingOrders stores one order waiting for each thing a record may wait
// for, each of a workflow of its own, and returns what each one's record
// at work waits for (and its event), by order id: an armed wait for
// "approved", an armed timer, an async attempt claimed, an attempt its
// flow control gave back (its agent paused), a step ready for its claim,
// a step's call running.
func waitingOrders(t *testing.T, s *statestore.Store) map[string]statestore.Spot {
	t.Helper()
	ctx := context.Background()
	submitDef(t, s, "o-event", waiting())
	firstDone(t, s, "o-event", "")
	_, _, err := s.Arm(ctx, "o-event", step1, workflow.KindEvent, t0.Add(time.Hour), t0, "")
	require.NoError(t, err)
	submitDef(t, s, "o-timer", sleeping())
	firstDone(t, s, "o-timer", "")
	_, _, err = s.Arm(ctx, "o-timer", step1, workflow.KindTimer, t0.Add(2*time.Hour), t0, "")
	require.NoError(t, err)
	async := named(def(2), "async")
	async.Steps[0].Async = true
	submitDef(t, s, "o-async", async)
	_, err = s.Claim(ctx, statestore.Claim{OrderID: "o-async", Ref: step0, Agent: "svc", Owner: "a-1", Token: "n1", Now: t0})
	require.NoError(t, err)
	submit(t, s, "o-flow", 3)
	release(t, s, claimedAs(t, s, "o-flow", step0, t0), "agent svc is paused (by ops)", t0.Add(time.Second))
	submitDef(t, s, "o-ready", named(def(2), "ready"))
	submitDef(t, s, "o-running", named(def(2), "running"))
	claimed(t, s, "o-running", step0, t0)
	return map[string]statestore.Spot{
		"o-event":   {Waits: statestore.ForEvent, Event: "approved"},
		"o-timer":   {Waits: statestore.ForTimer},
		"o-async":   {Waits: statestore.ForCallback},
		"o-flow":    {Waits: statestore.ForFlow, Why: "agent svc is paused (by ops)"},
		"o-ready":   {Waits: statestore.ForWork},
		"o-running": {Waits: statestore.ForWork},
	}
}

// An order's spots (Task.At, what a listing and the health read) say what
// each record in flight waits for, from what the record keeps: an event
// (named), a timer, a callback, its flow control (why), or nothing but its
// work; the record read alone (Step.WaitsFor) says the same.
func spotsSayWhatTheyWaitFor(t *testing.T, s *statestore.Store) {
	ctx := context.Background()
	want := waitingOrders(t, s)
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	tasks, err := s.Tasks(ctx, ids)
	require.NoError(t, err)
	for id, w := range want {
		at := tasks[id].At
		require.Len(t, at, 1, "%s is at one record", id)
		require.Equal(t, w.Waits, at[0].Waits, id)
		require.Equal(t, w.Event, at[0].Event, id)
		if w.Why != "" {
			require.Equal(t, w.Why, at[0].Why, id)
		}
		_, recs, err := s.Load(ctx, id)
		require.NoError(t, err)
		var waits []statestore.WaitsFor
		for _, r := range recs {
			if r.Name == at[0].Step && r.Undo == at[0].Undo {
				waits = append(waits, r.WaitsFor())
			}
		}
		require.Equal(t, []statestore.WaitsFor{w.Waits}, waits, "%s's record read alone", id)
	}
	got, _, err := s.InFlight(ctx, 10, "")
	require.NoError(t, err)
	require.Len(t, got, len(want), "the index lists each, with its spots")
	for _, task := range got {
		require.Equal(t, want[task.OrderID].Waits, task.At[0].Waits, task.OrderID)
	}
}
