package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// PermanentError is a remote fault that no retry will fix (a 4xx-like answer).
type PermanentError struct {
	Status int
	Body   string
}

// Error says what the remote answered.
func (e *PermanentError) Error() string {
	return fmt.Sprintf("remote refused the request permanently (HTTP %d): %s", e.Status, e.Body)
}

// IsPermanent reports whether err is a *PermanentError.
func IsPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}

// Remote is the one remote service an Agent wraps.
type Remote interface {
	// Apply asks the service to run action (a step or an undo) with the
	// payload, applying its effect once for key.
	Apply(ctx context.Context, action, key string, payload []byte) ([]byte, error)
}

// HTTPRemote calls a remote service over HTTP: POST {Base}/v1/services/{Service}/{action}
// with an Idempotency-Key header.
type HTTPRemote struct {
	Base    string
	Service string
	Client  *http.Client
}

// Apply implements Remote. 2xx is success; 408, 429 and 5xx are transient;
// other 4xx are permanent.
func (r *HTTPRemote) Apply(ctx context.Context, action, key string, payload []byte) ([]byte, error) {
	u := r.Base + "/v1/services/" + url.PathEscape(r.Service) + "/" + url.PathEscape(action)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("build request to %s: %w", r.Service, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := r.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", r.Service, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	if err != nil {
		return nil, fmt.Errorf("read %s answer: %w", r.Service, err)
	}
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return body, nil
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		return nil, fmt.Errorf("%s answered HTTP %d (transient): %s", r.Service, s, bytes.TrimSpace(body))
	default:
		return nil, &PermanentError{Status: s, Body: string(bytes.TrimSpace(body))}
	}
}
