package keyline_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/workflow"
)

// onePerPage is a DynamoDB client whose queries return one item a page.
type onePerPage struct{ *dynamodb.Client }

func (c onePerPage) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	in.Limit = aws.Int32(1)
	return c.Client.Query(ctx, in, opts...)
}

// hold has call i hold a slot of agent's key, or else wait in its line
// (joining it at t0 plus i seconds).
func hold(t *testing.T, s keyline.Store, agent, key string, limit, i int) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Hold(ctx, agent, key, limit, attempt(i, 1), t0.Add(time.Hour), t0)
	require.NoError(t, err)
	if !got.Held {
		_, err := s.Wait(ctx, agent, key, limit, waiter(call(i)), t0.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
}

// An agent's keys in use are read in one query of its partition, every
// page: the busiest first, each with its holders (the earliest to end
// first, one that ended marked and not counted in flight), reservations and
// line in line order, each call with its order; a key no call uses any
// more, another agent's keys, and the agent's control and rate items are
// not among them. A key too long to be kept as it is shows its hash's first
// digits.
func TestAnAgentsKeysInUseAreReadBusiestFirst(t *testing.T) {
	eachTable(t, func(t *testing.T, s keyline.Store, tb table) {
		ctx := context.Background()
		long := strings.Repeat("x", keyname.MaxKeyBytes+1)
		for i := 1; i <= 5; i++ {
			hold(t, s, "ocr", "c-1", 2, i) // 1, 2 hold; 3, 4, 5 wait
		}
		hold(t, s, "ocr", long, 1, 6)
		hold(t, s, "ocr", long, 1, 7)
		hold(t, s, "ocr", "c-2", 1, 8)
		hold(t, s, "ocr", "c-2", 1, 9)
		handed, err := s.Release(ctx, "ocr", "c-2", attempt(8, 1), t0) // reserved for 9
		require.NoError(t, err)
		require.Len(t, handed, 1)
		hold(t, s, "ocr", "c-3", 1, 10)
		_, err = s.Release(ctx, "ocr", "c-3", attempt(10, 1), t0) // c-3 is empty again
		require.NoError(t, err)
		hold(t, s, "payment", "c-9", 1, 11)
		gate := flow.NewStore(tb.db, tb.name)
		_, err = gate.Pause(ctx, "ocr", "test", t0)
		require.NoError(t, err)
		_, _, err = gate.Take(ctx, "ocr", workflow.Rate{Calls: 5, Per: time.Second}, t0)
		require.NoError(t, err)
		ended := t0.Add(time.Hour) // call 1's and call 2's holds end then

		for _, store := range []keyline.Store{s, keyline.NewStore(onePerPage{tb.db}, tb.name)} {
			in, err := store.Keys(ctx, "ocr", 0, t0)
			require.NoError(t, err)
			require.Equal(t, 3, in.Count)
			require.Equal(t, 4, in.Waiting, "3 for c-1, 1 for the long key")
			require.Equal(t, t0.Add(3*time.Second), in.Oldest)
			var keys []string
			for _, k := range in.Keys {
				keys = append(keys, k.Key)
			}
			sum := sha256.Sum256([]byte(long))
			hashed := "sha256:" + hex.EncodeToString(sum[:])[:keyline.HashedKeyDigits]
			require.Equal(t, []string{"c-1", hashed, "c-2"}, keys, "the most calls first")
			c1 := in.Keys[0]
			require.False(t, c1.Hashed)
			require.True(t, in.Keys[1].Hashed)
			require.Equal(t, 2, c1.Limit)
			require.Equal(t, 2, c1.InFlight)
			require.Equal(t, []keyline.KeyWaiter{
				{OrderID: "o-3", ID: call(3), Since: t0.Add(3 * time.Second), Position: 1},
				{OrderID: "o-4", ID: call(4), Since: t0.Add(4 * time.Second), Position: 2},
				{OrderID: "o-5", ID: call(5), Since: t0.Add(5 * time.Second), Position: 3}}, c1.Waiters, "in line order")
			require.Equal(t, []keyline.KeyHolder{{OrderID: "o-1", ID: attempt(1, 1), Until: ended},
				{OrderID: "o-2", ID: attempt(2, 1), Until: ended}}, c1.Holders)
			require.Equal(t, 5, c1.Calls())
			require.Empty(t, in.Keys[2].Holders)
			require.Equal(t, "o-9", in.Keys[2].Reserved[0].OrderID)
			require.Equal(t, call(9), in.Keys[2].Reserved[0].ID)
		}

		in, err := s.Keys(ctx, "ocr", 0, ended)
		require.NoError(t, err)
		c1 := in.Keys[0]
		require.True(t, c1.Holders[0].Ended, "past its end: shown as stored, marked")
		require.Equal(t, 0, c1.InFlight, "and not counted in flight")
		in, err = s.Keys(ctx, "ocr", 1, t0)
		require.NoError(t, err)
		require.Len(t, in.Keys, 1, "at most the limit")
		require.Equal(t, "c-1", in.Keys[0].Key)
		require.Equal(t, 3, in.Count, "all keys counted")
		in, err = s.Keys(ctx, "nobody", 10, t0)
		require.NoError(t, err)
		require.Zero(t, in.Count)
		require.Empty(t, in.Keys)
		_, err = keyline.NewStore(struct{ keyline.DB }{tb.db}, tb.name).Keys(ctx, "ocr", 0, t0)
		require.ErrorContains(t, err, "does not query")
	})
}

// The order a waiter or a holder is a call of.
func TestOrderOfAWaiterOrHolder(t *testing.T) {
	t.Parallel()
	ref := workflow.Ref{Index: 2, Undo: true, Item: 3}
	require.Equal(t, "o/1", keyline.OrderOf(keyline.WaiterID("o/1", ref, 2)))
	require.Equal(t, "o-1", keyline.OrderOf(keyline.Holder("o-1", ref, 1, 4)))
	require.Equal(t, "o-1", keyline.OrderOf("o-1/0#1"))
	require.Equal(t, "plain", keyline.OrderOf("plain"))
}
