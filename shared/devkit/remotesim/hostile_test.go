package remotesim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/hostile"
	"github.com/sas-go/sas/shared/devkit/remotesim"
)

// post calls the service with key (async: with a callback token), and
// returns its answer and content type.
func post(t *testing.T, url, key string, async bool) ([]byte, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/services/archive/scan", bytes.NewBufferString(`{}`))
	req.Header.Set("Idempotency-Key", key)
	if async {
		req.Header.Set("X-Callback-Token", "tok-"+key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b, resp.Header.Get("Content-Type")
}

// A hostile service answers JSON whose strings hold raw <, > and & and
// escaped control characters, or, for its share of keys, XML with raw
// control bytes and invalid UTF-8; each exactly its size as the product
// keeps it (the JSON as it is, the text quoted), the same again for a
// replay, and as Answer gives it. An async call's callback is JSON.
func TestAHostileServiceAnswersAtExactlyItsSize(t *testing.T) {
	t.Parallel()
	sizes := []int{32<<10 - 1, 32 << 10, 32<<10 + 1}
	sim, url := start(t, remotesim.Faults{Hostile: 0.5, NotJSON: 0.5, ResultSizes: sizes})
	var mu sync.Mutex
	callbacks := map[string][]byte{}
	sim.OnCallback(func(c remotesim.Callback) {
		mu.Lock()
		defer mu.Unlock()
		callbacks[c.Token] = c.Answer
	})
	kinds := map[string]int{}
	for i := range 40 {
		key := "o-" + string(rune('a'+i%26)) + "/scan/" + string(rune('0'+i/26))
		body, contentType := post(t, url, key, false)
		again, _ := post(t, url, key, false)
		require.Equal(t, body, again, "a replay answers the same bytes")
		kept := len(body)
		if contentType == "application/xml" {
			require.False(t, json.Valid(body))
			require.False(t, utf8.Valid(body), "invalid UTF-8")
			require.Contains(t, string(body), "\x01")
			kept = hostile.MarshalLen(body)
		} else {
			require.True(t, json.Valid(body))
			require.Contains(t, string(body), "<")
			require.Contains(t, string(body), `\u00`)
		}
		require.Contains(t, sizes, kept, "%s: %d bytes as kept", contentType, kept)
		kinds[contentType]++
	}
	require.Positive(t, kinds["application/xml"])
	require.Positive(t, kinds["application/json"])
	require.Equal(t, 2*kinds["application/xml"], sim.Stats().NotJSON, "counted, replays included")
	for _, e := range sim.Ledger() {
		b, _ := sim.Answer(e)
		again, _ := post(t, url, e.Key, false)
		require.Equal(t, again, b, "Answer is what it answered")
	}

	sim.SetFaults("", remotesim.Faults{NotJSON: 1, ResultBytes: 4 << 10, CallbackDelay: time.Millisecond})
	_, _ = post(t, url, "o-async/scan", true)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		b := callbacks["tok-o-async/scan"]
		return json.Valid(b) && len(b) == 4<<10
	}, 5*time.Second, 10*time.Millisecond, "a callback's data is JSON")
}
