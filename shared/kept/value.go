package kept

import (
	"encoding/json"

	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
)

// Value is a value as the product keeps it: inline (sealed, if its order
// is), or the claim check of what the payload bucket keeps. The tables and
// the queues hold its bytes (JSON) as they are; the other packages carry it
// and weigh it, and only this one reads what is in it.
type Value struct {
	raw  json.RawMessage
	form form
}

// form is what a value is, read once (formOf).
type form struct {
	ref    *payload.Ref // the object its claim check names (nil: it is no claim check)
	sealed bool         // it is sealed data itself, in either form
	keyed  bool         // it names its order's data key: its order is sealed, and what is made of it is sealed too
}

// Stored is raw as a table's item or a message holds it: a value as kept.
func Stored(raw []byte) Value { return Value{raw: raw, form: formOf(raw)} }

// formOf is what raw is: a claim check, or sealed data, and whether it
// names its order's data key. It is the one place the product reads which
// form a value is in.
func formOf(raw []byte) form {
	if ref, ok := payload.Parse(raw); ok {
		return form{ref: &ref, keyed: seal.Covers(raw)} // a sealed order's check keeps its data key in its head
	}
	if seal.IsSealed(raw) {
		return form{sealed: true, keyed: seal.Covers(raw)}
	}
	return form{}
}

// JSON is v's bytes, to store or send as they are.
func (v Value) JSON() json.RawMessage { return v.raw }

// Weight is what v weighs once read back: its claim check's bytes, or its
// own. Read back, an object takes one buffer of its size, and a sealed one
// is opened in it: in the object form it is its plaintext and a few
// hundred bytes; in the JSON form (objects kept before the object form
// existed), four thirds of it.
func (v Value) Weight() int64 {
	if v.form.ref != nil {
		return int64(v.form.ref.Bytes)
	}
	return int64(len(v.raw))
}

// Bucket is the bucket v's claim check names ("": v is inline).
func (v Value) Bucket() string {
	if v.form.ref == nil {
		return ""
	}
	return v.form.ref.Bucket
}

// Own reports whether raw is in a form only the product makes: a claim
// check, or sealed data. A value from outside in it (a service's answer,
// an event's data, an operator's result) is refused: it would be read back,
// or opened, for the steps after it as if the product had made it.
func Own(raw []byte) bool {
	f := formOf(raw)
	return f.ref != nil || f.sealed
}
