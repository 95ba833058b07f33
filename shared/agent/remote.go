package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/workflow"
)

// PermanentError is a remote fault that no retry will fix (a 4xx-like answer).
type PermanentError struct {
	Status int
	Body   string
	// Cause, of a step refused before its call (Status 0), is what Body
	// says (a jq expression's *workflow.ExpressionError, say).
	Cause error
}

// Unwrap is e's cause.
func (e *PermanentError) Unwrap() error { return e.Cause }

// Error says what the remote answered.
func (e *PermanentError) Error() string {
	if e.Status == 0 { // no call: the step could not be given its input
		return e.Body
	}
	return fmt.Sprintf("remote refused the request permanently (HTTP %d): %s", e.Status, e.Body)
}

// IsPermanent reports whether err is a *PermanentError.
func IsPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}

// Remote is the one remote service an Agent wraps. An Agent written in Go
// (an agent its workflow file marks custom: true) is a Remote and a one-line
// main; see functions/loyalty.
type Remote interface {
	// Apply asks the service to run action (a step's or an undo's) with the
	// payload (its input: by default the step's document, the order and the
	// results before it, as JSON), applying its effect once for key: every
	// attempt of one action of one order in one round has the same key. An
	// async step's service takes CallbackToken(ctx) and answers later.
	// A *PermanentError refuses the step for good (its completed
	// predecessors are undone); any other error is transient and retried
	// until the step's CompleteBy.
	Apply(ctx context.Context, action, key string, payload []byte) ([]byte, error)
}

// Authorizer puts an Agent's credentials on a request to its service.
type Authorizer interface {
	// Authorize adds the credentials to req, whose body is body.
	Authorize(ctx context.Context, req *http.Request, body []byte) error
	// Refresh reads the credentials again (the service refused them: they
	// may have been rotated). It reports false if it read nothing new.
	Refresh(ctx context.Context) bool
	// Redact removes the credentials from text (an answer that echoes them).
	Redact(text string) string
}

// HTTPRemote calls a remote service over HTTP: POST {Endpoint}/{action},
// the order as the body, with an Idempotency-Key header and the agent's
// credentials, if it has any.
type HTTPRemote struct {
	Endpoint string // the base URL actions are POSTed under
	Service  string // the agent's name, for errors
	// Transient are the HTTP statuses worth retrying (nil: 408, 429 and
	// 5xx); any other non-2xx status refuses the step for good.
	Transient []int
	// Refuse are statuses that refuse the step for good even with
	// credentials, where a 401 or 403 is otherwise taken as a refusal of
	// the credentials (workflow.Agent.Refuse).
	Refuse []int
	Auth   Authorizer // nil: none
	Client *http.Client
	Log    *slog.Logger // nil: nothing logged
}

// Apply implements Remote. 2xx is success; a transient status is retried;
// other statuses are permanent. With credentials, a 401 or 403 not listed in
// Refuse has the credentials read again and the call made once more; refused
// again, it is transient (the service did not refuse the step: it did not
// know the caller), so the order waits rather than being undone for a
// credential that an operator can fix.
func (r *HTTPRemote) Apply(ctx context.Context, action, key string, payload []byte) ([]byte, error) {
	return r.applyParts(ctx, action, key, [][]byte{payload})
}

// ApplyInput implements Streamer: Apply with the input read as it is sent.
// An agent with credentials, which may sign the body, takes no stream.
func (r *HTTPRemote) ApplyInput(ctx context.Context, action, key string, in *Input) ([]byte, error) {
	if r.Auth != nil {
		return nil, fmt.Errorf("call %s: an agent with credentials signs its input, and takes no stream", r.Service)
	}
	return r.apply(ctx, action, key, requestBody{size: in.Size, open: func() (io.ReadCloser, error) { return in.Open(ctx) }}, nil)
}

// applyParts is Apply with its payload in pieces, sent one after another.
func (r *HTTPRemote) applyParts(ctx context.Context, action, key string, parts [][]byte) ([]byte, error) {
	var signed []byte
	if r.Auth != nil {
		// Its credentials may sign the body (SigV4): one piece.
		signed = callInput{parts: parts}.bytes()
		parts = [][]byte{signed}
	}
	body := requestBody{open: func() (io.ReadCloser, error) {
		readers := make([]io.Reader, len(parts))
		for i, p := range parts {
			readers[i] = bytes.NewReader(p)
		}
		return io.NopCloser(io.MultiReader(readers...)), nil
	}}
	for _, p := range parts {
		body.size += int64(len(p))
	}
	return r.apply(ctx, action, key, body, signed)
}

// requestBody is a request's body: size bytes, read from the start by
// each open.
type requestBody struct {
	size int64
	open func() (io.ReadCloser, error)
}

// apply makes the call with body, signed (the body's bytes, for the
// credentials; nil: none) and reads its answer.
func (r *HTTPRemote) apply(ctx context.Context, action, key string, payload requestBody, signed []byte) ([]byte, error) {
	s, body, retryAfter, err := r.post(ctx, action, key, payload, signed)
	if err == nil && r.credentialRefusal(s) && r.Auth.Refresh(ctx) {
		if r.Log != nil {
			r.Log.Info("the service refused the agent's credentials: read again, the call made once more",
				"service", r.Service, "status", s, "key", key)
		}
		if err := AwaitTurn(ctx); err != nil { // a second request takes its turn too
			return nil, err
		}
		s, body, retryAfter, err = r.post(ctx, action, key, payload, signed)
	}
	if err != nil {
		return nil, err
	}
	if s >= 200 && s < 300 {
		if r.Auth != nil { // a service that echoes the credential does not pass it on
			return []byte(r.Auth.Redact(string(body))), nil
		}
		return body, nil // as read: a 16 MB answer is not copied
	}
	text := quote(ctx, body, r.Auth)
	switch {
	case r.credentialRefusal(s):
		return nil, &statusError{fmt.Sprintf("%s refused the agent's credentials (HTTP %d), read again: %s", r.Service, s, text)}
	case r.transient(s) && retryAfter > 0 && (s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable):
		return nil, &SlowDownError{Status: s, After: retryAfter, Text: fmt.Sprintf("%s answered HTTP %d (transient), Retry-After %s: %s",
			r.Service, s, retryAfter, text)}
	case r.transient(s):
		return nil, &statusError{fmt.Sprintf("%s answered HTTP %d (transient): %s", r.Service, s, text)}
	case s == http.StatusNotFound || s == http.StatusMethodNotAllowed:
		// Most often the endpoint is not the service's base URL: say where
		// the call went (without a query, which may carry a secret).
		u, _ := url.Parse(r.url(action))
		if u != nil {
			u.RawQuery, u.User = "", nil
		}
		return nil, &PermanentError{Status: s, Body: fmt.Sprintf("%s (POST %s: an action is POSTed to the agent's endpoint/ACTION; "+
			"is %s's endpoint its service's base URL?)", text, u, r.Service)}
	default:
		return nil, &PermanentError{Status: s, Body: text}
	}
}

// statusError is a transient answer of the service: an HTTP status it
// answered (the call reached it, whatever its input's reading met).
type statusError struct{ text string }

func (e *statusError) Error() string { return e.text }

// answeredBy reports whether err is an answer of the service itself (a
// status: a refusal, a slow-down, a transient one), not a call that broke
// off before one came.
func answeredBy(err error) bool {
	var slow *SlowDownError
	var status *statusError
	return IsPermanent(err) || errors.As(err, &slow) || errors.As(err, &status)
}

// url is where action is POSTed: under the endpoint's path, its query
// kept (a service that takes a code in its query, as some do).
func (r *HTTPRemote) url(action string) string {
	u, err := url.Parse(r.Endpoint)
	if err != nil { // a loaded endpoint is a URL (workflow.Agent's check)
		return strings.TrimSuffix(r.Endpoint, "/") + "/" + url.PathEscape(action)
	}
	return u.JoinPath(action).String()
}

// post makes the call: its status, its body (one byte past the answer
// limit at most), and how long its Retry-After asks to wait (0: none).
func (r *HTTPRemote) post(ctx context.Context, action, key string, payload requestBody, signed []byte) (int, []byte, time.Duration, error) {
	body, err := payload.open()
	if err != nil {
		return 0, nil, 0, fmt.Errorf("call %s: read its input: %w", r.Service, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url(action), body)
	if err != nil {
		body.Close()
		return 0, nil, 0, fmt.Errorf("build request to %s: %w", r.Service, err)
	}
	req.ContentLength = payload.size
	req.GetBody = payload.open // a retry of the transport's
	if req.ContentLength == 0 {
		body.Close()
		req.Body, req.GetBody = http.NoBody, nil // none (the body's length is not known to net/http)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	if t := CallbackToken(ctx); t != "" {
		req.Header.Set("X-Callback-Token", t) // an async step's: its answer comes later, with it
	}
	if dl, ok := ctx.Deadline(); ok {
		// After it the Agent has given up on the call, and the step may be
		// undone: a service applies nothing it receives past it.
		req.Header.Set("X-Request-Deadline", dl.UTC().Format(time.RFC3339Nano))
	}
	if r.Auth != nil {
		if err := r.Auth.Authorize(ctx, req, signed); err != nil {
			req.Body.Close()
			return 0, nil, 0, fmt.Errorf("credentials for %s: %w", r.Service, err)
		}
	}
	// A redirect is not followed: Go would carry a header credential
	// (X-Api-Key) to the other host, and turn a 301-303 POST into a GET. The
	// 3xx is answered as it is: a refusal unless listed as transient.
	c := *r.Client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("call %s: %w", r.Service, err)
	}
	defer resp.Body.Close()
	// One byte past the answer limit: an answer over it is known to be over
	// (and refused as oversized), not cut to a valid-looking size.
	answer, err := readAnswer(resp, int64(answerLimit(ctx))+1)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("read %s answer: %w", r.Service, err)
	}
	return resp.StatusCode, answer, retryAfter(resp.Header.Get("Retry-After"), time.Now()), nil
}

// readAnswer reads at most limit bytes of resp's body into one buffer of
// its Content-Length, when the service says it (io.ReadAll grows its buffer
// by half again each time: a 16 MB answer would take about twice that
// while it is read, where an Agent has 128 MB).
func readAnswer(resp *http.Response, limit int64) ([]byte, error) {
	n := resp.ContentLength
	if n <= 0 || n >= limit {
		return io.ReadAll(io.LimitReader(resp.Body, limit))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, body); err != nil {
		return nil, err
	}
	// A body longer than it said (a broken server) is read on, as any,
	// up to the limit.
	more, err := io.ReadAll(io.LimitReader(resp.Body, limit-n))
	if len(more) > 0 {
		body = append(body, more...)
	}
	return body, err
}

// retryAfter reads a Retry-After header (seconds, or an HTTP date) as a
// wait from now: 0 if there is none it can read, at most MaxRetryAfter.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n > 0 {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// MaxRetryAfter bounds the back-off a service's Retry-After asks for (SQS
// delays a message by 15 minutes at most).
const MaxRetryAfter = 15 * time.Minute

// SlowDownError is a transient answer that says when to call again: a 429
// or 503 with a Retry-After. Every instance of the agent holds its calls
// until then (flow.Store.SlowDown), and the attempt waits without counting a
// failure.
type SlowDownError struct {
	Status int
	After  time.Duration
	Text   string
}

func (e *SlowDownError) Error() string { return e.Text }

// credentialRefusal reports whether status says the service did not take
// the agent's credentials: a 401 or 403 to an agent that has some, unless the
// workflow lists it as a refusal of the step.
func (r *HTTPRemote) credentialRefusal(status int) bool {
	return r.Auth != nil && (status == http.StatusUnauthorized || status == http.StatusForbidden) && !slices.Contains(r.Refuse, status)
}

func (r *HTTPRemote) transient(status int) bool {
	if r.Transient != nil {
		return slices.Contains(r.Transient, status)
	}
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// answerLimitKey carries the largest answer a call's caller keeps.
type answerLimitKey struct{}

// sealedDataKey marks a call for an order whose data is sealed.
type sealedDataKey struct{}

// withSealedData is ctx whose call is for an order whose data is sealed
// (shared/seal): what its service answers is data of the order, which a
// reason does not quote.
func withSealedData(ctx context.Context) context.Context {
	return context.WithValue(ctx, sealedDataKey{}, true)
}

// quote is what a reason quotes of a service's answer body: at most
// message.MaxReasonQuote bytes of it, with any credential of auth (nil:
// none) taken out; of an order whose data is sealed, only its length (the
// reason is kept, logged and alerted in clear). The whole answer is in the
// service's own logs.
func quote(ctx context.Context, body []byte, auth Authorizer) string {
	body = bytes.TrimSpace(body)
	if sealed, _ := ctx.Value(sealedDataKey{}).(bool); sealed {
		return fmt.Sprintf("(%d bytes, not quoted: the order's data is sealed)", len(body))
	}
	if auth == nil { // nothing to take out: no copy of a 16 MB answer for its first kilobyte
		body = body[:min(len(body), 4*message.MaxReasonQuote)]
	}
	text := string(body) // with credentials, whole: one cut in two would not be redacted
	if auth != nil {
		text = auth.Redact(text)
	}
	return message.Clip(text, message.MaxReasonQuote)
}

// withAnswerLimit is ctx whose call's answer is read up to n bytes and one
// more (its workflow's result limit): a service that answers more has it
// refused as oversized, never held.
func withAnswerLimit(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, answerLimitKey{}, n)
}

// answerLimit is the answer limit ctx carries: the largest result limit if
// none.
func answerLimit(ctx context.Context) int {
	if n, ok := ctx.Value(answerLimitKey{}).(int); ok && n > 0 {
		return min(n, workflow.MaxResultLimit)
	}
	return workflow.MaxResultLimit
}
