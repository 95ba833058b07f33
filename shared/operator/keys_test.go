package operator

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/workflow"
)

// An agent's keys in use show each key's holders (the earliest to end
// first, an ended one marked and not counted in flight), reservations and
// line in line order, each call with its order; the JSON is the published
// schema's agent.
func TestAnAgentsKeysInUseShowTheirCallsAndLines(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	ref := workflow.Ref{Index: 1}
	in := flow.KeysInUse{Count: 2, Waiting: 2, Oldest: now.Add(-12 * time.Second), Keys: []flow.KeyInUse{
		{Key: "c-1", Slots: flow.Slots{Limit: 2,
			Holders: map[string]time.Time{
				flow.Holder("o-2", ref, 1, 1): now.Add(time.Minute),
				flow.Holder("o-1", ref, 1, 3): now.Add(-time.Second)},
			Reserved: map[string]time.Time{flow.WaiterID("o-3", ref, 1): now.Add(flow.ReserveFor)},
			Waiters: []flow.Waiter{
				{ID: flow.WaiterID("o-5", ref, 1), Since: now.Add(-12 * time.Second)},
				{ID: flow.WaiterID("o-4", ref, 2), Since: now.Add(-3 * time.Second)}}}},
		{Key: "sha256:0123456789ab", Hashed: true, Slots: flow.Slots{Limit: 1,
			Holders: map[string]time.Time{flow.Holder("o-6", ref, 1, 1): now.Add(time.Minute)}}},
	}}
	var f AgentFlow
	f.Agent = "ocr"
	f.keysInUse(in, now)
	require.Equal(t, 2, f.KeysInUse)
	require.Equal(t, 2, f.KeyWaiters)
	require.Equal(t, Duration(12*time.Second), f.LongestKeyWait)
	c1 := f.Keys[0]
	require.Equal(t, []KeyHolder{
		{OrderID: "o-1", ID: flow.Holder("o-1", ref, 1, 3), Until: now.Add(-time.Second), Ended: true},
		{OrderID: "o-2", ID: flow.Holder("o-2", ref, 1, 1), Until: now.Add(time.Minute)}}, c1.Holders)
	require.Equal(t, 2, c1.InFlight, "o-2's hold and o-3's reservation; o-1's ended")
	require.Equal(t, "o-3", c1.Reserved[0].OrderID)
	require.Equal(t, []KeyWaiter{
		{OrderID: "o-5", ID: flow.WaiterID("o-5", ref, 1), Since: now.Add(-12 * time.Second), Position: 1},
		{OrderID: "o-4", ID: flow.WaiterID("o-4", ref, 2), Since: now.Add(-3 * time.Second), Position: 2}}, c1.Waiters)

	b, err := json.Marshal(f)
	require.NoError(t, err)
	requireSchema(t, "agent", b)
	require.Contains(t, string(b), `"longestKeyWait":"12s"`)
	require.Contains(t, string(b), `"key":"sha256:0123456789ab","hashed":true,"limit":1,"inFlight":1`)
	b, err = json.Marshal(AgentFlow{Agent: "idle"})
	require.NoError(t, err)
	require.JSONEq(t, `{"agent":"idle","paused":false,"changed":false}`, string(b), "no keys in use: nothing said")
}

// requireSchema requires b to be JSON of OutputSchema's definition def.
func requireSchema(t *testing.T, def string, b []byte) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(OutputSchema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("output.schema.json", doc))
	s, err := c.Compile("output.schema.json#/$defs/" + def)
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	require.NoError(t, s.Validate(inst), "%s", b)
}
