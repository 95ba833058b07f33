// Package message defines every body the product puts on a queue (orders,
// scheduler work, agent requests and replies, status notifications) and their
// strict decoders. A decoder's error is an *InvalidError: the message can
// never succeed and belongs in the dead-letter queue, with its Reason.
//
// Strict means one meaning per message: a body that two readers could take
// two ways is refused. The decoders are go-json-experiment/json (the coming
// encoding/json/v2), which refuses a member name twice in one object at any
// depth (encoding/json keeps the last, other readers the first), matches
// names exactly (encoding/json also takes "ORDERID" for "orderId"), and
// refuses invalid UTF-8 (encoding/json replaces it), unknown members and
// data after the value.
package message

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sas-go/sas/shared/workflow"
)

// InvalidError says why a message body was rejected.
type InvalidError struct {
	Reason string
	noID   bool // an order without its id (MissingID)
}

// MissingID reports whether err refuses an order for the id it lacks (its
// workflow's id field): a reader that did not know the workflows may
// have read it by another.
func MissingID(err error) bool {
	var ie *InvalidError
	return errors.As(err, &ie) && ie.noID
}

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
// refusing unknown and repeated members, names in another case, invalid
// UTF-8 and trailing data.
func decodeStrict(body string, max int, v any) error {
	if len(body) > max {
		return Invalid("body is %d bytes, over the %d-byte limit", len(body), max)
	}
	return decode(body, v, jsonv2.RejectUnknownMembers(true))
}

// decodeHead decodes the members of body that head names, ignoring the
// others, with decodeStrict's other refusals: a kind given twice is refused
// before anyone reads it.
func decodeHead(body string, head any) error { return decode(body, head) }

func decode(body string, v any, opts ...jsonv2.Options) error {
	dec := jsontext.NewDecoder(strings.NewReader(body))
	if err := jsonv2.UnmarshalDecode(dec, v, opts...); err != nil {
		return Invalid("bad JSON: %s", describe(err))
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return Invalid("bad JSON: data after the object")
	}
	return nil
}

// ValidJSON reports whether b is one JSON value with one meaning: valid
// UTF-8, and no member name twice in an object. A service's answer that is
// not is kept as text, or the reply carrying it would be refused.
func ValidJSON(b []byte) bool { return jsontext.Value(b).IsValid() }

// describe says what is wrong in words that name the field.
func describe(err error) string {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) {
		field := fieldOf(se.JSONPointer)
		switch {
		case errors.Is(se.Err, jsonv2.ErrUnknownName):
			return fmt.Sprintf("unknown field %q", field)
		case se.GoType != nil && se.JSONKind != 0 && field != "":
			return fmt.Sprintf("field %q must be %s, not %s%s", field, se.GoType, kindName(se.JSONKind), value(se.JSONValue))
		case se.GoType != nil && se.JSONKind != 0:
			return fmt.Sprintf("the body must be a JSON object, not %s", kindName(se.JSONKind))
		}
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		return strings.TrimPrefix(syn.Error(), "jsontext: ")
	}
	return strings.TrimPrefix(strings.TrimPrefix(err.Error(), "json: "), "jsontext: ")
}

// fieldOf is the field a JSON pointer names, as a path ("/items/0/sku":
// "items[0].sku").
func fieldOf(p jsontext.Pointer) string { return workflow.FieldPath(slices.Collect(p.Tokens())) }

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return k.String()
}

func value(v jsontext.Value) string {
	if len(v) == 0 || len(v) > 32 {
		return ""
	}
	return " " + string(v)
}
