package sqsmem_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/sqsmem"
)

// The queues are served on loopback only.
func TestListenServesLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:9324"} {
		_, err := sqsmem.Listen(addr, sqsmem.Options{})
		require.ErrorContains(t, err, "only 127.0.0.1 is served", addr)
	}
	l, err := sqsmem.Listen("", sqsmem.Options{})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(l.Endpoint, "http://127.0.0.1:"), l.Endpoint)
	require.NoError(t, l.Close())
}

// A client speaking SQS's older query protocol is told what to use; an
// operation not served is an error in the JSON protocol's shape.
func TestWhatIsNotServedSaysSo(t *testing.T) {
	t.Parallel()
	l, err := sqsmem.Listen("", sqsmem.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	resp, err := http.PostForm(l.Endpoint, url.Values{"Action": {"SendMessage"}, "MessageBody": {"x"}})
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(body), "JSON protocol")

	req, err := http.NewRequest(http.MethodPost, l.Endpoint, strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("X-Amz-Target", "AmazonSQS.StartMessageMoveTask")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.JSONEq(t, `{"__type":"com.amazonaws.sqs#InvalidAction","message":"The action AmazonSQS.StartMessageMoveTask is not valid for this endpoint."}`, string(body))
}
