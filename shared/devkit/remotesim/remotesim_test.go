package remotesim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
)

func call(t *testing.T, url, key, order string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/services/inventory/apply", bytes.NewBufferString(`{"orderId":"`+order+`"}`))
	req.Header.Set("Idempotency-Key", key)
	resp, err := (&http.Client{Timeout: 500 * time.Millisecond}).Do(req)
	if err != nil {
		return 0 // timed out (a stall)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func start(t *testing.T, f remotesim.Faults) (*remotesim.Simulator, string) {
	sim := remotesim.New(1)
	sim.SetFaults("", f)
	srv, err := sim.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return sim, srv.URL
}

func TestSimulatorAppliesEachKeyOnce(t *testing.T) {
	t.Parallel()
	sim, url := start(t, remotesim.Faults{})
	require.Equal(t, 200, call(t, url, "o-1/s", "o-1"))
	require.Equal(t, 200, call(t, url, "o-1/s", "o-1"), "a replay answers as before")
	require.Equal(t, 200, call(t, url, "o-2/s", "o-2"))
	l := sim.Ledger()
	require.Len(t, l, 2)
	require.Equal(t, "o-1", l[0].OrderID)
	require.Equal(t, 2, l[0].Calls)
	require.Equal(t, remotesim.Stats{Calls: 3, Applied: 2, Replayed: 1}, sim.Stats())
}

func TestSimulatorFaults(t *testing.T) {
	t.Parallel()
	sim, url := start(t, remotesim.Faults{PermanentOrders: []string{"o-p"}, StallFirst: 1})
	require.Equal(t, 0, call(t, url, "o-1/s", "o-1"), "first call stalls")
	require.Equal(t, 200, call(t, url, "o-1/s", "o-1"))
	call(t, url, "o-p/s", "o-p")
	require.Equal(t, 422, call(t, url, "o-p/s", "o-p"), "permanent, every time")
	require.Len(t, sim.Ledger(), 1)

	sim.SetFaults("", remotesim.Faults{Outages: []remotesim.Window{{From: time.Now().Add(-time.Minute), To: time.Now().Add(time.Minute)}}})
	require.Equal(t, 503, call(t, url, "o-2/s", "o-2"), "inside an outage")
	sim.SetFaults("", remotesim.Faults{TransientRate: 1})
	require.Equal(t, 503, call(t, url, "o-2/s", "o-2"))

	sim.SetFaults("", remotesim.Faults{LostReplyOrders: []string{"o-l"}})
	require.Equal(t, 0, call(t, url, "o-l/s", "o-l"), "applied, but the reply never comes")
	require.Equal(t, 0, call(t, url, "o-l/s", "o-l"), "nor for a retry")
	require.Len(t, sim.Ledger(), 2, "the effect happened, once")
	sim.SetFaults("", remotesim.Faults{})
	require.Equal(t, 200, call(t, url, "o-l/s", "o-l"), "the replay answers once the fault is gone")
	require.Len(t, sim.Ledger(), 2)
}

func TestSimulatorHTTPKnobsAndLedger(t *testing.T) {
	t.Parallel()
	_, url := start(t, remotesim.Faults{})
	body, _ := json.Marshal(remotesim.Faults{PermanentRate: 1})
	req, _ := http.NewRequest(http.MethodPut, url+"/v1/services/inventory/faults", bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, 422, call(t, url, "o-1/s", "o-1"))

	resp, err = http.Get(url + "/v1/ledger")
	require.NoError(t, err)
	defer resp.Body.Close()
	var l []remotesim.Effect
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
	require.Empty(t, l)
	require.Equal(t, 400, call(t, url, "", "o-1"), "an idempotency key is required")
}

// A 429 storm: inside its window every call, of a key applied or not, is
// answered 429 with a Retry-After of whole seconds and applies nothing;
// after it the service answers as before. The call log keeps when each
// call came and what it was answered.
func TestSimulatorThrottlesWithRetryAfter(t *testing.T) {
	t.Parallel()
	sim, url := start(t, remotesim.Faults{})
	sim.LogCalls("inventory")
	require.Equal(t, 200, call(t, url, "o-1/s", "o-1"))
	now := time.Now()
	sim.SetFaults("", remotesim.Faults{Throttled: []remotesim.Window{{From: now.Add(-time.Second), To: now.Add(time.Minute)}},
		RetryAfter: 1500 * time.Millisecond, PermanentRate: 1})
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/services/inventory/apply", bytes.NewBufferString(`{}`))
	req.Header.Set("Idempotency-Key", "o-2/s")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "before the refusal for good: a gateway's limit")
	require.Equal(t, "2", resp.Header.Get("Retry-After"), "whole seconds, rounded up")
	require.Equal(t, 429, call(t, url, "o-1/s", "o-1"), "a key applied before is throttled too")
	require.Len(t, sim.Ledger(), 1, "nothing applied in the storm")

	sim.SetFaults("", remotesim.Faults{Throttled: []remotesim.Window{{From: now.Add(-time.Minute), To: now.Add(-time.Second)}}})
	require.Equal(t, 200, call(t, url, "o-2/s", "o-2"), "the storm is over")
	require.Equal(t, 2, sim.Stats().Throttled)

	calls := sim.Calls("inventory")
	require.Len(t, calls, 4)
	var statuses []int
	for i, c := range calls {
		statuses = append(statuses, c.Status)
		require.Equal(t, "inventory", c.Service)
		require.False(t, c.At.Before(now.Add(-time.Minute)))
		if i > 0 {
			require.False(t, c.At.Before(calls[i-1].At), "in the order they came")
		}
	}
	require.Equal(t, []int{200, 429, 429, 200}, statuses)
	require.Nil(t, sim.Calls("payment"), "only the services named are logged")
}

// An order named in OrderResultBytes is answered at its own size, the
// others at ResultBytes.
func TestSimulatorAnswersAnOrderAtItsOwnSize(t *testing.T) {
	t.Parallel()
	_, url := start(t, remotesim.Faults{ResultBytes: 2 << 10, OrderResultBytes: map[string]int{"o-big": 1 << 20}})
	size := func(key, order string) int {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/services/inventory/apply", bytes.NewBufferString(`{"orderId":"`+order+`"}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var b bytes.Buffer
		_, err = b.ReadFrom(resp.Body)
		require.NoError(t, err)
		require.True(t, json.Valid(b.Bytes()))
		return b.Len()
	}
	require.InDelta(t, 2<<10, size("o-1/s", "o-1"), 200)
	require.InDelta(t, 1<<20, size("o-big/s", "o-big"), 200)
}
