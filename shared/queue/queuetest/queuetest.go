// Package queuetest has a stand-in for the handlers' queue senders, for
// benchmarks that measure a handler's own work.
package queuetest

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// EncodeOnly sends nothing: it encodes each message as the real sender does,
// and fails every rejection (a benchmark whose message is rejected measures
// the wrong path).
type EncodeOnly struct{}

// SendJSON encodes v.
func (EncodeOnly) SendJSON(_ context.Context, _ string, v any, _ time.Duration) error {
	_, err := json.Marshal(v)
	return err
}

// Reject fails with the reason.
func (EncodeOnly) Reject(_ context.Context, _, _, _, reason string) error {
	return errors.New("rejected: " + reason)
}
