package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sas-go/sas/shared/kept"
)

// ErrTooLarge is Encode's error for a body over its limit.
var ErrTooLarge = errors.New("message over its limit")

// Encode is v as the product puts every message on the wire (queue.Sender,
// an Agent's place in a key's line, an alert, an operator's event), so that
// what travels is what was weighed:
//   - nothing is escaped for HTML: encoding/json's Marshal writes <, > and
//     & as \u003c, \u003e and \u0026 (six bytes for one) in every string,
//     and inside a json.RawMessage too, whose compaction also escapes
//     U+2028 and U+2029 (six bytes for three). Here a RawMessage (an order,
//     a result, kept inline by kept.Boundary.Offload on its size) travels byte
//     for byte, less its insignificant spaces;
//   - a string field is escaped as encoding/json always does: a control
//     byte as \u0001 and an invalid UTF-8 byte as \ufffd (six bytes for
//     one), U+2028 and U+2029 as \u2028 and \u2029 (six for three), " and \
//     with a backslash (MaxEnvelopeBytes counts them so);
//   - U+FFFE and U+FFFF, which SQS refuses in a body and JSON holds only in
//     a string, are escaped (kept.Wire);
//   - a body that is not valid UTF-8 (a RawMessage holding invalid bytes;
//     its raw control bytes are invalid JSON, an error already) is an
//     error: the SDK would send U+FFFD in their place, three bytes for one,
//     and its reader would read other data.
//
// A body over limit bytes (0: no limit) is an error wrapping ErrTooLarge
// that names both: a message its reader would refuse for its size (its
// decoder's limit) is never sent to be refused there.
func Encode(v any, limit int) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode a %T: %w", v, err)
	}
	body := kept.Wire(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("encode a %T: it holds bytes that are not UTF-8 (a raw JSON value not checked)", v)
	}
	if limit > 0 && len(body) > limit {
		return nil, fmt.Errorf("%w: a %T of %d bytes encoded, over the %d-byte limit of its reader", ErrTooLarge, v, len(body), limit)
	}
	return body, nil
}
