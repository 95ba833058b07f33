package keyline_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

// The largest request an Agent keeps in a key's line (every field at its
// longest, its key MaxKeyBytes of control bytes, each escaped to six) gets
// its place and is handed back as it was, on both engines. At a 300-byte
// bound a request with a 141-byte key was over it: its call polled every
// second, overtaken by every later call with a shorter request, until its
// order's deadline failed it.
func TestTheLongestRequestKeepsItsPlaceInLine(t *testing.T) {
	req := message.AgentRequest{OrderID: strings.Repeat("o", 64), Step: workflow.MaxSteps - 1, Undo: true,
		Item: workflow.MaxForEachItems, StepName: strings.Repeat("s", 64), Action: strings.Repeat("a", 64),
		Workflow: strings.Repeat("w", 40), Version: "0123abcd", Payload: json.RawMessage(`{"orderId":"o"}`)}
	key := strings.Repeat("\x01\x1f", keyname.MaxKeyBytes/2)
	want := req.Waiting(math.MaxInt, key)
	line, err := message.Encode(want, 0)
	require.NoError(t, err)
	t.Logf("the longest request kept in line: %d bytes (bound %d)", len(line), keyline.MaxWaiterRequestBytes)
	require.LessOrEqual(t, len(line), keyline.MaxWaiterRequestBytes)
	shorter, err := message.Encode(req.Waiting(7, strings.Repeat("k", 141)), 0)
	require.NoError(t, err)
	require.Greater(t, len(shorter), 300, "a request the old bound kept out of line")

	eachTable(t, func(t *testing.T, s keyline.Store, _ table) {
		ctx := context.Background()
		ref := workflow.Ref{Index: req.Step, Undo: true, Item: req.Item}
		holder := keyline.Holder("o-holder", ref, 1, 1)
		got, err := s.Hold(ctx, "payment", key, 1, holder, t0.Add(time.Minute), t0)
		require.NoError(t, err)
		require.True(t, got.Held)
		id := keyline.WaiterID(req.OrderID, ref, math.MaxInt)
		for _, w := range []keyline.Waiter{{ID: id, Request: line}, {ID: call(2), Request: shorter}} {
			_, err := s.Wait(ctx, "payment", key, 1, w, t0)
			require.NoError(t, err)
		}
		k, err := s.Key(ctx, "payment", key)
		require.NoError(t, err)
		require.Equal(t, 1, k.Position(id), "first in line, the shorter request behind it")
		require.Equal(t, 2, k.Position(call(2)))

		handed, err := s.Release(ctx, "payment", key, holder, t0)
		require.NoError(t, err)
		require.Equal(t, []string{id}, ids(handed))
		back, err := message.DecodeAgentRequest(string(handed[0].Request))
		require.NoError(t, err)
		require.Equal(t, want, back, "handed back as it was kept, its key whole")
	})
}
