package points_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/functions/loyalty/points"
	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/shop"
)

var order = shop.Order{OrderID: "o-1", CustomerID: "c-9", Items: []shop.Item{
	{SKU: "a", Quantity: 3, UnitPriceCents: 1999}, {SKU: "b", Quantity: 1, UnitPriceCents: 250}}}

// doc is the step's document a Go agent is given by default: the order and
// the results before it.
var doc = []byte(`{"order":` + order.JSON() + `,"results":{"invoice":{"id":"inv-1"}}}`)

func apply(t *testing.T, action string, payload []byte) (points.Result, error) {
	t.Helper()
	var r points.Result
	out, err := points.Service{}.Apply(context.Background(), action, "o-1/"+action, payload)
	if err == nil {
		require.NoError(t, json.Unmarshal(out, &r))
	}
	return r, err
}

func TestAwardAndRevokeTheOrdersPoints(t *testing.T) {
	t.Parallel()
	var _ agent.Remote = points.Service{} // the one interface a Go agent implements
	r, err := apply(t, points.Award, doc)
	require.NoError(t, err)
	require.Equal(t, points.Result{CustomerID: "c-9", Points: 62, Key: "o-1/award-points"}, r, "62.47 spent: 62 points")
	again, err := apply(t, points.Award, doc)
	require.NoError(t, err)
	require.Equal(t, r, again, "every attempt of one key answers alike")
	r, err = apply(t, points.Revoke, doc)
	require.NoError(t, err)
	require.EqualValues(t, -62, r.Points)
}

func TestWhatItCannotDoIsRefusedForGood(t *testing.T) {
	t.Parallel()
	_, err := apply(t, "double-points", doc)
	require.True(t, agent.IsPermanent(err))
	require.ErrorContains(t, err, `no action "double-points"`)
	_, err = apply(t, points.Award, []byte("not json"))
	require.True(t, agent.IsPermanent(err))
}
