// Package payload keeps, in an S3 bucket, what is too large to travel in a
// queue message or to sit in a DynamoDB item (an order, a step's result,
// an event's data), and makes the claim check that stands in its place: a
// small JSON object that names the object, its size and its SHA-256. It is
// a codec of shared/kept, the one boundary for what is kept of a value,
// which decides what is kept here (over the inline limit, as it travels)
// and reads it back by its check; no other package of the product uses it
// but shared/offload, which reads the bodies senders offload here.
//
// It knows nothing of sealed data (shared/seal): a body in the sealed
// object form is kept as it is given, under a key that says so.
package payload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The sizes a payload may have.
const (
	// MaxBytes is the largest payload: an order, a step's result, an
	// event's data.
	MaxBytes = 16 << 20
	// DefaultInline is the largest payload kept inline by default: an order
	// and a result at it, with their envelope, fit one SQS message (256 KB)
	// and one DynamoDB item (400 KB) with room to spare.
	DefaultInline = 32 << 10
	// MinInline and MaxInline bound the inline setting.
	MinInline = 1 << 10
	MaxInline = 64 << 10
	// MaxStoredBytes is the largest body the store takes: a payload at
	// MaxBytes sealed in the JSON form (shared/seal: its ciphertext in
	// base64, four thirds of it, and its envelope), as objects kept before
	// the object form existed are (one sealed now is in the object form:
	// its plaintext and a few hundred bytes).
	MaxStoredBytes = MaxBytes/3*4 + 16<<10
)

// Member is the member of a claim check that names its object.
const Member = "$sasPayload"

// Ref is where a payload is kept.
type Ref struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"` // hex
}

// String names the object as s3://bucket/key.
func (r Ref) String() string { return "s3://" + r.Bucket + "/" + r.Key }

// Check is the claim check of ref, with head's members beside it (an
// order's orderId, workflow and replyQueue, which the product reads without
// the payload; none: nil).
func Check(ref Ref, head map[string]string) json.RawMessage {
	m := map[string]any{Member: ref}
	for k, v := range head {
		if v != "" {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m) // strings and a struct of them: no error
	return b
}

// checkMarker is how every check's JSON names its object; a payload without
// it is no check (a quick test before any decoding).
var checkMarker = []byte(`"` + Member + `":`)

// Parse returns the Ref raw is a claim check of; ok is false for a payload
// that is not one.
func Parse(raw []byte) (Ref, bool) {
	if len(raw) > 4096 || !bytes.Contains(raw, checkMarker) {
		return Ref{}, false
	}
	var c map[string]json.RawMessage
	if json.Unmarshal(raw, &c) != nil {
		return Ref{}, false
	}
	var ref Ref
	if json.Unmarshal(c[Member], &ref) != nil || ref.Bucket == "" || ref.Key == "" {
		return Ref{}, false
	}
	return ref, true
}

// API is the part of the S3 client the store uses.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	CopyObject(ctx context.Context, in *s3.CopyObjectInput, opts ...func(*s3.Options)) (*s3.CopyObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// Store keeps payloads in one bucket. A nil *Store keeps every payload
// inline, and cannot read a check.
type Store struct {
	api    API
	bucket string
	inline int
}

// New is a store over bucket keeping payloads up to inline bytes inline (0:
// DefaultInline).
func New(api API, bucket string, inline int) *Store {
	if inline <= 0 {
		inline = DefaultInline
	}
	return &Store{api: api, bucket: bucket, inline: inline}
}

// Inline is the largest payload kept inline: MaxInline for a nil store,
// which keeps every payload so.
func (s *Store) Inline() int {
	if s == nil {
		return MaxInline
	}
	return s.inline
}

// Max is the largest payload the store takes, as given (sealed in the JSON
// form, a payload of MaxBytes is MaxStoredBytes), or, without a bucket,
// MaxInline.
func (s *Store) Max() int {
	if s == nil {
		return MaxInline
	}
	return MaxStoredBytes
}

// Bucket is the store's bucket ("" for a nil store).
func (s *Store) Bucket() string {
	if s == nil {
		return ""
	}
	return s.bucket
}

// OrderPrefix is where an order's payloads are kept: every key of the order
// starts with it.
func OrderPrefix(orderID string) string { return OrdersPrefix + orderID + "/" }

// OrdersPrefix is where the product keeps the orders' payloads (no sender
// writes there).
const OrdersPrefix = "orders/"

// Key is the key of a payload of an order: under its prefix, by what it is
// (order, a record's result) and its SHA-256, so that a write tried again
// writes the same object.
func Key(orderID, what string, sum [sha256.Size]byte) string {
	return OrderPrefix(orderID) + what + "/" + hex.EncodeToString(sum[:])
}

// SealedSuffix ends the key of an object sealed in the object form: its
// name says it is not JSON (Renew labels it so).
const SealedSuffix = ".sealed"

// ErrNoBucket is a payload that must be kept in the bucket (over the
// inline limit, or sealed in the object form) where there is none.
var ErrNoBucket = errors.New("no payload bucket")

// In is s over bucket instead of its own.
func (s *Store) In(bucket string) *Store {
	c := *s
	c.bucket = bucket
	return &c
}

// Put keeps body as what of the order; sealed says it is in the sealed
// object form (shared/seal), not JSON: its key ends SealedSuffix.
func (s *Store) Put(ctx context.Context, orderID, what string, body []byte, sealed bool) (Ref, error) {
	if s.Bucket() == "" {
		return Ref{}, fmt.Errorf("keep %d bytes of %s's %s: %w (inline at most %d)", len(body), orderID, what, ErrNoBucket, s.Inline())
	}
	if len(body) > MaxStoredBytes {
		return Ref{}, fmt.Errorf("keep %d bytes of %s's %s: over the %d-byte limit of a payload", len(body), orderID, what, MaxStoredBytes)
	}
	sum := sha256.Sum256(body)
	ref := Ref{Bucket: s.bucket, Key: Key(orderID, what, sum), Bytes: len(body), SHA256: hex.EncodeToString(sum[:])}
	if sealed {
		ref.Key += SealedSuffix
	}
	_, err := s.api.PutObject(ctx, &s3.PutObjectInput{Bucket: &ref.Bucket, Key: &ref.Key, Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String(contentType(ref.Key))})
	if err != nil {
		return Ref{}, fmt.Errorf("keep %s's %s (%d bytes) at %s: %w", orderID, what, len(body), ref, err)
	}
	return ref, nil
}

// contentType is the type of the object at key: a sealed object form's
// bytes, or JSON.
func contentType(key string) string {
	if strings.HasSuffix(key, SealedSuffix) {
		return "application/octet-stream"
	}
	return "application/json"
}

// Belongs says whether ref, read from a claim check in order orderID's
// data, may be read back for it: a check that names another bucket, or
// another order's object (a forged one: a service's answer, an event's
// data), is an *Error, read from nowhere. A nil store reads nothing, and
// says so when it is asked to (Get, Open).
func (s *Store) Belongs(orderID string, ref Ref) error {
	if s != nil && (ref.Bucket != s.bucket || !strings.HasPrefix(ref.Key, OrderPrefix(orderID))) {
		return &Error{Ref: ref, Reason: fmt.Sprintf("not a payload of order %s in this deployment's bucket", orderID)}
	}
	return nil
}
