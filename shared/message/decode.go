// Package message defines every body the product puts on a queue (orders,
// scheduler work, agent requests and replies) and their strict decoders.
// A decoder's error is an *InvalidError: the message can never succeed and
// belongs in the dead-letter queue, with its Reason.
package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// InvalidError says why a message body was rejected.
type InvalidError struct{ Reason string }

// Error says why the message was rejected.
func (e *InvalidError) Error() string { return "invalid message: " + e.Reason }

// Invalid builds an *InvalidError from a format.
func Invalid(format string, args ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}

// IsInvalid reports whether err (or one it wraps) is an *InvalidError.
func IsInvalid(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie)
}

// decodeStrict decodes exactly one JSON object of at most max bytes into v,
// refusing unknown fields and trailing data.
func decodeStrict(body string, max int, v any) error {
	if len(body) > max {
		return Invalid("body is %d bytes, over the %d-byte limit", len(body), max)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Invalid("bad JSON: %s", describe(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Invalid("bad JSON: data after the object")
	}
	return nil
}

func describe(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("expected %s, not %s", te.Type, te.Value)
	}
	return err.Error()
}
