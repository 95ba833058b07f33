package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Service calls the one local service every step calls (the product's
// remote simulator, answering at once, run by the parent process).
type Service struct {
	URL    string
	client *http.Client
}

// NewService is a client of the service at url.
func NewService(url string) *Service {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &Service{URL: url, client: &http.Client{Transport: t, Timeout: 20 * time.Second}}
}

// Call POSTs the order to the step's service as the product's Agent does:
// the same path, an Idempotency-Key of the order, the action and the round.
func (s *Service) Call(ctx context.Context, orderID, action, service, body string) error {
	url := fmt.Sprintf("%s/v1/services/%s/%s", s.URL, service, action)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", orderID+"/"+action+"/r1")
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s answered %s", action, service, resp.Status)
	}
	return nil
}
