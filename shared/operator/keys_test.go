package operator

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/keyline"
	"github.com/sas-go/sas/shared/workflow"
)

// An agent's keys in use, as keyline.Store.Keys read them, are its flow's
// counts, its longest wait and its keys; the JSON is the published schema's
// agent.
func TestAnAgentsKeysInUseShowTheirCallsAndLines(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	ref := workflow.Ref{Index: 1}
	in := keyline.KeysInUse{Count: 2, Waiting: 2, Oldest: now.Add(-12 * time.Second), Keys: []keyline.KeyInUse{
		{Key: "c-1", Limit: 2, InFlight: 2,
			Holders: []keyline.KeyHolder{
				{OrderID: "o-1", ID: keyline.Holder("o-1", ref, 1, 3), Until: now.Add(-time.Second), Ended: true},
				{OrderID: "o-2", ID: keyline.Holder("o-2", ref, 1, 1), Until: now.Add(time.Minute)}},
			Reserved: []keyline.KeyHolder{{OrderID: "o-3", ID: keyline.WaiterID("o-3", ref, 1), Until: now.Add(keyline.ReserveFor)}},
			Waiters: []keyline.KeyWaiter{
				{OrderID: "o-5", ID: keyline.WaiterID("o-5", ref, 1), Since: now.Add(-12 * time.Second), Position: 1},
				{OrderID: "o-4", ID: keyline.WaiterID("o-4", ref, 2), Since: now.Add(-3 * time.Second), Position: 2}}},
		{Key: "sha256:0123456789ab", Hashed: true, Limit: 1, InFlight: 1, Waiters: []keyline.KeyWaiter{},
			Holders: []keyline.KeyHolder{{OrderID: "o-6", ID: keyline.Holder("o-6", ref, 1, 1), Until: now.Add(time.Minute)}}},
	}}
	var f AgentFlow
	f.Agent = "ocr"
	f.keysInUse(in, now)
	require.Equal(t, 2, f.KeysInUse)
	require.Equal(t, 2, f.KeyWaiters)
	require.Equal(t, Duration(12*time.Second), f.LongestKeyWait)
	require.Equal(t, in.Keys, f.Keys)

	b, err := json.Marshal(f)
	require.NoError(t, err)
	requireSchema(t, "agent", b)
	require.Contains(t, string(b), `"longestKeyWait":"12s"`)
	require.Contains(t, string(b), `"key":"sha256:0123456789ab","hashed":true,"limit":1,"inFlight":1`)
	require.Contains(t, string(b), `"ended":true`)
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
