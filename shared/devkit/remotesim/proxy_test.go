package remotesim_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/remotesim"
)

// A service of the test's own behind the fault proxy: a call without a
// fault reaches it as it was made (path, body, headers) and its answer
// comes back as it was given; a fault answers instead, and the service
// never sees the call.
func TestTheFaultProxyForwardsWhatNoFaultStops(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Idempotency-Key")+" "+r.Header.Get("Authorization")+" "+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"charged":true}`))
	}))
	t.Cleanup(own.Close)
	sim, url := start(t, remotesim.Faults{})
	path, err := sim.Proxy("payment", own.URL+"/api/v2")
	require.NoError(t, err)
	require.Equal(t, "/v1/proxy/payment", path)
	_, err = sim.Proxy("bad", "ftp://x")
	require.Error(t, err)

	post := func(key string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, url+path+"/charge", bytes.NewBufferString(`{"amount":5}`))
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Authorization", "Bearer k")
		resp, err := (&http.Client{Timeout: 500 * time.Millisecond}).Do(req)
		if err != nil {
			return 0, "" // timed out: a stall
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("o-1/charge")
	require.Equal(t, http.StatusCreated, code)
	require.Equal(t, `{"charged":true}`, body)
	require.Equal(t, []string{`/api/v2/charge o-1/charge Bearer k {"amount":5}`}, seen)

	for name, c := range map[string]struct {
		f    remotesim.Faults
		code int
	}{
		"transient": {remotesim.Faults{TransientRate: 1}, http.StatusServiceUnavailable},
		"refused":   {remotesim.Faults{PermanentOrders: []string{"o-2"}}, http.StatusUnprocessableEntity},
		"outage":    {remotesim.Faults{Outages: []remotesim.Window{{From: time.Now().Add(-time.Minute), To: time.Now().Add(time.Minute)}}}, http.StatusServiceUnavailable},
		"stall":     {remotesim.Faults{StallOrders: []string{"o-2"}}, 0},
		"throttled": {remotesim.Faults{Throttled: []remotesim.Window{{From: time.Now().Add(-time.Minute), To: time.Now().Add(time.Minute)}},
			RetryAfter: time.Second}, http.StatusTooManyRequests},
	} {
		sim.SetFaults("payment", c.f)
		code, _ := post("o-2/charge")
		require.Equal(t, c.code, code, name)
	}
	mu.Lock()
	require.Len(t, seen, 1, "no faulted call reached the service")
	mu.Unlock()
	st := sim.Stats()
	require.Equal(t, 1, st.Forwarded)
	require.Equal(t, map[string]string{"payment": own.URL + "/api/v2"}, sim.Proxied())
}
