package agent_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/agent"
)

// keyring is an Authorizer that counts how often it was asked to read its
// credentials again.
type keyring struct{ refreshed atomic.Int32 }

func (k *keyring) Authorize(_ context.Context, req *http.Request, _ []byte) error {
	req.Header.Set("X-Api-Key", "key")
	return nil
}

func (k *keyring) Refresh(context.Context) bool { k.refreshed.Add(1); return true }

func (k *keyring) Redact(text string) string { return strings.ReplaceAll(text, "key", "[redacted]") }

// statusServer answers each action with the status it names: POST /403.
func statusServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		http.Error(w, "no", code)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// With credentials, a 401 or 403 is a refusal of the credentials (read
// again, then transient) unless the workflow lists it under refuse: then it
// refuses the step for good, and the credentials are not read again.
func TestHTTPRemoteRefusesTheStepForTheStatusesTheWorkflowLists(t *testing.T) {
	t.Parallel()
	srv := statusServer(t)
	for name, c := range map[string]struct {
		refuse    []int
		status    string
		permanent bool
		refreshed int32
	}{
		"403 by default":     {nil, "403", false, 1},
		"401 by default":     {nil, "401", false, 1},
		"403 listed":         {[]int{403, 422}, "403", true, 0},
		"401 not listed":     {[]int{403}, "401", false, 1},
		"422 whether or not": {nil, "422", true, 0},
	} {
		k := &keyring{}
		r := &agent.HTTPRemote{Endpoint: srv.URL, Service: "payments", Refuse: c.refuse, Auth: k, Client: srv.Client()}
		_, err := r.Apply(context.Background(), c.status, "o-1/charge", []byte(`{}`))
		require.Error(t, err, name)
		require.Equal(t, c.permanent, agent.IsPermanent(err), "%s: %v", name, err)
		require.Equal(t, c.refreshed, k.refreshed.Load(), name)
	}
	noAuth := &agent.HTTPRemote{Endpoint: srv.URL, Service: "payments", Client: srv.Client()}
	_, err := noAuth.Apply(context.Background(), "403", "o-1/charge", []byte(`{}`))
	require.True(t, agent.IsPermanent(err), "without credentials a 403 refuses the step")
}

// A 404 (or 405) refuses the step and says where the call went, without
// the endpoint's query, which may carry a secret: most often the endpoint
// is not the service's base URL (an action is POSTed under it).
func TestANotFoundSaysWhereTheCallWent(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	r := &agent.HTTPRemote{Endpoint: srv.URL + "/validate?token=s3cret", Service: "checks", Client: srv.Client()}
	_, err := r.Apply(context.Background(), "validate", "o-1/validate", []byte(`{}`))
	require.True(t, agent.IsPermanent(err))
	require.ErrorContains(t, err, "remote refused the request permanently (HTTP 404): 404 page not found (POST "+srv.URL+
		"/validate/validate: an action is POSTed to the agent's endpoint/ACTION; is checks's endpoint its service's base URL?)")
	require.NotContains(t, err.Error(), "s3cret")
}

// An endpoint's query stays a query: the action goes under its path.
func TestAnEndpointsQueryIsKept(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.URL.String() }))
	t.Cleanup(srv.Close)
	r := &agent.HTTPRemote{Endpoint: srv.URL + "/api/?code=abc", Service: "checks", Client: srv.Client()}
	_, err := r.Apply(context.Background(), "validate", "o-1/validate", []byte(`{}`))
	require.NoError(t, err)
	require.Equal(t, "/api/validate?code=abc", got)
}

// secret is an Authorizer whose credential is its value.
type secret string

func (s secret) Authorize(_ context.Context, req *http.Request, _ []byte) error {
	req.Header.Set("Authorization", "Bearer "+string(s))
	return nil
}

func (secret) Refresh(context.Context) bool { return false }

func (s secret) Redact(text string) string { return strings.ReplaceAll(text, string(s), "[redacted]") }

// A service that echoes the credential in a refusal has none of it quoted,
// wherever the echoes fall against the reason's bound: every length of
// credential, echoed whole several times and once across each offset
// about 4 KiB (the text is cut only once the credential is out of it).
func TestARefusalQuotesNoPieceOfTheCredential(t *testing.T) {
	t.Parallel()
	for _, n := range []int{8, 100, 1107, 2048} {
		cred := secret(strings.Repeat("k", n/2) + strings.Repeat("Q", n-n/2))
		for lead := 4096 - n - 8; lead <= 4096+8; lead += max(n/7, 3) {
			body := strings.Repeat(string(cred), 3) + strings.Repeat("é", max(lead, 0)/2) + string(cred) + " and more"
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = io.WriteString(w, body)
			}))
			r := &agent.HTTPRemote{Endpoint: srv.URL, Service: "svc", Client: srv.Client(), Auth: cred}
			_, err := r.Apply(context.Background(), "act", "o-1/act/1", []byte(`{}`))
			srv.Close()
			var refused *agent.PermanentError
			require.ErrorAs(t, err, &refused)
			require.True(t, utf8.ValidString(refused.Body))
			require.NotContains(t, refused.Body, strings.Repeat("k", min(8, n/2)), "credential of %d bytes, lead %d", n, lead)
			require.NotContains(t, refused.Body, strings.Repeat("Q", min(8, n-n/2)), "credential of %d bytes, lead %d", n, lead)
		}
	}
}
