package agentauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/agentauth"
	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/workflow"
)

// motoEndpoint is the moto_server TestMain started: its Secrets Manager and
// SSM keep the credentials, as AWS's keep a deployment's.
var motoEndpoint string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMoto(m, &motoEndpoint)) }

// store is where a test keeps its credentials: moto's Secrets Manager and
// SSM, reached with the SDK's own clients (not the code under test).
type store struct {
	t       *testing.T
	clients agentauth.Clients
	secrets *secretsmanager.Client
	ssm     *ssm.Client
}

func newStore(t *testing.T) *store {
	t.Helper()
	c, err := awsclient.Load(context.Background(), awsclient.Options{Endpoint: motoEndpoint, Emulated: true})
	require.NoError(t, err)
	return &store{t: t, clients: agentauth.NewClients(c.Config),
		secrets: secretsmanager.NewFromConfig(c.Config), ssm: ssm.NewFromConfig(c.Config)}
}

// name is unique to the test (moto may be shared, through AWS_ENDPOINT_URL).
func (s *store) name(what string) string {
	return fmt.Sprintf("sas-test/%s/%s-%d", strings.ReplaceAll(s.t.Name(), "/", "."), what, time.Now().UnixNano())
}

// secret keeps value in a new secret and returns its name.
func (s *store) secret(what, value string) string {
	s.t.Helper()
	id := s.name(what)
	_, err := s.secrets.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{Name: &id, SecretString: &value})
	require.NoError(s.t, err)
	return id
}

// rotate puts a new current version of the secret, and checks moto serves it.
func (s *store) rotate(id, value string) {
	s.t.Helper()
	_, err := s.secrets.PutSecretValue(context.Background(), &secretsmanager.PutSecretValueInput{SecretId: &id, SecretString: &value})
	require.NoError(s.t, err)
	out, err := s.secrets.GetSecretValue(context.Background(), &secretsmanager.GetSecretValueInput{SecretId: &id})
	require.NoError(s.t, err)
	require.Equal(s.t, value, aws.ToString(out.SecretString), "moto serves the rotated value")
}

// parameter keeps value in an SSM SecureString parameter (new or
// overwritten) and returns its name.
func (s *store) parameter(name, value string) string {
	s.t.Helper()
	_, err := s.ssm.PutParameter(context.Background(), &ssm.PutParameterInput{Name: &name, Value: &value,
		Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true)})
	require.NoError(s.t, err)
	return name
}

// header is the Authorizer For gives an agent whose auth is a, a *Header.
func header(t *testing.T, c agentauth.Clients, a workflow.Auth) *agentauth.Header {
	t.Helper()
	az, err := agentauth.For(context.Background(), c, workflow.Agent{Name: "warehouse", Auth: &a})
	require.NoError(t, err)
	h, ok := az.(*agentauth.Header)
	require.True(t, ok, "a secret or a parameter gives a *Header, not %T", az)
	return h
}

// sent is the value az puts in the header name of a request.
func sent(t *testing.T, az agent.Authorizer, name string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://warehouse.test/picks", strings.NewReader("{}"))
	require.NoError(t, az.Authorize(context.Background(), req, []byte("{}")))
	return req.Header.Get(name)
}

// clock is a settable time for a Header's rate limit.
type clock struct {
	mu sync.Mutex
	at time.Time
}

func newClock() *clock { return &clock{at: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

func TestHeaderCarriesTheSecretReadAtColdStart(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	id := s.secret("token", "tok-cold-start-1")
	h := header(t, s.clients, workflow.Auth{Header: "Authorization", Prefix: "Bearer ", Secret: id})

	// The secret is gone from the store: the value For read is still used,
	// so it was read at cold start and kept, not read per call.
	_, err := s.secrets.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{
		SecretId: &id, ForceDeleteWithoutRecovery: aws.Bool(true)})
	require.NoError(t, err)
	for range 3 {
		require.Equal(t, "Bearer tok-cold-start-1", sent(t, h, "Authorization"))
	}
	require.Equal(t, "secret "+id, h.Source)
}

func TestRotatedSecretIsReadAgainOnRefreshOnly(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	id := s.secret("api-key", "key-v1")
	h := header(t, s.clients, workflow.Auth{Header: "X-Api-Key", Secret: id})
	clk := newClock()
	h.Now, h.RefreshEvery = clk.Now, time.Minute
	ctx := context.Background()

	s.rotate(id, "key-v2")
	require.Equal(t, "key-v1", sent(t, h, "X-Api-Key"), "until a Refresh the cached value is used")
	clk.Advance(30 * time.Second)
	require.False(t, h.Refresh(ctx), "read at cold start less than RefreshEvery ago")
	require.Equal(t, "key-v1", sent(t, h, "X-Api-Key"))

	clk.Advance(31 * time.Second)
	require.True(t, h.Refresh(ctx), "RefreshEvery after the cold start, the rotated value is read")
	require.Equal(t, "key-v2", sent(t, h, "X-Api-Key"))

	s.rotate(id, "key-v3")
	clk.Advance(time.Second)
	require.False(t, h.Refresh(ctx), "a second Refresh within RefreshEvery reads nothing")
	require.Equal(t, "key-v2", sent(t, h, "X-Api-Key"), "so key-v3 was not read")

	clk.Advance(time.Minute)
	require.True(t, h.Refresh(ctx))
	require.Equal(t, "key-v3", sent(t, h, "X-Api-Key"))
	clk.Advance(time.Minute)
	require.False(t, h.Refresh(ctx), "a read of the same value is nothing new")
	require.Equal(t, "key-v3", sent(t, h, "X-Api-Key"))
}

func TestRefreshEveryDefaultsAndFailedReadsKeepTheValue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("zero is DefaultRefreshEvery", func(t *testing.T) {
		t.Parallel()
		var n atomic.Int32
		clk := newClock()
		h := &agentauth.Header{Name: "X-Api-Key", Source: "secret s", Now: clk.Now,
			Read: func(context.Context) (string, error) { return fmt.Sprintf("v%d", n.Add(1)), nil }}
		require.Equal(t, "v1", sent(t, h, "X-Api-Key"), "the first use reads")
		clk.Advance(agentauth.DefaultRefreshEvery - time.Millisecond)
		require.False(t, h.Refresh(ctx))
		require.EqualValues(t, 1, n.Load(), "no read within DefaultRefreshEvery")
		clk.Advance(time.Millisecond)
		require.True(t, h.Refresh(ctx))
		require.EqualValues(t, 2, n.Load())
		require.Equal(t, "v2", sent(t, h, "X-Api-Key"))
	})

	t.Run("a failed read keeps the cached value and is rate limited too", func(t *testing.T) {
		t.Parallel()
		var reads atomic.Int32
		var fail atomic.Bool
		value := func(context.Context) (string, error) {
			n := reads.Add(1)
			if fail.Load() {
				return "", errors.New("AccessDeniedException: not allowed")
			}
			return fmt.Sprintf("v%d", n), nil
		}
		clk := newClock()
		h := &agentauth.Header{Name: "X-Api-Key", Source: "secret s", Read: value, Now: clk.Now, RefreshEvery: 2 * time.Second}
		require.Equal(t, "v1", sent(t, h, "X-Api-Key"))
		fail.Store(true)
		clk.Advance(2 * time.Second)
		require.False(t, h.Refresh(ctx), "the read failed")
		require.Equal(t, "v1", sent(t, h, "X-Api-Key"), "the cached value stays")
		require.EqualValues(t, 2, reads.Load())
		clk.Advance(time.Second)
		require.False(t, h.Refresh(ctx))
		require.EqualValues(t, 2, reads.Load(), "a failed read counts for the rate limit: no read storm")
		fail.Store(false)
		clk.Advance(time.Second)
		require.True(t, h.Refresh(ctx))
		require.Equal(t, "v3", sent(t, h, "X-Api-Key"))
	})
}

func TestMissingSecretOrParameterFailsColdStartWithItsNameOnly(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	// Values that exist beside the missing ones, which no error may show.
	secretValue, parameterValue := "present-secret-value-7f3a", "present-parameter-value-9c1e"
	present := s.secret("present", secretValue)
	presentParam := s.parameter("/"+s.name("present"), parameterValue)
	values := []string{secretValue, parameterValue}

	for _, tc := range []struct {
		name string
		auth workflow.Auth
		want []string
	}{
		{"secret", workflow.Auth{Header: "X-Api-Key", Secret: present + "-missing"},
			[]string{"agent warehouse", "secret " + present + "-missing", "ResourceNotFoundException"}},
		{"parameter", workflow.Auth{Header: "Authorization", Prefix: "Bearer ", Parameter: presentParam + "-missing"},
			[]string{"agent warehouse", "parameter " + presentParam + "-missing", "ParameterNotFound"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			az, err := agentauth.For(context.Background(), s.clients, workflow.Agent{Name: "warehouse", Auth: &tc.auth})
			require.Error(t, err)
			require.Nil(t, az)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			for _, v := range values {
				require.NotContains(t, err.Error(), v)
			}
		})
	}
}

func TestForRefusesWhatGivesNoHeaderValue(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()

	az, err := agentauth.For(ctx, s.clients, workflow.Agent{Name: "open"})
	require.NoError(t, err)
	require.Nil(t, az, "an agent without auth has no Authorizer")

	_, err = agentauth.For(ctx, s.clients, workflow.Agent{Name: "odd", Auth: &workflow.Auth{Header: "X-Api-Key"}})
	require.ErrorContains(t, err, "agent odd: auth names no secret, parameter or sigv4")

	id := s.name("binary")
	_, err = s.secrets.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: &id, SecretBinary: []byte("binary-value-55")})
	require.NoError(t, err)
	_, err = agentauth.For(ctx, s.clients, workflow.Agent{Name: "bin", Auth: &workflow.Auth{Header: "X-Api-Key", Secret: id}})
	require.ErrorContains(t, err, "agent bin: read secret "+id+": it is a binary secret")
	require.NotContains(t, err.Error(), "binary-value-55")
}

func TestParameterIsReadDecryptedByTheHandWrittenCall(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	name := s.parameter("/"+s.name("billing-token"), "tok-ssm-1")

	// Without decryption moto answers something else: a reader that forgot
	// WithDecryption would not pass.
	raw, err := s.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: &name, WithDecryption: aws.Bool(false)})
	require.NoError(t, err)
	require.NotEqual(t, "tok-ssm-1", aws.ToString(raw.Parameter.Value))

	h := header(t, s.clients, workflow.Auth{Header: "Authorization", Prefix: "Bearer ", Parameter: name})
	require.Equal(t, "Bearer tok-ssm-1", sent(t, h, "Authorization"))
	require.Equal(t, "parameter "+name, h.Source)

	clk := newClock()
	h.Now = clk.Now
	s.parameter(name, "tok-ssm-2")
	require.Equal(t, "Bearer tok-ssm-1", sent(t, h, "Authorization"))
	clk.Advance(agentauth.DefaultRefreshEvery)
	require.True(t, h.Refresh(ctx), "the overwritten parameter is read again")
	require.Equal(t, "Bearer tok-ssm-2", sent(t, h, "Authorization"))
}

// The parameter is read with the SDK's SSM client: signed for ssm in the
// configured region, with WithDecryption; throttling and 5xx answers are
// retried as the SDK retries them; an error names SSM's error and never
// shows a body.
func TestParameterCallIsSignedRetriedAndItsErrorsShowNoBody(t *testing.T) {
	t.Parallel()
	creds := aws.Credentials{AccessKeyID: "AKIDSSMTEST", SecretAccessKey: "ssm-test-secret"}
	guard := remotesim.RequireSigV4(creds, "ssm", "eu-central-1")
	type answer struct {
		status int
		body   string
	}
	var mu sync.Mutex
	var script []answer // answered in turn; the last one again and again
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		// SSM, unlike API Gateway, wants no X-Amz-Content-Sha256 header (the
		// SDK's client sends none): the guard is handed the body's hash; the
		// signature covers it, so it still proves the body is the one signed.
		sum := sha256.Sum256(body)
		r.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
		var in struct {
			Name           string
			WithDecryption bool
		}
		mu.Lock()
		calls++
		a := script[min(calls, len(script))-1]
		mu.Unlock()
		switch {
		case r.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameter":
			http.Error(w, "not GetParameter", http.StatusBadRequest)
		case json.Unmarshal(body, &in) != nil || in.Name != "/prod/billing" || !in.WithDecryption:
			http.Error(w, "wrong input: "+string(body), http.StatusBadRequest)
		case guard(r, body) != nil:
			http.Error(w, "not signed for ssm with the configured credentials", http.StatusForbidden)
		default:
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.WriteHeader(a.status)
			_, _ = io.WriteString(w, a.body)
		}
	}))
	t.Cleanup(srv.Close)
	clients := agentauth.NewClients(aws.Config{Region: "eu-central-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.StaticCredentialsProvider{Value: creds}})
	auth := &workflow.Auth{Header: "Authorization", Parameter: "/prod/billing"}
	ctx := context.Background()
	play := func(answers ...answer) int {
		mu.Lock()
		defer mu.Unlock()
		n := calls
		script, calls = answers, 0
		return n
	}
	ok := answer{http.StatusOK, `{"Parameter":{"Name":"/prod/billing","Type":"SecureString","Value":"tok-signed"}}`}
	throttled := answer{http.StatusBadRequest, `{"__type":"ThrottlingException","message":"Rate exceeded"}`}

	play(throttled, answer{http.StatusServiceUnavailable, `{"__type":"ServiceUnavailable"}`}, ok)
	az, err := agentauth.For(ctx, clients, workflow.Agent{Name: "billing", Auth: auth})
	require.NoError(t, err, "throttled, then unavailable, then read: the SDK's retries")
	require.Equal(t, "tok-signed", sent(t, az, "Authorization"))

	require.Equal(t, 3, play(answer{http.StatusBadRequest, `{"__type":"ParameterNotFound","message":"Parameter /prod/billing not found."}`}))
	_, err = agentauth.For(ctx, clients, workflow.Agent{Name: "billing", Auth: auth})
	require.ErrorContains(t, err, "agent billing: read parameter /prod/billing: operation error SSM: GetParameter")
	require.ErrorContains(t, err, "ParameterNotFound: Parameter /prod/billing not found.")
	require.Equal(t, 1, play(answer{http.StatusBadGateway, "<html>upstream said tok-signed</html>"}), "a refusal is not retried")

	// An answer that is not SSM's (a proxy's page echoing the request) is
	// summed up by its status: its body is not put in the error.
	_, err = agentauth.For(ctx, clients, workflow.Agent{Name: "billing", Auth: auth})
	require.ErrorContains(t, err, "read parameter /prod/billing: operation error SSM: GetParameter")
	require.ErrorContains(t, err, "StatusCode: 502")
	require.NotContains(t, err.Error(), "tok-signed")

	require.Greater(t, play(answer{http.StatusOK, `{"Parameter":{"Name":"/prod/billing","Value":""}}`}), 1, "a 502 is retried")
	_, err = agentauth.For(ctx, clients, workflow.Agent{Name: "billing", Auth: auth})
	require.EqualError(t, err, "agent billing: read parameter /prod/billing: it is empty")
}

func TestRedactReplacesTheSecretAndOnlyIt(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	id := s.secret("echoed", "wh-key-42")
	h := header(t, s.clients, workflow.Auth{Header: "X-Api-Key", Secret: id})

	require.Equal(t, `{"error":"key [redacted] is not valid for wh-key-4 (account 42)","key":"[redacted]"}`,
		h.Redact(`{"error":"key wh-key-42 is not valid for wh-key-4 (account 42)","key":"wh-key-42"}`))
	require.Equal(t, "nothing to hide: wh-key-4", h.Redact("nothing to hide: wh-key-4"))
	require.Equal(t, "", h.Redact(""))

	// After a rotation a late answer to a call made with the old key can
	// still echo it: both are redacted, the longer one first.
	clk := newClock()
	h.Now = clk.Now
	s.rotate(id, "wh-key-42-rotated")
	clk.Advance(agentauth.DefaultRefreshEvery)
	require.True(t, h.Refresh(context.Background()))
	require.Equal(t, "old [redacted], new [redacted].", h.Redact("old wh-key-42, new wh-key-42-rotated."))
}

func TestHTTPRemoteRetriesOnceWithTheRotatedSecret(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	id := s.secret("remote-key", "remote-v1")
	h := header(t, s.clients, workflow.Auth{Header: "X-Api-Key", Secret: id})
	clk := newClock()
	h.Now = clk.Now

	var mu sync.Mutex
	want, refused := "remote-v1", 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if err := remotesim.RequireHeader("X-Api-Key", want)(r, nil); err != nil {
			refused++
			http.Error(w, "bad key "+r.Header.Get("X-Api-Key"), http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	remote := &agent.HTTPRemote{Endpoint: srv.URL, Service: "warehouse", Auth: h, Client: srv.Client()}
	ctx := context.Background()

	out, err := remote.Apply(ctx, "picks", "k-1", []byte(`{}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, string(out))

	s.rotate(id, "remote-v2")
	mu.Lock()
	want = "remote-v2"
	mu.Unlock()
	clk.Advance(agentauth.DefaultRefreshEvery)
	out, err = remote.Apply(ctx, "picks", "k-2", []byte(`{}`))
	require.NoError(t, err, "refused once, the secret is read again and the call made again")
	require.JSONEq(t, `{"ok":true}`, string(out))
	mu.Lock()
	require.Equal(t, 1, refused)
	want = "remote-v3" // rotated at the service only: the store still has v2
	mu.Unlock()

	_, err = remote.Apply(ctx, "picks", "k-3", []byte(`{}`))
	require.Error(t, err, "refused again within RefreshEvery: no read, no retry")
	require.False(t, agent.IsPermanent(err), "a refused credential is not a refused step")
	require.Contains(t, err.Error(), "bad key [redacted]")
	require.NotContains(t, err.Error(), "remote-v2")
	mu.Lock()
	require.Equal(t, 2, refused)
	mu.Unlock()
}

func TestHeaderIsSafeForConcurrentUse(t *testing.T) {
	t.Parallel()
	// The value goes back and forth between two keys, read again at every
	// Refresh: each is redacted whichever is current.
	var n atomic.Int32
	h := &agentauth.Header{Name: "X-Api-Key", Source: "secret s", RefreshEvery: time.Nanosecond,
		Read: func(context.Context) (string, error) { return []string{"key-a", "key-b"}[n.Add(1)%2], nil }}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				v := sent(t, h, "X-Api-Key")
				if v != "key-a" && v != "key-b" {
					t.Errorf("header %q is no value read", v)
				}
				h.Refresh(ctx)
				if red := h.Redact("x " + v + " y"); red != "x [redacted] y" {
					t.Errorf("Redact of the value just sent gave %q", red)
				}
			}
		})
	}
	wg.Wait()
	require.Greater(t, n.Load(), int32(1), "Refresh read again")
}

func TestSigV4SignsVerifiably(t *testing.T) {
	t.Parallel()
	creds := aws.Credentials{AccessKeyID: "AKIDCOURIER", SecretAccessKey: "courier-secret", SessionToken: "courier-session"}
	at := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	az, err := agentauth.For(context.Background(),
		agentauth.Clients{AWS: aws.Config{Credentials: credentials.StaticCredentialsProvider{Value: creds}}},
		workflow.Agent{Name: "courier", Auth: &workflow.Auth{SigV4: &workflow.SigV4{Service: "execute-api", Region: "eu-west-1"}}})
	require.NoError(t, err)
	sig, ok := az.(*agentauth.SigV4)
	require.True(t, ok, "sigv4 gives a *SigV4, not %T", az)
	sig.Now = func() time.Time { return at }

	guards := map[string]remotesim.Guard{
		"right":        remotesim.RequireSigV4(creds, "execute-api", "eu-west-1"),
		"other key":    remotesim.RequireSigV4(aws.Credentials{AccessKeyID: "AKIDCOURIER", SecretAccessKey: "other"}, "execute-api", "eu-west-1"),
		"other region": remotesim.RequireSigV4(creds, "execute-api", "us-east-1"),
	}
	type verdict struct {
		guard string
		err   error
	}
	verdicts := make(chan verdict, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		for name, g := range guards {
			verdicts <- verdict{name, g(r, body)}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	check := func(body, sentBody string) map[string]error {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/prod/book-courier?debug=1", strings.NewReader(sentBody))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		require.NoError(t, az.Authorize(context.Background(), req, []byte(body)))
		auth := req.Header.Get("Authorization")
		require.True(t, strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDCOURIER/20261121/eu-west-1/execute-api/aws4_request, SignedHeaders="), auth)
		sum := sha256.Sum256([]byte(body))
		require.Equal(t, hex.EncodeToString(sum[:]), req.Header.Get("X-Amz-Content-Sha256"))
		require.Equal(t, "20261121T103000Z", req.Header.Get("X-Amz-Date"))
		require.Equal(t, "courier-session", req.Header.Get("X-Amz-Security-Token"))

		// The SDK's signer, given the same request and time, signs the same.
		again := req.Clone(context.Background())
		again.Header.Del("Authorization")
		require.NoError(t, v4.NewSigner().SignHTTP(context.Background(), creds, again,
			req.Header.Get("X-Amz-Content-Sha256"), "execute-api", "eu-west-1", at))
		require.Equal(t, auth, again.Header.Get("Authorization"))

		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		got := map[string]error{}
		for range guards {
			v := <-verdicts
			got[v.guard] = v.err
		}
		return got
	}

	got := check(`{"orderId":"f-1"}`, `{"orderId":"f-1"}`)
	require.NoError(t, got["right"], "the service verifies the signature")
	require.Error(t, got["other key"], "a signature of other credentials fails")
	require.Error(t, got["other region"], "a signature for another region fails")

	got = check(`{"orderId":"f-1"}`, `{"orderId":"f-2"}`)
	require.ErrorContains(t, got["right"], "the body is not the one signed")

	require.False(t, sig.Refresh(context.Background()), "the SDK renews a role's credentials itself")
	require.Equal(t, "Signature=abc", sig.Redact("Signature=abc"))

	none := &agentauth.SigV4{Service: "lambda", Region: "eu-west-1"}
	req := httptest.NewRequest(http.MethodPost, "http://fn.test/", nil)
	require.EqualError(t, none.Authorize(context.Background(), req, nil), "sigv4 for lambda: no AWS credentials")
}

// The credential stays with its service: a redirect to another host is not
// followed (it would carry X-Api-Key there) but answered as a refusal, and
// an answer that echoes the credential is passed on redacted. A secret
// stored with a trailing newline is the text before it.
func TestTheCredentialNeverLeavesItsService(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	id := s.secret("echo-key", "echo-v1\n")
	h := header(t, s.clients, workflow.Auth{Header: "X-Api-Key", Secret: id})

	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		_, _ = io.WriteString(w, `{"got":"`+r.Header.Get("X-Api-Key")+`"}`)
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, other.URL+"/picks", http.StatusTemporaryRedirect)
			return
		}
		require.Equal(t, "echo-v1", r.Header.Get("X-Api-Key"), "the stored value without its newline")
		_, _ = io.WriteString(w, `{"echo":"`+r.Header.Get("X-Api-Key")+`"}`)
	}))
	t.Cleanup(srv.Close)
	remote := &agent.HTTPRemote{Endpoint: srv.URL, Service: "warehouse", Auth: h, Client: srv.Client()}
	ctx := context.Background()

	out, err := remote.Apply(ctx, "picks", "k-1", []byte(`{}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"echo":"[redacted]"}`, string(out), "the answer goes on to the caller's reply queue")

	_, err = remote.Apply(ctx, "moved", "k-2", []byte(`{}`))
	require.True(t, agent.IsPermanent(err), "a redirect is a refusal: %v", err)
	require.Contains(t, err.Error(), "307")
	require.Zero(t, elsewhere.Load(), "nothing reached the other host")
}
