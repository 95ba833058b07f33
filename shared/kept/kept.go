// Package kept is the one boundary for what is kept of a value (an order,
// a step's result, an event's data), as Temporal's data converter and its
// codecs are one door for encryption and offloading. Keeping a value seals
// it under its order's data key if its order is sealed (shared/seal), then,
// if it is over the inline limit as it travels (Wire), keeps it in the
// payload bucket, a claim check in its place (shared/payload). Opening a
// value reads it back, checked against its claim check's size and SHA-256,
// and opens it: whole (Open, Document) or as a stream (Input).
//
// The other packages carry a kept value (Value) without looking inside it:
// this is the only package of the product that reads a claim check or
// opens sealed data, and the only one that reads which form a value is in
// (formOf, once, where a value enters: Stored). It also holds what an
// instance may read at once (Budget), which a document reserves before it
// is read.
package kept

import (
	"errors"

	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
)

// The sizes a value may have (shared/payload's).
const (
	// MaxBytes is the largest value: an order, a step's result, an event's
	// data.
	MaxBytes = payload.MaxBytes
	// DefaultInline is the largest value kept inline by default.
	DefaultInline = payload.DefaultInline
	// MinInline and MaxInline bound the inline setting; MaxInline is also
	// what a deployment without a payload bucket keeps inline.
	MinInline = payload.MinInline
	MaxInline = payload.MaxInline
)

// The members only the product writes in a value's JSON: a claim check's,
// sealed data's, and a sealed order's claim check's data key. A value from
// outside that holds one at its top is refused (Own), and so is an order.
const (
	CheckMember  = payload.Member
	SealedMember = seal.Member
	KeyMember    = seal.KeyMember
)

// S3 is the part of the S3 client a boundary uses.
type S3 = payload.API

// KMS is the part of the KMS client a boundary uses.
type KMS = seal.API

// Boundary keeps and opens the values of a deployment's orders: in its
// payload bucket, under its data key. A nil *Boundary keeps every value
// inline, up to MaxInline, and opens nothing sealed.
type Boundary struct {
	payloads *payload.Store // nil: no payload bucket, every value inline
	sealer   *seal.Sealer   // nil: nothing sealed, and nothing sealed opened
}

// New is a boundary that keeps values in p (nil: none, every value inline,
// up to MaxInline) and seals and opens them with s (nil: none).
func New(p *payload.Store, s *seal.Sealer) *Boundary { return &Boundary{payloads: p, sealer: s} }

// Payloads is a payload bucket for New: bucket, through api, keeping values
// up to inline bytes inline (0: DefaultInline). A bucket of "" keeps
// values up to inline and refuses a larger one (ErrNoBucket).
func Payloads(api S3, bucket string, inline int) *payload.Store {
	return payload.New(api, bucket, inline)
}

// Sealer is a sealer for New, under the KMS key keyID (an id, ARN or alias;
// "": one that only opens, each data key naming its KMS key).
func Sealer(api KMS, keyID string) *seal.Sealer { return seal.New(api, keyID) }

// Over is a boundary with b's sealer over bucket, through api (an
// operator's, writing to the bucket an order's claim checks name).
func (b *Boundary) Over(api S3, bucket string) *Boundary {
	return New(payload.New(api, bucket, 0), b.seals())
}

// Sealer is b's sealer (nil: none), for what seals a deployment's own
// secrets under the same key (flow.Namer).
func (b *Boundary) Sealer() *seal.Sealer { return b.seals() }

// Seals reports whether b has a data key: it seals what is made of a sealed
// order and opens sealed data.
func (b *Boundary) Seals() bool { return b.seals() != nil }

// HasBucket reports whether b keeps values over the inline limit in a
// payload bucket.
func (b *Boundary) HasBucket() bool { return b.store() != nil && b.payloads.Bucket() != "" }

// Bucket is b's payload bucket ("": none).
func (b *Boundary) Bucket() string { return b.store().Bucket() }

// Inline is the largest value b keeps inline, as it travels.
func (b *Boundary) Inline() int { return b.store().Inline() }

// Max is the largest value b keeps, as Seal makes it (Sealed.Len): without
// a payload bucket, MaxInline.
func (b *Boundary) Max() int { return b.store().Max() }

func (b *Boundary) store() *payload.Store {
	if b == nil {
		return nil
	}
	return b.payloads
}

func (b *Boundary) seals() *seal.Sealer {
	if b == nil {
		return nil
	}
	return b.sealer
}

// ErrNoBucket is a value that must be kept in the payload bucket (over the
// inline limit, or sealed in the object form) where there is none.
var ErrNoBucket = payload.ErrNoBucket

// NoKey reports whether err is sealed data met by a function with no data
// key to open or seal it (its configuration lags its deployment's): given
// back, it is tried again on one that has it.
func NoKey(err error) bool {
	var e *seal.Error
	return errors.As(err, &e) && e.NoKey
}

// Broken reports whether err says a value cannot be read as it was kept,
// now or after any try again: its object gone or holding other bytes, a
// claim check not of its order, sealed data that does not open (a
// function with no key at all aside: NoKey), or a document over its
// function's budget (*DocumentError).
func Broken(err error) bool {
	var lost *payload.Error
	var broken *seal.Error
	var large *DocumentError
	return errors.As(err, &lost) || errors.As(err, &broken) && !broken.NoKey || errors.As(err, &large)
}
