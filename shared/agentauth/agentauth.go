// Package agentauth gives an Agent the credentials its workflow file
// declares for its service: a header whose value is a Secrets Manager secret
// or an SSM SecureString parameter (read at cold start, cached, read again
// when the service refuses it), or a SigV4 signature with the function's
// role. A credential's value never leaves the Authorizer: not in an error,
// a log line, a reply or the state store.
package agentauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/workflow"
)

// Clients reach where credentials are kept. The SDK's clients bring its
// retries (throttling, 5xx) and its endpoint settings (AWS_ENDPOINT_URL_SSM).
type Clients struct {
	Secrets    *secretsmanager.Client
	Parameters *ssm.Client
	AWS        aws.Config // the function's role, for SigV4
}

// NewClients makes the clients from an SDK configuration.
func NewClients(cfg aws.Config) Clients {
	return Clients{Secrets: secretsmanager.NewFromConfig(cfg), Parameters: ssm.NewFromConfig(cfg), AWS: cfg}
}

// For returns the Authorizer of an agent (nil for an agent without auth),
// its header's value read once now: a secret that cannot be read fails the
// cold start, with the secret's name and never its value.
func For(ctx context.Context, c Clients, a workflow.Agent) (agent.Authorizer, error) {
	switch {
	case a.Auth == nil:
		return nil, nil
	case a.Auth.SigV4 != nil:
		return &SigV4{Credentials: c.AWS.Credentials, Service: a.Auth.SigV4.Service, Region: a.Auth.SigV4.Region}, nil
	}
	h := &Header{Name: a.Auth.Header, Prefix: a.Auth.Prefix}
	switch {
	case a.Auth.Secret != "":
		h.Read, h.Source = secretReader(c.Secrets, a.Auth.Secret), "secret "+a.Auth.Secret
	case a.Auth.Parameter != "":
		h.Read, h.Source = parameterReader(c.Parameters, a.Auth.Parameter), "parameter "+a.Auth.Parameter
	default:
		return nil, fmt.Errorf("agent %s: auth names no secret, parameter or sigv4", a.Name)
	}
	if _, err := h.value(ctx); err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.Name, err)
	}
	return h, nil
}

func secretReader(c *secretsmanager.Client, id string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		out, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &id})
		if err != nil {
			return "", err
		}
		if out.SecretString == nil && len(out.SecretBinary) > 0 {
			return "", errors.New("it is a binary secret: a header needs a SecretString")
		}
		return aws.ToString(out.SecretString), nil
	}
}

// parameterReader reads an SSM SecureString parameter, decrypted.
func parameterReader(c *ssm.Client, name string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		out, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: &name, WithDecryption: aws.Bool(true)})
		if err != nil {
			return "", err
		}
		if out.Parameter == nil {
			return "", errors.New("ssm GetParameter answered no parameter")
		}
		return aws.ToString(out.Parameter.Value), nil
	}
}

// DefaultRefreshEvery is how often, at most, a Header whose RefreshEvery is
// zero reads a refused credential again, across an instance's calls.
const DefaultRefreshEvery = 10 * time.Second

// keepRetired is how many values a Header still redacts after a rotation
// replaced them: a call made with the old value may answer after the new
// one was read, and Secrets Manager keeps the previous version valid.
const keepRetired = 3

// Header puts a kept secret in a header: Authorization: Bearer <token>,
// X-Api-Key: <key>. Its methods are safe for concurrent use; its fields
// are set before it is shared and not changed after.
type Header struct {
	Name   string // the header
	Prefix string // put before the value
	Source string // where the value is kept, for errors: "secret prod/warehouse"
	// Read reads the value from where it is kept. Its error must not hold
	// the value (an SDK's error does not).
	Read func(ctx context.Context) (string, error)
	// RefreshEvery bounds how often Refresh reads the value again: a
	// Refresh less than RefreshEvery after the last read (the cold start's
	// included) reads nothing. Zero means DefaultRefreshEvery.
	RefreshEvery time.Duration
	Now          func() time.Time // default time.Now

	mu      sync.Mutex
	cached  string
	retired []string // values read before cached, newest last, for Redact
	readAt  time.Time
}

// Authorize implements agent.Authorizer.
func (h *Header) Authorize(ctx context.Context, req *http.Request, _ []byte) error {
	v, err := h.value(ctx)
	if err != nil {
		return err
	}
	req.Header.Set(h.Name, h.Prefix+v)
	return nil
}

// value is the cached value, read if there is none.
func (h *Header) value(ctx context.Context) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cached != "" {
		return h.cached, nil
	}
	return h.read(ctx)
}

// read reads the value; h.mu is held. Its error names the source only: an
// SDK error carries no secret.
func (h *Header) read(ctx context.Context) (string, error) {
	v, err := h.Read(ctx)
	h.readAt = h.now()
	if err != nil {
		return "", fmt.Errorf("read %s: %w", h.Source, err)
	}
	// A value stored from a file often ends in a newline, which no header
	// may carry: the credential is the text around it.
	v = strings.TrimSpace(v)
	if v == "" {
		return "", fmt.Errorf("read %s: it is empty", h.Source)
	}
	if h.cached != "" && h.cached != v {
		h.retired = append(h.retired, h.cached)
		if len(h.retired) > keepRetired {
			h.retired = h.retired[len(h.retired)-keepRetired:]
		}
	}
	h.cached = v
	return v, nil
}

// Refresh implements agent.Authorizer: the value is read again, unless it
// was read less than RefreshEvery ago. It reports whether it read a value
// other than the cached one; a failed read keeps the cached value.
func (h *Header) Refresh(ctx context.Context) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	every := h.RefreshEvery
	if every <= 0 {
		every = DefaultRefreshEvery
	}
	if h.now().Sub(h.readAt) < every {
		return false
	}
	old := h.cached
	v, err := h.read(ctx)
	return err == nil && v != old
}

// Redact implements agent.Authorizer: the value, and the few it replaced
// when it was rotated, become [redacted].
func (h *Header) Redact(text string) string {
	h.mu.Lock()
	values := append([]string{h.cached}, h.retired...)
	h.mu.Unlock()
	// The longest first: a value inside another is not left half replaced.
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	for _, v := range values {
		if v != "" {
			text = strings.ReplaceAll(text, v, "[redacted]")
		}
	}
	return text
}

func (h *Header) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// SigV4 signs requests with the function's role, for IAM-authorised
// endpoints: API Gateway (service execute-api) and Lambda function URLs
// (service lambda).
type SigV4 struct {
	Credentials aws.CredentialsProvider
	Service     string
	Region      string
	Signer      *v4.Signer       // default v4.NewSigner()
	Now         func() time.Time // default time.Now
}

// Authorize implements agent.Authorizer.
func (s *SigV4) Authorize(ctx context.Context, req *http.Request, body []byte) error {
	if s.Credentials == nil {
		return fmt.Errorf("sigv4 for %s: no AWS credentials", s.Service)
	}
	creds, err := s.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("sigv4 for %s: %w", s.Service, err)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	signer, now := s.Signer, time.Now
	if signer == nil {
		signer = v4.NewSigner()
	}
	if s.Now != nil {
		now = s.Now
	}
	return signer.SignHTTP(ctx, creds, req, hash, s.Service, s.Region, now())
}

// Refresh implements agent.Authorizer: the SDK renews the role's
// credentials itself.
func (s *SigV4) Refresh(context.Context) bool { return false }

// Redact implements agent.Authorizer: a signature is no secret.
func (s *SigV4) Redact(text string) string { return text }
