package kept_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
)

// A step's document is its order and its results by name; a forEach
// step's results are its items', listed in item order byte for byte (null:
// an item done with no answer); an undo's own step's result is its Result
// too. What it weighs is reserved before any of it is read.
func TestADocumentIsAssembledFromItsParts(t *testing.T) {
	t.Parallel()
	in := kept.Inputs{OrderID: "o-1", Record: "o-1/s3", Order: kept.Stored([]byte(`{"orderId":"o-1"}`)), Results: []kept.Part{
		{Name: "s0", Value: kept.Stored([]byte(`{"a":"<&>"}`)), Own: true},
		{Name: "each", Item: 3, Items: 3, Value: kept.Stored([]byte(` [ 3 ] `))},
		{Name: "each", Item: 1, Items: 3, Value: kept.Stored([]byte(`"\u2028"`))},
	}}
	ctx, let := kept.Reserving(context.Background(), kept.NewBudget(1<<20), time.Time{}, 0)
	defer let()
	doc, err := kept.New(nil, nil).Document(ctx, in)
	require.NoError(t, err)
	require.False(t, doc.Sealed)
	require.Equal(t, `{"orderId":"o-1"}`, string(doc.Order))
	require.Equal(t, `{"a":"<&>"}`, string(doc.Results["s0"]))
	require.Equal(t, `["\u2028",null, [ 3 ] ]`, string(doc.Results["each"]), "its items' results as kept, in order")
	require.Equal(t, `{"a":"<&>"}`, string(doc.Result), "an undo's own step's result")

	small, let2 := kept.Reserving(context.Background(), kept.NewBudget(20), time.Time{}, 0)
	defer let2()
	_, err = kept.New(nil, nil).Document(small, in)
	var large *kept.DocumentError
	require.ErrorAs(t, err, &large, "over the budget: refused before anything is read")
	require.True(t, kept.Broken(err))
}

// To stream, the values kept in the bucket are left as their claim checks,
// and only those bytes reserved; a forEach step's items' are read (its
// list joins them), and so is every value of a sealed order, whose results
// are sealed too; it says it is sealed, for what quotes none of it.
func TestADocumentToStreamLeavesItsChecksUnread(t *testing.T) {
	t.Parallel()
	check := payload.Check(payload.Ref{Bucket: "b", Key: payload.OrderPrefix("o-1") + "order/x", Bytes: 40 << 20, SHA256: "00"}, nil)
	in := kept.Inputs{OrderID: "o-1", Order: kept.Stored(check), Results: []kept.Part{{Name: "s0", Value: kept.Stored(check)}}}
	ctx, let := kept.Reserving(context.Background(), kept.NewBudget(1<<20), time.Time{}, 0)
	defer let()
	k := kept.New(payload.New(nil, "b", 0), nil)
	doc, err := k.DocumentToStream(ctx, in)
	require.NoError(t, err, "40 MB each in the bucket, a few hundred bytes reserved")
	require.Equal(t, string(check), string(doc.Order))
	require.Equal(t, string(check), string(doc.Results["s0"]))
	_, err = k.Document(ctx, in)
	var large *kept.DocumentError
	require.ErrorAs(t, err, &large, "read whole: 80 MB")

	listed := in
	listed.Results = []kept.Part{{Name: "each", Item: 1, Items: 1, Value: kept.Stored(check)}}
	_, err = k.DocumentToStream(ctx, listed)
	require.ErrorAs(t, err, &large, "an item's result is read to be listed")

	s, order := sealedOrder(t, "o-2")
	doc, err = s.DocumentToStream(context.Background(), kept.Inputs{OrderID: "o-2", Order: order})
	require.NoError(t, err)
	require.True(t, doc.Sealed)
	require.JSONEq(t, `{"orderId":"o-2","card":"4111"}`, string(doc.Order), "a sealed order is opened, never streamed")
	_, err = kept.New(nil, nil).DocumentToStream(context.Background(), kept.Inputs{OrderID: "o-2", Record: "o-2/s0", Order: order})
	require.True(t, kept.NoKey(err), "no key: its ciphertext never streamed: %v", err)
	require.ErrorContains(t, err, "the order of o-2/s0")
}

// A streamed input's claim checks must be its order's, in its bucket: one
// of another order is refused before anything is sent.
func TestAStreamedInputReadsOnlyItsOrdersValues(t *testing.T) {
	t.Parallel()
	k := kept.New(payload.New(nil, "b", 0), nil)
	mine := payload.Check(payload.Ref{Bucket: "b", Key: payload.OrderPrefix("o-1") + "order/x", Bytes: 10, SHA256: "00"}, nil)
	doc, err := k.DocumentToStream(context.Background(), kept.Inputs{OrderID: "o-1", Order: kept.Stored(mine)})
	require.NoError(t, err)
	in, err := k.Input("o-1", doc.Document)
	require.NoError(t, err)
	require.Equal(t, 1, in.Objects())
	require.EqualValues(t, len(`{"order":,"results":{}}`)+10, in.Size)
	_, err = k.Input("o-9", doc.Document)
	var perr *payload.Error
	require.ErrorAs(t, err, &perr)

	inline, err := k.Input("o-1", kept.Opened{}.Document)
	require.NoError(t, err)
	require.Nil(t, inline, "nothing in the bucket: sent as it is")
}

// A body Submission wrote over once it took it (a sealed order as kept)
// is read as the order it holds, by its head's orderId; any other body is
// as it is, and so is every body where there is no data key.
func TestAResealedBodyIsTheOrderItHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, order := sealedOrder(t, "o-1")
	got, err := k.Resealed(ctx, order.JSON())
	require.NoError(t, err)
	require.JSONEq(t, `{"orderId":"o-1","card":"4111"}`, string(got))
	got, err = k.Resealed(ctx, []byte(`{"orderId":"o-2"}`))
	require.NoError(t, err)
	require.Equal(t, `{"orderId":"o-2"}`, string(got))
	got, err = kept.New(nil, nil).Resealed(ctx, order.JSON())
	require.NoError(t, err)
	require.Equal(t, string(order.JSON()), string(got), "no key: as it is")

	var unnamed map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(order.JSON(), &unnamed))
	delete(unnamed, "orderId")
	b, _ := json.Marshal(unnamed)
	_, err = k.Resealed(ctx, b)
	require.ErrorIs(t, err, kept.ErrUnnamed)
}

// An event's data written over its sender's clear copy: itself when it is
// sealed or a claim check (its order not read); else, its order sealed, a
// sealed null; its order not sealed, nothing to cover.
func TestAnEventsDataIsCoveredAsItsOrderIs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, order := sealedOrder(t, "o-1")
	reads := 0
	orderOf := func(v kept.Value) func(context.Context) (kept.Value, error) {
		return func(context.Context) (kept.Value, error) { reads++; return v, nil }
	}
	s, err := k.Seal(ctx, "o-1", order, []byte(`{"approved":true}`))
	require.NoError(t, err)
	data, err := k.Offload(ctx, "o-1", "events/approved", s)
	require.NoError(t, err)
	covered, ok, err := k.Covered(ctx, "o-1", data, orderOf(order))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, data.JSON(), covered.JSON())
	require.Zero(t, reads, "sealed already: its order not read")

	covered, ok, err = k.Covered(ctx, "o-1", kept.Stored([]byte(`{"large":true}`)), orderOf(order))
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, seal.IsSealed(covered.JSON()))
	null, err := k.Open(ctx, "o-1", covered)
	require.NoError(t, err)
	require.Equal(t, "null", string(null))

	_, ok, err = k.Covered(ctx, "o-2", kept.Stored([]byte(`{"x":1}`)), orderOf(kept.Stored([]byte(`{"orderId":"o-2"}`))))
	require.NoError(t, err)
	require.False(t, ok, "an order not sealed: nothing to cover")
	gone := errors.New("the store failed")
	_, _, err = k.Covered(ctx, "o-2", kept.Stored([]byte(`{"x":1}`)), func(context.Context) (kept.Value, error) { return kept.Value{}, gone })
	require.ErrorIs(t, err, gone)
}
