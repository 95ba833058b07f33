// Package offload speaks the SQS Extended Client's protocol (its Java and
// Python libraries'): a message body too large for SQS is kept in the
// payload bucket, and a pointer message sent in its place. Submission
// follows such a pointer (Pointer, Fetch), and writes over the body it
// took once it is kept sealed (Reseal); the operator sends one (Offload).
// What the product keeps of a value is shared/kept's; the bodies here are
// the senders'.
package offload

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/topology"
)

// API is the part of the S3 client a Store uses.
type API = payload.API

// Error is a body that cannot be read: its object is gone, or too large.
type Error = payload.Error

// OrdersPrefix is where the product keeps its own values (shared/kept): no
// sender offloads there.
const OrdersPrefix = payload.OrdersPrefix

// Store reads and writes the bodies senders offload to one bucket. A nil
// *Store has no bucket: it reads and writes none.
type Store struct {
	api    API
	bucket string
	read   *payload.Store
}

// New is a store of the bodies offloaded to bucket, through api.
func New(api API, bucket string) *Store {
	return &Store{api: api, bucket: bucket, read: payload.New(api, bucket, 0)}
}

// Bucket is the store's bucket ("" for a nil store).
func (s *Store) Bucket() string {
	if s == nil {
		return ""
	}
	return s.bucket
}

// Pointer reads the S3 pointer message the AWS SQS Extended Client
// libraries (Java, Python) send in place of a body too large for SQS:
// ["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":…,"s3Key":…}]
// (or com.amazon.sqs.javamessaging.MessageS3Pointer, the legacy class).
// ok is false for any other body.
func Pointer(body string) (bucket, key string, ok bool) {
	b := strings.TrimSpace(body)
	if !strings.HasPrefix(b, `["`+pointerType+`"`) && !strings.HasPrefix(b, `["`+legacyPointerType+`"`) || len(body) > 4096 {
		return "", "", false
	}
	var parts []json.RawMessage
	if json.Unmarshal([]byte(body), &parts) != nil || len(parts) != 2 {
		return "", "", false
	}
	var p struct {
		Bucket string `json:"s3BucketName"`
		Key    string `json:"s3Key"`
	}
	if json.Unmarshal(parts[1], &p) != nil || p.Bucket == "" || p.Key == "" {
		return "", "", false
	}
	return p.Bucket, p.Key, true
}

// Fetch reads the body a sender offloaded to key of bucket: at most limit
// bytes, a larger one an *Error; so is a missing one.
func (s *Store) Fetch(ctx context.Context, bucket, key string, limit int) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("read s3://%s/%s: this deployment has no payload bucket", bucket, key)
	}
	return s.read.Fetch(ctx, bucket, key, limit)
}

// MaxMessageBytes is the largest message a work queue takes (256 KiB, its
// attributes counted: topology.MaxMessageBytes): a sender offloads a larger
// body, as the Extended Client libraries do (Offload).
const MaxMessageBytes = topology.MaxMessageBytes

// pointerType names the Extended Client's pointer in its message;
// legacyPointerType, the Java library's first versions' (and Python's,
// with use_legacy_attribute).
const (
	pointerType       = "software.amazon.payloadoffloading.PayloadS3Pointer"
	legacyPointerType = "com.amazon.sqs.javamessaging.MessageS3Pointer"
)

// Offload keeps a message body too large for SQS in the bucket, under
// incoming/ and a random name, and returns the pointer message to send in
// its place: the one the SQS Extended Client libraries send, which
// Submission follows (Pointer). As the libraries' (a UUID), each message's
// object is its own, never another's with the same body: Submission writes
// over one it took (Reseal) while another may still wait, refused, in a
// DLQ. A send that fails after it leaves the object to expire.
func (s *Store) Offload(ctx context.Context, body []byte) (string, error) {
	return s.OffloadAs(ctx, rand.Text(), body)
}

// OffloadAs is Offload under incoming/name: a seeded run names its bodies
// as the run it replays did (a random name would change the pointer
// messages, and what is picked by their bodies).
func (s *Store) OffloadAs(ctx context.Context, name string, body []byte) (string, error) {
	if s == nil {
		return "", fmt.Errorf("offload a %d-byte message: no payload bucket", len(body))
	}
	key := IncomingPrefix + name
	_, err := s.api.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("application/json")})
	if err != nil {
		return "", fmt.Errorf("offload a %d-byte message to s3://%s/%s: %w", len(body), s.bucket, key, err)
	}
	ptr, _ := json.Marshal([]any{pointerType, map[string]string{"s3BucketName": s.bucket, "s3Key": key}}) // strings: no error
	return string(ptr), nil
}

// IncomingPrefix is where senders offload bodies too large for SQS (the
// SQS Extended Client's key prefix, and Offload's).
const IncomingPrefix = "incoming/"

// Incoming reports whether key is under IncomingPrefix: a body a sender
// offloaded there, which Reseal may write over.
func Incoming(key string) bool { return strings.HasPrefix(key, IncomingPrefix) }

// Reseal writes stored (an order as the product keeps it: sealed, or the
// claim check of its sealed data; an event with its data so) over the
// object a sender offloaded its body to, under IncomingPrefix, so that the
// bucket holds no clear copy of a sealed order or event: if its pointer
// message comes again, Submission reads the order back by its head's
// orderId (kept.Boundary.Resealed), and takes the event for a repeat, or
// refuses it.
func (s *Store) Reseal(ctx context.Context, key string, stored []byte) error {
	if s == nil || !Incoming(key) {
		return fmt.Errorf("reseal s3://%s/%s: only a body offloaded under %s is written over", s.Bucket(), key, IncomingPrefix)
	}
	_, err := s.api.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(stored),
		ContentLength: aws.Int64(int64(len(stored))), ContentType: aws.String("application/json")})
	if err != nil {
		return fmt.Errorf("reseal s3://%s/%s: %w", s.bucket, key, err)
	}
	return nil
}
