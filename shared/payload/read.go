package payload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// Error is a payload that cannot be read back as it was kept: its object is
// gone, or holds other bytes. No try again changes it: the step that needs
// it fails.
type Error struct {
	Ref    Ref
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("payload %s: %s", e.Ref, e.Reason) }

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
