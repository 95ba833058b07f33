package keyline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/topology"
	"github.com/sas-go/sas/shared/workflow"
)

var engines = map[string]emulatortest.Engine{}

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithEngines(m, engines)) }

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

// table is a test's state table, to look at a key's item as stored.
type table struct {
	db   *dynamodb.Client
	name string
}

// item is agent's key's item as stored (nil if there is none).
func (tb table) item(t *testing.T, agent, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := tb.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &tb.name, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			topology.KeyOrderID: &types.AttributeValueMemberS{Value: "~agent/" + agent},
			topology.KeySort:    &types.AttributeValueMemberS{Value: "key/" + key}}})
	require.NoError(t, err)
	return out.Item
}

// expires is the item's time to live.
func (tb table) expires(t *testing.T, agent, key string) time.Time {
	t.Helper()
	var sec int64
	require.NoError(t, attributevalue.Unmarshal(tb.item(t, agent, key)[topology.KeyExpires], &sec))
	return time.Unix(sec, 0).UTC()
}

// each runs fn on a fresh state table of every engine.
func each(t *testing.T, fn func(t *testing.T, s keyline.Store)) {
	eachTable(t, func(t *testing.T, s keyline.Store, _ table) { fn(t, s) })
}

// eachTable runs fn on a fresh state table of every engine.
func eachTable(t *testing.T, fn func(t *testing.T, s keyline.Store, tb table)) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topo := storetest.NewTables(t, e.Clients.DynamoDB)
			fn(t, keyline.NewStore(e.Clients.DynamoDB, topo.StateTable()), table{e.Clients.DynamoDB, topo.StateTable()})
		})
	}
}

// call is a waiter of the tests: order o-i's first step, round 1.
func call(i int) string { return keyline.WaiterID(fmt.Sprintf("o-%d", i), workflow.Ref{}, 1) }

// attempt is call i's attempt a.
func attempt(i, a int) string { return keyline.Holder(fmt.Sprintf("o-%d", i), workflow.Ref{}, 1, a) }

func waiter(id string) keyline.Waiter {
	return keyline.Waiter{ID: id, Request: json.RawMessage(`{"orderId":"` + strings.Split(id, "/")[0] + `","step":0}`)}
}

func ids(ws []keyline.Waiter) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

// A key's slots: at most the limit held at once, a holder holds its own
// again, a slot let go is free at once, and a hold whose time passed (an
// Agent that crashed) is removed by the next call that finds the key full.
func TestAKeysSlotsAreHeldUpToTheLimitAndNeverLeak(t *testing.T) {
	each(t, func(t *testing.T, s keyline.Store) {
		ctx := context.Background()
		end := t0.Add(10 * time.Second)
		for _, h := range []string{"o-1/0#1", "o-2/0#1"} {
			got, err := s.Hold(ctx, "payment", "c-1", 2, h, end, t0)
			require.NoError(t, err)
			require.True(t, got.Held, h)
		}
		got, err := s.Hold(ctx, "payment", "c-1", 2, "o-3/0#1", end.Add(time.Second), t0)
		require.NoError(t, err)
		require.False(t, got.Held, "the key is full")
		require.Equal(t, 2, got.Holders)
		require.True(t, got.Next.Equal(end), "a slot is free by the first hold's end: %s", got.Next)
		require.Zero(t, got.Position, "not in line")
		got, err = s.Hold(ctx, "payment", "c-1", 2, "o-1/0#1", end, t0)
		require.NoError(t, err)
		require.True(t, got.Held, "a holder holds its own slot still")
		got, err = s.Hold(ctx, "payment", "c-2", 2, "o-3/0#1", end, t0)
		require.NoError(t, err)
		require.True(t, got.Held, "another key's slots are its own")
		got, err = s.Hold(ctx, "inventory", "c-1", 1, "o-3/1#1", end, t0)
		require.NoError(t, err)
		require.True(t, got.Held, "another agent's keys are its own")

		handed, err := s.Release(ctx, "payment", "c-1", "o-1/0#1", t0)
		require.NoError(t, err)
		require.Empty(t, handed, "no one waits")
		_, err = s.Release(ctx, "payment", "c-1", "o-1/0#1", t0)
		require.NoError(t, err, "let go twice: nothing more")
		got, err = s.Hold(ctx, "payment", "c-1", 2, "o-3/0#1", end, t0)
		require.NoError(t, err)
		require.True(t, got.Held, "a slot let go is free at once")

		// o-2 and o-3 crash: their holds end at end; after it, the key's
		// slots are free again whatever they never let go.
		got, err = s.Hold(ctx, "payment", "c-1", 2, "o-4/0#1", end.Add(time.Minute), end.Add(-time.Millisecond))
		require.NoError(t, err)
		require.False(t, got.Held)
		for _, h := range []string{"o-4/0#1", "o-5/0#1"} {
			got, err = s.Hold(ctx, "payment", "c-1", 2, h, end.Add(time.Minute), end)
			require.NoError(t, err)
			require.True(t, got.Held, "%s: the crashed holds ended", h)
		}
		holders, err := s.Holders(ctx, "payment", "c-1")
		require.NoError(t, err)
		require.Len(t, holders, 2)
		require.Contains(t, holders, "o-4/0#1")
		require.Contains(t, holders, "o-5/0#1")

		long := strings.Repeat("k", keyname.MaxKeyBytes+1)
		got, err = s.Hold(ctx, "payment", long, 1, "o-6/0#1", end, t0)
		require.NoError(t, err)
		require.True(t, got.Held, "a long key is kept as its hash")
		got, err = s.Hold(ctx, "payment", long, 1, "o-7/0#1", end, t0)
		require.NoError(t, err)
		require.False(t, got.Held)
		short := keyname.ShortKey(long)
		require.Len(t, short, len("sha256:")+64, "what the Agent keeps, shows and logs")
		require.Equal(t, short, keyname.ShortKey(long))
		require.NotEqual(t, short, keyname.ShortKey(long+"k"))
		require.Equal(t, "c-1", keyname.ShortKey("c-1"), "a key up to MaxKeyBytes is its value")
		got, err = s.Hold(ctx, "payment", short, 1, "o-7/0#1", end, t0)
		require.NoError(t, err)
		require.True(t, got.Held, "a short key is a key as any other, of an item of its own")
		keys, err := s.Keys(ctx, "payment", 10, t0)
		require.NoError(t, err)
		require.True(t, slices.ContainsFunc(keys.Keys, func(k keyline.KeyInUse) bool { return k.Key == short && !k.Hashed }),
			"shown whole: %+v", keys.Keys)
	})
}

// Many holders race for a key's slots, over and over, each letting its
// slot go at once or crashing (its hold ends by itself): at no moment do
// more than the limit hold one, counted by the holders themselves; no
// racer is told the key is full unless it saw every slot held; in every
// round every free slot is taken (the crashed holds of the round before
// have ended: whoever removes them, the others see the slots free); and
// losing races is never an error.
func TestRacingHoldersNeverExceedAKeysLimit(t *testing.T) {
	eachTable(t, func(t *testing.T, _ keyline.Store, tb table) {
		ctx := context.Background()
		const racers, limit, rounds = 16, 3, 12
		db := &countingDB{DB: tb.db}
		s := keyline.NewStore(db, tb.name)
		now := t0
		for round := range rounds {
			var inside, most, held atomic.Int32
			var wg sync.WaitGroup
			for i := range racers {
				wg.Go(func() {
					holder := fmt.Sprintf("o-%d/0#%d", i, round)
					got, err := s.Hold(ctx, "payment", "c-1", limit, holder, now.Add(time.Second), now)
					if err != nil {
						t.Error(err)
						return
					}
					if !got.Held {
						if got.Holders < limit {
							t.Errorf("round %d: %s told the key is full with %d holder(s)", round, holder, got.Holders)
						}
						return
					}
					held.Add(1)
					n := inside.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if i%2 == 0 { // the odd ones crash: their holds end at now+1s
						if _, err := s.Release(ctx, "payment", "c-1", holder, now); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			require.LessOrEqual(t, int(most.Load()), limit, "round %d", round)
			require.GreaterOrEqual(t, int(held.Load()), limit, "round %d: every free slot is taken", round)
			now = now.Add(2 * time.Second) // the crashed holds have ended
			holders, err := s.Holders(ctx, "payment", "c-1")
			require.NoError(t, err)
			require.LessOrEqual(t, len(holders), limit, "round %d", round)
		}
		require.LessOrEqual(t, int(db.reads.Load()), racers+rounds,
			"decided on what the failed writes found, not on reads (but the first, of no item, and the test's own)")
	})
}

// countingDB counts the reads made through it.
type countingDB struct {
	keyline.DB
	reads atomic.Int32
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.reads.Add(1)
	return c.DB.GetItem(ctx, in, opts...)
}

// A key's item lives a day past its latest hold: a later, shorter hold (or
// a wait, a let, a hold that takes an ended one's slot) never moves its
// time to live earlier, so DynamoDB never deletes a live holder's slot.
func TestAKeysTimeToLiveNeverMovesEarlier(t *testing.T) {
	eachTable(t, func(t *testing.T, s keyline.Store, tb table) {
		ctx := context.Background()
		long := t0.Add(10 * time.Hour)
		got, err := s.Hold(ctx, "payment", "c-1", 2, attempt(1, 1), long, t0)
		require.NoError(t, err)
		require.True(t, got.Held)
		exp := tb.expires(t, "payment", "c-1")
		require.False(t, exp.Before(long.Add(24*time.Hour)), "a day past the hold: %s", exp)
		require.Less(t, exp.Sub(long.Add(24*time.Hour)), time.Hour, "rounded up to the hour at most")

		got, err = s.Hold(ctx, "payment", "c-1", 2, attempt(2, 1), t0.Add(time.Minute), t0)
		require.NoError(t, err)
		require.True(t, got.Held)
		require.Equal(t, exp, tb.expires(t, "payment", "c-1"), "a shorter hold leaves it")
		p, err := s.Wait(ctx, "payment", "c-1", 2, waiter(call(3)), t0)
		require.NoError(t, err)
		require.Equal(t, 1, p.Position)
		require.Equal(t, exp, tb.expires(t, "payment", "c-1"), "a wait leaves it")
		handed, err := s.Release(ctx, "payment", "c-1", attempt(2, 1), t0)
		require.NoError(t, err)
		require.Equal(t, []string{call(3)}, ids(handed))
		require.Equal(t, exp, tb.expires(t, "payment", "c-1"), "a reservation leaves it")
		got, err = s.Hold(ctx, "payment", "c-1", 2, attempt(3, 2), t0.Add(2*time.Minute), t0)
		require.NoError(t, err)
		require.True(t, got.Held, "its reservation")
		require.Equal(t, exp, tb.expires(t, "payment", "c-1"), "taking a reservation leaves it")
		// Call 3's hold ends; a short one takes its slot (the write that
		// decides on the item, not the blind one).
		after := t0.Add(3 * time.Minute)
		got, err = s.Hold(ctx, "payment", "c-1", 2, attempt(4, 1), after.Add(time.Minute), after)
		require.NoError(t, err)
		require.True(t, got.Held)
		got, err = s.Hold(ctx, "payment", "c-1", 2, attempt(5, 1), after.Add(time.Minute), after)
		require.NoError(t, err)
		require.False(t, got.Held)
		require.Equal(t, exp, tb.expires(t, "payment", "c-1"), "a hold in an ended one's slot leaves it")

		later := t0.Add(30 * time.Hour)
		_, err = s.Release(ctx, "payment", "c-1", attempt(4, 1), after)
		require.NoError(t, err)
		got, err = s.Hold(ctx, "payment", "c-1", 2, attempt(7, 1), later, after)
		require.NoError(t, err)
		require.True(t, got.Held)
		require.False(t, tb.expires(t, "payment", "c-1").Before(later.Add(24*time.Hour)), "a longer hold moves it later")
	})
}

// A full key's line: first come, first served. Each slot let go is handed
// to the first in line, reserved for it (Let returns it, to send its
// request); any attempt of that call takes it, and no one else: a newcomer
// waits while anyone is in line. Waiting again keeps one's place.
func TestALetHandsItsSlotToTheFirstInLine(t *testing.T) {
	eachTable(t, func(t *testing.T, s keyline.Store, tb table) {
		ctx := context.Background()
		const limit, waiters = 2, 30
		end := t0.Add(time.Hour)
		for i := range limit {
			got, err := s.Hold(ctx, "payment", "c-1", limit, attempt(i, 1), end, t0)
			require.NoError(t, err)
			require.True(t, got.Held)
		}
		for i := limit; i < limit+waiters; i++ {
			got, err := s.Hold(ctx, "payment", "c-1", limit, attempt(i, 1), end, t0)
			require.NoError(t, err)
			require.False(t, got.Held)
			p, err := s.Wait(ctx, "payment", "c-1", limit, waiter(call(i)), t0.Add(time.Duration(i)*time.Millisecond))
			require.NoError(t, err)
			require.Equal(t, keyline.Place{Position: i - limit + 1, Next: end}, p, "call %d", i)
		}
		p, err := s.Wait(ctx, "payment", "c-1", limit, waiter(call(limit+4)), t0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, 5, p.Position, "waiting again keeps one's place")
		k, err := s.Key(ctx, "payment", "c-1")
		require.NoError(t, err)
		require.Len(t, k.Waiters, waiters)
		require.Equal(t, limit, k.Limit)
		require.Equal(t, 5, k.Position(call(limit+4)))
		require.Equal(t, waiter(call(limit+4)).Request, k.Waiters[4].Request)
		require.Equal(t, t0.Add(time.Duration(limit+4)*time.Millisecond), k.Waiters[4].Since, "when it joined first")
		got, err := s.Hold(ctx, "payment", "c-1", limit, attempt(limit+4, 2), end, t0)
		require.NoError(t, err)
		require.False(t, got.Held, "not its turn")
		require.Equal(t, 5, got.Position)

		var order []string
		holding := []string{attempt(0, 1), attempt(1, 1)}
		for len(order) < waiters {
			let := holding[0]
			holding = holding[1:]
			handed, err := s.Release(ctx, "payment", "c-1", let, t0)
			require.NoError(t, err)
			require.Len(t, handed, 1, "after %d", len(order))
			w := handed[0]
			require.Equal(t, waiter(w.ID).Request, w.Request, "its request, to send")
			got, err := s.Hold(ctx, "payment", "c-1", limit, "o-new/0#1", end, t0)
			require.NoError(t, err)
			require.False(t, got.Held, "a newcomer takes no slot handed on")
			k, err := s.Key(ctx, "payment", "c-1")
			require.NoError(t, err)
			require.Contains(t, k.Reserved, w.ID)
			p, err := s.Wait(ctx, "payment", "c-1", limit, w, t0)
			require.NoError(t, err)
			require.True(t, p.Reserved, "waiting again: its slot is kept")
			var i int
			_, err = fmt.Sscanf(w.ID, "o-%d/", &i)
			require.NoError(t, err)
			got, err = s.Hold(ctx, "payment", "c-1", limit, attempt(i, 2), end, t0)
			require.NoError(t, err)
			require.True(t, got.Held, "its next attempt takes it")
			order = append(order, w.ID)
			holding = append(holding, attempt(i, 2))
		}
		var want []string
		for i := limit; i < limit+waiters; i++ {
			want = append(want, call(i))
		}
		require.Equal(t, want, order, "first come, first served")
		k, err = s.Key(ctx, "payment", "c-1")
		require.NoError(t, err)
		require.Empty(t, k.Waiters)
		require.Empty(t, k.Reserved)
		require.Len(t, k.Holders, limit)

		for _, h := range holding {
			handed, err := s.Release(ctx, "payment", "c-1", h, t0)
			require.NoError(t, err)
			require.Empty(t, handed)
		}
		got, err = s.Hold(ctx, "payment", "c-1", limit, "o-new/0#1", end, t0)
		require.NoError(t, err)
		require.True(t, got.Held, "no one in line: a newcomer holds at once")
		require.NotEmpty(t, tb.item(t, "payment", "c-1"))
	})
}

// A slot handed to a waiter whose request is lost lapses after ReserveFor:
// the next call to come (here the next in line, at its fallback poll) hands
// it on; the waiter that lost it is out of line. A hold that ended (its
// Agent crashed) is handed on the same way, to the first in line, and a
// newcomer that freed it is told whom to send it to.
func TestAReservationNotTakenGoesToTheNextInLine(t *testing.T) {
	eachTable(t, func(t *testing.T, s keyline.Store, _ table) {
		ctx := context.Background()
		end := t0.Add(time.Hour)
		got, err := s.Hold(ctx, "payment", "c-1", 1, attempt(0, 1), end, t0)
		require.NoError(t, err)
		require.True(t, got.Held)
		for i := 1; i <= 3; i++ {
			p, err := s.Wait(ctx, "payment", "c-1", 1, waiter(call(i)), t0)
			require.NoError(t, err)
			require.Equal(t, i, p.Position)
		}
		handed, err := s.Release(ctx, "payment", "c-1", attempt(0, 1), t0)
		require.NoError(t, err)
		require.Equal(t, []string{call(1)}, ids(handed))

		// call 1's request is lost. call 2's fallback poll before the
		// reservation lapses: not yet; after: its turn.
		got, err = s.Hold(ctx, "payment", "c-1", 1, attempt(2, 2), end, t0.Add(time.Minute))
		require.NoError(t, err)
		require.False(t, got.Held)
		require.Equal(t, keyline.Hold{Holders: 1, Next: t0.Add(keyline.ReserveFor), Position: 1}, got)
		lapsed := t0.Add(keyline.ReserveFor)
		got, err = s.Hold(ctx, "payment", "c-1", 1, attempt(2, 2), end, lapsed)
		require.NoError(t, err)
		require.True(t, got.Held, "the lapsed reservation went to the first in line")
		got, err = s.Hold(ctx, "payment", "c-1", 1, attempt(1, 2), end, lapsed)
		require.NoError(t, err)
		require.False(t, got.Held)
		require.Zero(t, got.Position, "call 1 lost its place")

		// call 2's Agent crashes: its hold ends at end; a newcomer then
		// finds it ended, hands its slot to call 3 and waits itself.
		got, err = s.Hold(ctx, "payment", "c-1", 1, attempt(9, 1), end.Add(time.Hour), end)
		require.NoError(t, err)
		require.False(t, got.Held)
		require.Equal(t, []string{call(3)}, ids(got.Handed), "send call 3's request")
		got, err = s.Hold(ctx, "payment", "c-1", 1, attempt(3, 2), end.Add(time.Hour), end)
		require.NoError(t, err)
		require.True(t, got.Held)
		k, err := s.Key(ctx, "payment", "c-1")
		require.NoError(t, err)
		require.Equal(t, map[string]time.Time{attempt(3, 2): end.Add(time.Hour)}, k.Holders)
		require.Empty(t, k.Reserved)
		require.Empty(t, k.Waiters)
	})
}

// Letting go a slot one does not hold, or leaving a line one is not in,
// writes nothing. Leaving takes a waiter out of line; leaving with a slot
// reserved hands it to the next. A wait that finds a slot free (let go
// since its Hold) has it reserved; a line that is full takes no one.
func TestLeavingAndStrangersToAKey(t *testing.T) {
	eachTable(t, func(t *testing.T, s keyline.Store, tb table) {
		ctx := context.Background()
		end := t0.Add(time.Hour)
		handed, err := s.Release(ctx, "payment", "c-1", attempt(0, 1), t0)
		require.NoError(t, err)
		require.Empty(t, handed)
		require.Nil(t, tb.item(t, "payment", "c-1"), "no item made")
		_, err = s.Hold(ctx, "payment", "c-1", 1, attempt(0, 1), end, t0)
		require.NoError(t, err)
		for i := 1; i <= 4; i++ {
			_, err := s.Wait(ctx, "payment", "c-1", 1, waiter(call(i)), t0)
			require.NoError(t, err)
		}
		before := tb.item(t, "payment", "c-1")
		handed, err = s.Release(ctx, "payment", "c-1", attempt(7, 1), t0)
		require.NoError(t, err)
		require.Empty(t, handed)
		handed, err = s.Release(ctx, "payment", "c-1", call(1), t0)
		require.NoError(t, err)
		require.Empty(t, handed, "a waiter is no holder")
		handed, err = s.Leave(ctx, "payment", "c-1", call(7), t0)
		require.NoError(t, err)
		require.Empty(t, handed)
		require.Equal(t, before, tb.item(t, "payment", "c-1"), "nothing written")

		handed, err = s.Leave(ctx, "payment", "c-1", call(2), t0)
		require.NoError(t, err)
		require.Empty(t, handed)
		k, err := s.Key(ctx, "payment", "c-1")
		require.NoError(t, err)
		require.Equal(t, []string{call(1), call(3), call(4)}, ids(k.Waiters))
		handed, err = s.Release(ctx, "payment", "c-1", attempt(0, 1), t0)
		require.NoError(t, err)
		require.Equal(t, []string{call(1)}, ids(handed))
		handed, err = s.Leave(ctx, "payment", "c-1", call(1), t0)
		require.NoError(t, err)
		require.Equal(t, []string{call(3)}, ids(handed), "its reservation goes to the next")
		k, err = s.Key(ctx, "payment", "c-1")
		require.NoError(t, err)
		require.Equal(t, []string{call(4)}, ids(k.Waiters))
		require.Equal(t, map[string]time.Time{call(3): t0.Add(keyline.ReserveFor)}, k.Reserved)

		// A wait that finds a slot free: its Hold found the key full, then
		// the slot was let go (no one in line) before it joined.
		_, err = s.Hold(ctx, "payment", "c-2", 1, attempt(0, 1), end, t0)
		require.NoError(t, err)
		got, err := s.Hold(ctx, "payment", "c-2", 1, attempt(1, 1), end, t0)
		require.NoError(t, err)
		require.False(t, got.Held)
		handed, err = s.Release(ctx, "payment", "c-2", attempt(0, 1), t0)
		require.NoError(t, err)
		require.Empty(t, handed)
		p, err := s.Wait(ctx, "payment", "c-2", 1, waiter(call(1)), t0)
		require.NoError(t, err)
		require.Equal(t, keyline.Place{Reserved: true}, p, "its Hold takes it now")
		got, err = s.Hold(ctx, "payment", "c-2", 1, attempt(1, 2), end, t0)
		require.NoError(t, err)
		require.True(t, got.Held)
		p, err = s.Wait(ctx, "payment", "c-3", 1, waiter(call(1)), t0)
		require.NoError(t, err)
		require.True(t, p.Reserved, "a key with no item yet has a slot free")

		_, err = s.Wait(ctx, "payment", "c-2", 1, keyline.Waiter{ID: call(5), Request: json.RawMessage(`"` +
			strings.Repeat("x", keyline.MaxWaiterRequestBytes) + `"`)}, t0)
		require.ErrorIs(t, err, keyline.ErrWaiterTooLarge)
	})
}

// Many holds end at once (their Agents crashed): the first call to come
// after, here a let, hands every slot on, in turn, over as many writes as
// it takes (each changes at most a few dozen entries).
func TestManyEndedHoldsAreAllHandedOn(t *testing.T) {
	eachTable(t, func(t *testing.T, s keyline.Store, _ table) {
		ctx := context.Background()
		const limit = 40
		end := t0.Add(time.Minute)
		for i := range limit {
			got, err := s.Hold(ctx, "payment", "c-1", limit, attempt(i, 1), end, t0)
			require.NoError(t, err)
			require.True(t, got.Held)
		}
		var want []string
		for i := limit; i < 2*limit+5; i++ {
			p, err := s.Wait(ctx, "payment", "c-1", limit, waiter(call(i)), t0)
			require.NoError(t, err)
			require.Equal(t, i-limit+1, p.Position)
			want = append(want, call(i))
		}
		handed, err := s.Release(ctx, "payment", "c-1", attempt(0, 1), end)
		require.NoError(t, err)
		require.Equal(t, want[:limit], ids(handed), "every slot, first come first served")
		k, err := s.Key(ctx, "payment", "c-1")
		require.NoError(t, err)
		require.Empty(t, k.Holders)
		require.Len(t, k.Reserved, limit)
		require.Equal(t, want[limit:], ids(k.Waiters))
	})
}

// An item written before the line existed (Holders and N only) takes
// waiters all the same.
func TestAKeyWrittenBeforeTheLineTakesWaiters(t *testing.T) {
	eachTable(t, func(t *testing.T, s keyline.Store, tb table) {
		ctx := context.Background()
		end := t0.Add(time.Hour)
		_, err := tb.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tb.name, Item: map[string]types.AttributeValue{
			topology.KeyOrderID: &types.AttributeValueMemberS{Value: "~agent/payment"},
			topology.KeySort:    &types.AttributeValueMemberS{Value: "key/c-1"},
			"Holders": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				attempt(0, 1): &types.AttributeValueMemberN{Value: fmt.Sprint(end.UnixMilli())}}},
			"N":                 &types.AttributeValueMemberN{Value: "1"},
			topology.KeyExpires: &types.AttributeValueMemberN{Value: fmt.Sprint(end.Add(24 * time.Hour).Unix())}}})
		require.NoError(t, err)
		got, err := s.Hold(ctx, "payment", "c-1", 1, attempt(1, 1), end, t0)
		require.NoError(t, err)
		require.False(t, got.Held)
		p, err := s.Wait(ctx, "payment", "c-1", 1, waiter(call(1)), t0)
		require.NoError(t, err)
		require.Equal(t, 1, p.Position)
		handed, err := s.Release(ctx, "payment", "c-1", attempt(0, 1), t0)
		require.NoError(t, err)
		require.Equal(t, []string{call(1)}, ids(handed))
	})
}

// itemBytes is an item's size as DynamoDB counts it: each attribute's name
// and value; a number about half its digits; a map or a list 3 bytes and 1
// an element more.
func itemBytes(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueBytes(v)
	}
	return n
}

func valueBytes(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(strings.TrimLeft(v.Value, "-0"))+1)/2 + 1
	case *types.AttributeValueMemberM:
		return 3 + itemBytes(v.Value) + len(v.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += valueBytes(e) + 1
		}
		return n
	default:
		return 1
	}
}

// At its bounds (the most holders a key may have, with the longest names,
// and a full line of the largest waiters) a key's item stays well under
// DynamoDB's 400 KB; a waiter more is not queued (it polls) and nothing
// fails. (The holders are written at once, as an item from before the line
// existed: a thousand Holds would take the emulators half a minute.)
func TestAFullLineKeepsTheItemWellUnder400KB(t *testing.T) {
	eachTable(t, func(t *testing.T, s keyline.Store, tb table) {
		ctx := context.Background()
		end := t0.Add(time.Hour)
		order := func(i int) string { return fmt.Sprintf("%s%04d", strings.Repeat("o", 60), i) } // 64, the longest
		ref := workflow.Ref{Index: 99, Undo: true, Item: 9999}
		holders := map[string]types.AttributeValue{}
		for i := range workflow.MaxInFlightPerKey - 1 {
			holders[keyline.Holder(order(i), ref, 99, 99)] = &types.AttributeValueMemberN{Value: fmt.Sprint(end.UnixMilli())}
		}
		_, err := tb.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &tb.name, Item: map[string]types.AttributeValue{
			topology.KeyOrderID: &types.AttributeValueMemberS{Value: "~agent/payment"},
			topology.KeySort:    &types.AttributeValueMemberS{Value: "key/c-1"},
			"Holders":           &types.AttributeValueMemberM{Value: holders},
			"N":                 &types.AttributeValueMemberN{Value: fmt.Sprint(len(holders))},
			topology.KeyExpires: &types.AttributeValueMemberN{Value: fmt.Sprint(end.Add(24 * time.Hour).Unix())}}})
		require.NoError(t, err)
		last := keyline.Holder(order(workflow.MaxInFlightPerKey-1), ref, 99, 99)
		got, err := s.Hold(ctx, "payment", "c-1", workflow.MaxInFlightPerKey, last, end, t0)
		require.NoError(t, err)
		require.True(t, got.Held, "the last slot")

		id := func(i int) string { return keyline.WaiterID(order(i), ref, 99) + strings.Repeat("w", 40) }
		request := json.RawMessage(`"` + strings.Repeat("r", keyline.MaxWaiterRequestBytes-2) + `"`)
		queued := 0
		for i := range keyline.MaxWaiters + 1 {
			p, err := s.Wait(ctx, "payment", "c-1", workflow.MaxInFlightPerKey, keyline.Waiter{ID: id(i), Request: request}, t0)
			require.NoError(t, err)
			if p.Position == 0 {
				require.False(t, p.Reserved)
				break
			}
			queued++
			require.Equal(t, queued, p.Position)
		}
		size := itemBytes(tb.item(t, "payment", "c-1"))
		t.Logf("%d holders, %d waiters queued: the item is %d bytes", workflow.MaxInFlightPerKey, queued, size)
		largest := len(id(0)) + keyline.MaxWaiterRequestBytes + 32 // a waiter's bytes in line (waiting.bytes)
		require.GreaterOrEqual(t, queued, keyline.MaxLineBytes/largest, "as many of the largest waiters as the line's bytes take")
		require.Less(t, size, 340_000, "well under 400 KB")
		handed, err := s.Release(ctx, "payment", "c-1", last, t0)
		require.NoError(t, err)
		require.Equal(t, []string{id(0)}, ids(handed), "a full item still hands on")
	})
}

// Calls race for a key's few slots as Agents would, in real time: each
// Holds; one that finds the key full Waits and comes back when a holder
// that lets go hands it a slot (sending its request), or at its fallback
// poll; some crash holding (their holds end by themselves, soon), some
// are cancelled while they wait (they leave the line). At no
// moment do more than the limit call at once; whenever someone is in line,
// every slot is held or reserved (none left free while a call waits); every
// call is made, and the line ends empty.
func TestRacingHoldersAndWaitersKeepEverySlotBusy(t *testing.T) {
	eachTable(t, func(t *testing.T, s keyline.Store, _ table) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		const callers, calls, limit = 12, 4, 3
		wake := map[string]chan struct{}{}
		for i := range callers * calls {
			wake[call(i)] = make(chan struct{}, 4)
		}
		send := func(ws []keyline.Waiter) { // the request of each waiter handed a slot
			for _, w := range ws {
				select {
				case wake[w.ID] <- struct{}{}:
				default:
				}
			}
		}
		var inside, most, handoffs, polls, idle atomic.Int32

		watched := make(chan struct{})
		go func() { // a slot free while someone waits: never, in any state read
			defer close(watched)
			for ctx.Err() == nil {
				k, err := s.Key(ctx, "payment", "c-1")
				if err == nil && len(k.Waiters) > 0 && len(k.Holders)+len(k.Reserved) < limit {
					idle.Add(1)
					t.Logf("a slot free while calls wait: holders %v, reserved %v, in line %v", k.Holders, k.Reserved, ids(k.Waiters))
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				for j := range calls {
					i := c*calls + j
					if err := makeCall(ctx, s, i, limit, wake[call(i)], send, &inside, &most, &handoffs, &polls); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		cancel()
		<-watched
		t.Logf("%d calls: %d handed a slot, %d fallback polls", callers*calls, handoffs.Load(), polls.Load())
		require.LessOrEqual(t, int(most.Load()), limit)
		require.Zero(t, idle.Load(), "states with a slot free while a call waits")
		require.Positive(t, handoffs.Load())
		k, err := s.Key(context.Background(), "payment", "c-1")
		require.NoError(t, err)
		require.Empty(t, k.Waiters)
		require.Empty(t, k.Reserved)
	})
}

// makeCall is call i as an Agent makes it: Hold, else Wait and come back
// handed a slot (woken) or at the fallback poll; one in five crashes
// holding (its hold ends 200 ms on); the others let go, sending the
// requests of the waiters the slot goes to. One in seven is cancelled as
// soon as it waits: it leaves the line (a slot reserved for it meanwhile
// goes to the next).
func makeCall(ctx context.Context, s keyline.Store, i, limit int, woken <-chan struct{}, send func([]keyline.Waiter),
	inside, most, handoffs, polls *atomic.Int32) error {
	crash, cancelled := i%5 == 0, i%7 == 3
	for a := 1; ; a++ {
		now := time.Now()
		until := now.Add(time.Minute)
		if crash {
			until = now.Add(200 * time.Millisecond)
		}
		got, err := s.Hold(ctx, "payment", "c-1", limit, attempt(i, a), until, now)
		if err != nil {
			return err
		}
		send(got.Handed)
		if got.Held {
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(2 * time.Millisecond)
			inside.Add(-1)
			if crash {
				return nil
			}
			handed, err := s.Release(ctx, "payment", "c-1", attempt(i, a), time.Now())
			send(handed)
			return err
		}
		p, err := s.Wait(ctx, "payment", "c-1", limit, waiter(call(i)), now)
		if err != nil {
			return err
		}
		send(p.Handed)
		if cancelled {
			handed, err := s.Leave(ctx, "payment", "c-1", call(i), time.Now())
			send(handed)
			return err
		}
		if p.Reserved {
			continue
		}
		fallback := min(max(time.Until(p.Next), 10*time.Millisecond), time.Second)
		select {
		case <-woken:
			handoffs.Add(1)
		case <-time.After(fallback):
			polls.Add(1)
		case <-ctx.Done():
			return fmt.Errorf("call %d: %w", i, ctx.Err())
		}
	}
}

// A slot passed to a call (a cancelled async call's, to its undo) changes
// hands in one write: the key stays full, no call in line or newcomer takes
// it, and the call it was passed to takes it by its Hold. Passed and not
// taken, it lapses at its time and goes to the first in line. A holder
// that holds none passes nothing; a call that has a slot kept for it
// already has the passer's let go.
func TestASlotPassedToAnUndoIsTakenByItAlone(t *testing.T) {
	eachTable(t, func(t *testing.T, s keyline.Store, tb table) {
		ctx := context.Background()
		end := t0.Add(time.Hour)
		undo := keyline.WaiterID("o-0", workflow.Ref{Undo: true}, 1)
		undoAttempt := keyline.Holder("o-0", workflow.Ref{Undo: true}, 1, 1)
		got, err := s.Hold(ctx, "payment", "c-1", 1, attempt(0, 1), end, t0)
		require.NoError(t, err)
		require.True(t, got.Held)
		p, err := s.Wait(ctx, "payment", "c-1", 1, waiter(call(1)), t0)
		require.NoError(t, err)
		require.Equal(t, 1, p.Position)

		handed, err := s.Pass(ctx, "payment", "c-1", attempt(0, 1), undo, t0.Add(time.Minute), t0)
		require.NoError(t, err)
		require.Empty(t, handed, "the slot is the undo's: nothing handed on")
		k, err := s.Key(ctx, "payment", "c-1")
		require.NoError(t, err)
		require.Empty(t, k.Holders)
		require.Equal(t, map[string]time.Time{undo: t0.Add(time.Minute)}, k.Reserved)
		require.Equal(t, 1, k.Position(call(1)), "call 1 still waits")
		require.True(t, tb.expires(t, "payment", "c-1").After(t0.Add(time.Minute)))

		got, err = s.Hold(ctx, "payment", "c-1", 1, attempt(1, 2), end, t0.Add(time.Second))
		require.NoError(t, err)
		require.False(t, got.Held, "the first in line does not take the undo's slot")
		got, err = s.Hold(ctx, "payment", "c-1", 1, attempt(7, 1), end, t0.Add(time.Second))
		require.NoError(t, err)
		require.False(t, got.Held, "nor does a newcomer")
		got, err = s.Hold(ctx, "payment", "c-1", 1, undoAttempt, end, t0.Add(2*time.Second))
		require.NoError(t, err)
		require.True(t, got.Held, "the undo takes it")
		handed, err = s.Release(ctx, "payment", "c-1", undoAttempt, t0.Add(3*time.Second))
		require.NoError(t, err)
		require.Equal(t, []string{call(1)}, ids(handed), "and lets it go to the first in line")

		// Passed and not taken: it lapses, and goes to the first in line.
		got, err = s.Hold(ctx, "payment", "c-2", 1, attempt(0, 1), end, t0)
		require.NoError(t, err)
		require.True(t, got.Held)
		_, err = s.Wait(ctx, "payment", "c-2", 1, waiter(call(2)), t0)
		require.NoError(t, err)
		_, err = s.Pass(ctx, "payment", "c-2", attempt(0, 1), undo, t0.Add(time.Minute), t0)
		require.NoError(t, err)
		got, err = s.Hold(ctx, "payment", "c-2", 1, attempt(2, 2), end, t0.Add(time.Minute))
		require.NoError(t, err)
		require.True(t, got.Held, "the lapsed pass went to the first in line")

		// Nothing to pass; a call with a slot kept already.
		handed, err = s.Pass(ctx, "payment", "c-2", attempt(5, 1), undo, t0.Add(time.Minute), t0)
		require.NoError(t, err)
		require.Empty(t, handed)
		k, err = s.Key(ctx, "payment", "c-2")
		require.NoError(t, err)
		require.Equal(t, map[string]time.Time{attempt(2, 2): end}, k.Holders, "a stranger passes nothing")
		for _, h := range []string{attempt(3, 1), attempt(4, 1)} {
			got, err = s.Hold(ctx, "payment", "c-3", 2, h, end, t0)
			require.NoError(t, err)
			require.True(t, got.Held)
		}
		_, err = s.Wait(ctx, "payment", "c-3", 2, waiter(call(6)), t0)
		require.NoError(t, err)
		_, err = s.Pass(ctx, "payment", "c-3", attempt(3, 1), undo, t0.Add(time.Minute), t0)
		require.NoError(t, err)
		handed, err = s.Pass(ctx, "payment", "c-3", attempt(4, 1), undo, t0.Add(time.Minute), t0)
		require.NoError(t, err)
		require.Equal(t, []string{call(6)}, ids(handed), "the undo has a slot kept already: this one is let go, to the first in line")
		k, err = s.Key(ctx, "payment", "c-3")
		require.NoError(t, err)
		require.Empty(t, k.Holders)
		require.Len(t, k.Reserved, 2, "the undo's and call 6's")

		// The same with the passer's own hold past its end (its attempt's
		// CompleteBy): let go all the same, counted once.
		for _, h := range []string{attempt(3, 1), attempt(4, 1)} {
			got, err = s.Hold(ctx, "payment", "c-4", 2, h, t0.Add(time.Second), t0)
			require.NoError(t, err)
			require.True(t, got.Held)
		}
		late := t0.Add(time.Minute)
		_, err = s.Pass(ctx, "payment", "c-4", attempt(3, 1), undo, late.Add(time.Minute), late)
		require.NoError(t, err)
		_, err = s.Pass(ctx, "payment", "c-4", attempt(4, 1), undo, late.Add(time.Minute), late)
		require.NoError(t, err, "a hold past its end, its call's slot kept already: let go")
		k, err = s.Key(ctx, "payment", "c-4")
		require.NoError(t, err)
		require.Empty(t, k.Holders)
		require.Equal(t, map[string]time.Time{undo: late.Add(time.Minute)}, k.Reserved)
		for i := range 2 {
			got, err = s.Hold(ctx, "payment", "c-4", 2, attempt(20+i, 1), end, late)
			require.NoError(t, err)
			require.Equal(t, i == 0, got.Held, "one slot free beside the undo's, not two, not none")
		}

		// The undo waiting in line already (its call came first, found the
		// key full): the pass takes it out of the line, reserves it the
		// slot, and hands its request back to be sent; it holds one slot.
		got, err = s.Hold(ctx, "payment", "c-5", 1, attempt(0, 1), end, t0)
		require.NoError(t, err)
		require.True(t, got.Held)
		p, err = s.Wait(ctx, "payment", "c-5", 1, waiter(undo), t0)
		require.NoError(t, err)
		require.Equal(t, 1, p.Position)
		_, err = s.Wait(ctx, "payment", "c-5", 1, waiter(call(8)), t0)
		require.NoError(t, err)
		handed, err = s.Pass(ctx, "payment", "c-5", attempt(0, 1), undo, t0.Add(time.Minute), t0)
		require.NoError(t, err)
		require.Equal(t, []string{undo}, ids(handed), "its request sent: it takes its slot")
		k, err = s.Key(ctx, "payment", "c-5")
		require.NoError(t, err)
		require.Equal(t, map[string]time.Time{undo: t0.Add(time.Minute)}, k.Reserved)
		require.Zero(t, k.Position(undo), "out of the line")
		require.Equal(t, 1, k.Position(call(8)))
		p, err = s.Wait(ctx, "payment", "c-5", 1, waiter(undo), t0)
		require.NoError(t, err)
		require.True(t, p.Reserved, "its wait again is told its slot is kept")
		got, err = s.Hold(ctx, "payment", "c-5", 1, undoAttempt, end, t0)
		require.NoError(t, err)
		require.True(t, got.Held)
		handed, err = s.Release(ctx, "payment", "c-5", undoAttempt, t0)
		require.NoError(t, err)
		require.Equal(t, []string{call(8)}, ids(handed), "one slot, to the next in line")
	})
}
