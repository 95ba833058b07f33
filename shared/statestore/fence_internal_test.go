package statestore

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/workflow"
)

// fencedBefore is the fence's Go predicate as it was written beside its
// condition, before both came from its checks: the rules it must keep. It
// had drifted from its condition in one case: a fence of attempt 0 on a
// record never claimed (no k stored) held here, while DynamoDB refused its
// write (k = 0 does not hold on an attribute that is not there). The
// checks decide as DynamoDB does.
func fencedBefore(f Fence, it stateItem, now time.Time) bool {
	r, ok := it.Recs[sortKey(f.Ref)]
	if !ok {
		return false
	}
	if f.Parked != "" {
		ev := it.Events[f.Event]
		return it.State == string(workflow.Pending) && r.State == string(workflow.Pending) && r.DueAt != 0 &&
			r.Kind == string(f.Parked) && (!f.Due || r.Woken != 0 || r.DueAt <= ms(now)) &&
			(f.Event == "" || ev == "" || ev == f.EventID) &&
			(f.Event == "" || f.Due || r.Armed == 0 || r.DueAt > ms(now) || r.Woken != 0)
	}
	return r.Attempt == f.Attempt && r.Attempt != 0 && r.Round == max(f.Round, 1) && (f.Token == "" || r.Token == f.Token) &&
		(r.State == string(workflow.Processing) || (r.State == string(workflow.Pending) && r.DueAt != 0))
}

// A fence holds on an order exactly where it did (fencedBefore), for
// records, orders and fences drawn at random around the edges that matter:
// its attempt, round and token, its record's state and deadline, a parked
// record's kind, arming and waking, the event received.
func TestAFenceHoldsWhereItDid(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(10_000)
	rng := rand.New(rand.NewPCG(7, 49))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	at := func() int64 { return []int64{0, 9_999, 10_000, 10_001}[rng.IntN(4)] }
	ref := workflow.Ref{Index: 1}
	for i := range 20_000 {
		r := recItem{State: pick("Pending", "Processing", "Processed", "Error"), Round: 1 + rng.IntN(2), Attempt: rng.IntN(3),
			Token: pick("", "n1", "n2"), DueAt: at(), Kind: pick("", "event", "timer"), Armed: at(), Woken: at()}
		it := stateItem{State: pick("Pending", "Compensating", "Held"), Recs: map[string]recItem{sortKey(ref): r}}
		if rng.IntN(2) == 0 {
			it.Events = map[string]string{"approved": pick("e-1", "e-2")}
		}
		f := Fence{Ref: ref, Attempt: rng.IntN(3), Round: rng.IntN(3), Token: pick("", "n1")}
		if rng.IntN(2) == 0 {
			f = Fence{Ref: ref, Parked: workflow.Kind(pick("event", "timer")), Due: rng.IntN(2) == 0}
			if rng.IntN(2) == 0 {
				f.Event, f.EventID = "approved", pick("e-1", "e-2")
			}
		}
		if rng.IntN(20) == 0 {
			f.Ref = workflow.Ref{Index: 2} // no such record
		}
		require.Equal(t, fencedBefore(f, it, now), f.holds(it, now), "case %d: %+v on %+v (order %s, events %v)", i, f, r,
			it.State, it.Events)
	}
}
