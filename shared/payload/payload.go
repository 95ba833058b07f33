// Package payload keeps what is too large to travel in a queue message or to
// sit in a DynamoDB item (an order, a step's result, an event's data) in an
// S3 bucket, and a claim check in its place: a small JSON object that names
// the object, its size and its SHA-256. Whoever needs the payload itself
// (the Agent, for its call) reads it back by the check; everything else (the
// queues, the tables, the Scheduler) carries the check.
//
// A sealed order's payloads (shared/seal) are kept in the sealed object
// form: the ciphertext as it is, no base64, so that one weighs its
// plaintext and a few hundred bytes (Weight), read back into one buffer
// and opened there.
//
// The bodies senders offload as the AWS SQS Extended Client libraries do
// are shared/offload's (it reads them with Fetch).
package payload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/sas-go/sas/shared/seal"
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
	// the object form existed are (Seal keeps one in the object form: its
	// plaintext and a few hundred bytes).
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

// IsCheck reports whether raw is a claim check.
func IsCheck(raw []byte) bool {
	_, ok := Parse(raw)
	return ok
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

// Seal is plain sealed under k (its order's data key) in the form the
// store keeps it in: inline, the JSON form with head's members beside it
// (seal.Key.Seal), if that fits the inline limit, or if the store has no
// bucket (the caller refuses one over Max); otherwise the object form
// (seal.Key.SealObject), which Keep puts in the bucket whatever its size.
func (s *Store) Seal(k seal.Key, plain []byte, head map[string]string) ([]byte, error) {
	if s == nil || len(plain) <= s.Inline() { // its JSON form is longer: else it cannot fit
		b, err := k.Seal(plain, head)
		if err != nil || s == nil || len(b) <= s.Inline() {
			return b, err
		}
	}
	return k.SealObject(plain)
}

// Keep returns body as it travels (Wire) if that fits inline, and
// otherwise keeps body as what of the order and returns its claim check
// (with head beside it); a body sealed in the object form (Seal) is always
// kept. What stays inline is weighed as it travels in a message
// (message.Encode writes a payload byte for byte): at most Inline bytes
// on the wire. A body over Max is an error: the caller refuses it before.
func (s *Store) Keep(ctx context.Context, orderID, what string, body []byte, head map[string]string) (json.RawMessage, error) {
	if !seal.IsObject(body) {
		if wire := Wire(body); len(wire) <= s.Inline() {
			return wire, nil
		}
	}
	ref, err := s.Put(ctx, orderID, what, body)
	if err != nil {
		return nil, err
	}
	return Check(ref, head), nil
}

// SealedSuffix ends the key of an object sealed in the object form: its
// name says it is not JSON (Renew labels it so).
const SealedSuffix = ".sealed"

// Put keeps body as what of the order (a sealed one as Seal makes it: in
// the object form, over the inline limit).
func (s *Store) Put(ctx context.Context, orderID, what string, body []byte) (Ref, error) {
	if s == nil {
		return Ref{}, fmt.Errorf("keep %d bytes of %s's %s: this deployment has no payload bucket (inline at most %d)",
			len(body), orderID, what, MaxInline)
	}
	if len(body) > MaxStoredBytes {
		return Ref{}, fmt.Errorf("keep %d bytes of %s's %s: over the %d-byte limit of a payload", len(body), orderID, what, MaxStoredBytes)
	}
	sum := sha256.Sum256(body)
	ref := Ref{Bucket: s.bucket, Key: Key(orderID, what, sum), Bytes: len(body), SHA256: hex.EncodeToString(sum[:])}
	if seal.IsObject(body) {
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

// Error is a payload that cannot be read back as it was kept: its object is
// gone, or holds other bytes. No try again changes it: the step that needs
// it fails.
type Error struct {
	Ref    Ref
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("payload %s: %s", e.Ref, e.Reason) }

// Resolve is the payload of order orderID raw is a claim check of, read
// back and checked against its size and SHA-256; raw itself if it is no
// check. A check that names another bucket, or another order's object (a
// forged one: a service's answer, an event's data), is an *Error, read
// from nowhere. A payload that is gone or not as kept is an *Error; an S3
// error otherwise is returned as it is (transient: try again).
func (s *Store) Resolve(ctx context.Context, orderID string, raw json.RawMessage) (json.RawMessage, error) {
	ref, ok, err := s.RefOf(orderID, raw)
	if !ok || err != nil {
		return raw, err
	}
	return s.Get(ctx, ref)
}

// RefOf is the Ref raw is a claim check of, if it is one (ok); a check
// that names another bucket, or another order's object, is an *Error.
func (s *Store) RefOf(orderID string, raw []byte) (ref Ref, ok bool, err error) {
	ref, ok = Parse(raw)
	if !ok {
		return ref, false, nil
	}
	if s != nil && (ref.Bucket != s.bucket || !strings.HasPrefix(ref.Key, OrderPrefix(orderID))) {
		return ref, true, &Error{Ref: ref, Reason: fmt.Sprintf("not a payload of order %s in this deployment's bucket", orderID)}
	}
	return ref, true, nil
}

// Open is the payload ref names as a stream, to be sent on as it is read
// (the Agent's call of a step whose input is its document): ref.Bytes long,
// each byte checked as it comes, and the last one given only once the whole
// has been checked against ref's SHA-256, so that a receiver that reads up
// to the length it was told never has bytes other than the kept ones. A
// payload that is gone, or holds other bytes, is an *Error (from Open, or
// from a Read); an S3 error otherwise is returned as it is (transient).
func (s *Store) Open(ctx context.Context, ref Ref) (io.ReadCloser, error) {
	if s == nil {
		return nil, &Error{Ref: ref, Reason: "this deployment has no payload bucket (payloadBucket) to read it from"}
	}
	if ref.Bytes <= 0 {
		return nil, &Error{Ref: ref, Reason: "its claim check names no bytes (the product keeps none inline-sized)"}
	}
	out, err := s.get(ctx, ref, "not found (deleted, or expired with its order's retention)")
	if err != nil {
		return nil, err
	}
	if n := aws.ToInt64(out.ContentLength); n > 0 && n != int64(ref.Bytes) {
		out.Body.Close()
		return nil, &Error{Ref: ref, Reason: fmt.Sprintf("holds %s, not the %d kept", sizeOf(int(min(n, MaxStoredBytes+1)), ref.Bytes), ref.Bytes)}
	}
	return &checked{ref: ref, body: out.Body, sum: sha256.New()}, nil
}

// checked is an object read as Open gives it.
type checked struct {
	ref  Ref
	body io.ReadCloser
	sum  hash.Hash
	n    int // bytes given
	err  error
}

func (c *checked) Read(p []byte) (int, error) {
	switch {
	case c.err != nil:
		return 0, c.err
	case c.n == c.ref.Bytes:
		return 0, io.EOF
	case len(p) == 0:
		return 0, nil
	case c.n < c.ref.Bytes-1:
		// Every byte but the last, as it comes.
		k, err := c.body.Read(p[:min(len(p), c.ref.Bytes-1-c.n)])
		c.sum.Write(p[:k])
		c.n += k
		switch {
		case err == io.EOF: // ended early (a cut connection is io.ErrUnexpectedEOF)
			c.err = &Error{Ref: c.ref, Reason: fmt.Sprintf("holds %d bytes, not the %d kept", c.n, c.ref.Bytes)}
		case err != nil:
			c.err = fmt.Errorf("read %s: %w", c.ref, err)
		}
		if k == 0 {
			return 0, c.err // nothing read: its error now, not a read of nothing
		}
		return k, nil // the bytes read, then its error
	}
	// The last byte: given once the object is read to its end and its
	// bytes are the kept ones. A connection cut before it (io.EOF from a
	// body shorter than its length is io.ErrUnexpectedEOF) is S3 failing,
	// tried again; only an object that ends early holds other bytes.
	var last [1]byte
	k, err := io.ReadFull(c.body, last[:])
	switch {
	case k == 0 && err == io.EOF:
		c.err = &Error{Ref: c.ref, Reason: fmt.Sprintf("holds %d bytes, not the %d kept", c.n, c.ref.Bytes)}
	case k == 0:
		c.err = fmt.Errorf("read %s: %w", c.ref, err)
	default:
		var more [1]byte
		switch m, err := io.ReadFull(c.body, more[:]); {
		case m == 1:
			c.err = &Error{Ref: c.ref, Reason: fmt.Sprintf("holds more than %d bytes, not the %d kept", c.ref.Bytes, c.ref.Bytes)}
		case err != io.EOF:
			c.err = fmt.Errorf("read %s: %w", c.ref, err)
		default:
			c.sum.Write(last[:])
			if !strings.EqualFold(hex.EncodeToString(c.sum.Sum(nil)), c.ref.SHA256) {
				c.err = &Error{Ref: c.ref, Reason: "its bytes are not the ones kept (SHA-256 differs)"}
			}
		}
	}
	if c.err != nil {
		return 0, c.err
	}
	p[0] = last[0]
	c.n++
	return 1, nil
}

func (c *checked) Close() error { return c.body.Close() }

// Get reads back the payload ref names.
func (s *Store) Get(ctx context.Context, ref Ref) ([]byte, error) {
	if s == nil {
		return nil, &Error{Ref: ref, Reason: "this deployment has no payload bucket (payloadBucket) to read it from"}
	}
	b, err := s.object(ctx, ref, ref.Bytes, "not found (deleted, or expired with its order's retention)",
		fmt.Sprintf("holds more than %d bytes, not the %d kept", ref.Bytes, ref.Bytes))
	if err != nil {
		return nil, err
	}
	if len(b) != ref.Bytes {
		return nil, &Error{Ref: ref, Reason: fmt.Sprintf("holds %s, not the %d kept", sizeOf(len(b), ref.Bytes), ref.Bytes)}
	}
	if sum := sha256.Sum256(b); !strings.EqualFold(hex.EncodeToString(sum[:]), ref.SHA256) {
		return nil, &Error{Ref: ref, Reason: "its bytes are not the ones kept (SHA-256 differs)"}
	}
	return b, nil
}

// object reads the object ref names: at most limit bytes and one more (so
// that a larger one is known to be larger), into one buffer of its length
// when S3 says it (io.ReadAll would grow its buffer by copies: a 16 MB
// payload would take about twice that while it is read, in an Agent of
// 128 MB). One that does not exist is an *Error, missing its reason; one
// whose length is over limit, an *Error with over, refused unread.
func (s *Store) object(ctx context.Context, ref Ref, limit int, missing, over string) ([]byte, error) {
	out, err := s.get(ctx, ref, missing)
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	n := aws.ToInt64(out.ContentLength)
	if n > int64(limit) {
		return nil, &Error{Ref: ref, Reason: over} // refused unread: its length says enough
	}
	body := io.LimitReader(out.Body, int64(limit)+1)
	if n > 0 {
		b := make([]byte, n)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, fmt.Errorf("read %s: %w", ref, err)
		}
		more, err := io.ReadAll(body) // none, unless S3 sent more than it said
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", ref, err)
		}
		return append(b, more...), nil
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref, err)
	}
	return b, nil
}

// get asks S3 for the object ref names: one that does not exist is an
// *Error, missing its reason.
func (s *Store) get(ctx context.Context, ref Ref, missing string) (*s3.GetObjectOutput, error) {
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
	if err != nil {
		if gone(err) {
			return nil, &Error{Ref: ref, Reason: missing}
		}
		return nil, fmt.Errorf("read %s: %w", ref, err)
	}
	return out, nil
}

// gone reports whether err says the object or its bucket does not exist
// (S3 answers GetObject's NoSuchBucket untyped).
func gone(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NoSuchBucket")
}

func sizeOf(n, want int) string {
	if n > want {
		return fmt.Sprintf("more than %d bytes", want)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Renew writes every payload of an order again in place, so that the
// bucket's expiry (days after an object's last write) counts from now: a
// resubmitted order keeps them for its new round.
func (s *Store) Renew(ctx context.Context, orderID string) (int, error) {
	if s == nil {
		return 0, nil
	}
	n := 0
	p := s3.NewListObjectsV2Paginator(s.api, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(OrderPrefix(orderID))})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("list the payloads of %s: %w", orderID, err)
		}
		for _, o := range page.Contents {
			_, err := s.api.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &s.bucket, Key: o.Key,
				CopySource: aws.String(copySource(s.bucket, aws.ToString(o.Key))), MetadataDirective: types.MetadataDirectiveReplace,
				ContentType: aws.String(contentType(aws.ToString(o.Key)))})
			if err != nil {
				return n, fmt.Errorf("renew payload s3://%s/%s: %w", s.bucket, aws.ToString(o.Key), err)
			}
			n++
		}
	}
	return n, nil
}

// copySource is the object at key in bucket as CopyObject's copy source
// names it: bucket/key, URL-encoded, as S3 requires (a key's "#" would
// end the URL there, its "?" start a query, its "%" or "+" be read as an
// escape). Every byte but an unreserved one (RFC 3986) and the "/" between
// the key's parts is written %XX.
func copySource(bucket, key string) string {
	const hex = "0123456789ABCDEF"
	src := bucket + "/" + key
	var b strings.Builder
	b.Grow(len(src))
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~', c == '/':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		}
	}
	return b.String()
}

// Fetch reads an object a sender kept (an SQS Extended Client's body:
// shared/offload), with no claim check to check it against: at most limit
// bytes, a larger one an error. A missing object is an *Error.
func (s *Store) Fetch(ctx context.Context, bucket, key string, limit int) ([]byte, error) {
	ref := Ref{Bucket: bucket, Key: key}
	if s == nil {
		return nil, fmt.Errorf("read %s: this deployment has no payload bucket", ref)
	}
	over := fmt.Sprintf("over the %d-byte limit of a payload", limit)
	b, err := s.object(ctx, ref, limit, "not found", over)
	if err == nil && len(b) > limit {
		return nil, &Error{Ref: ref, Reason: over}
	}
	return b, err
}

// Same reports whether stored (an order as the product stored it: itself,
// or its claim check) is body.
func Same(stored string, body []byte) bool {
	if stored == string(body) {
		return true
	}
	ref, ok := Parse([]byte(stored))
	if !ok || ref.Bytes != len(body) {
		return false
	}
	sum := sha256.Sum256(body)
	return strings.EqualFold(hex.EncodeToString(sum[:]), ref.SHA256)
}
