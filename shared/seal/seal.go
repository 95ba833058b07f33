// Package seal encrypts a task's data under a data key of its own order
// (envelope encryption): AES-256-GCM, the data key made by KMS under the
// customer's key and kept, encrypted, beside the data. The tables, the
// queues, the payload bucket and the logs then hold ciphertext only: who
// reads an order's data, or its results, needs kms:Decrypt on the key, for
// that order (its id is the key's encryption context, and the cipher's
// additional data).
//
// A sealed payload is a JSON object, {"$sasSealed":{"key":…,"iv":…,"data":…}},
// with an order's orderId, workflow and replyQueue beside it, which the
// product reads without the data. A claim check of a sealed payload keeps
// the encrypted data key in its head (KeyMember), so that the key is known
// without reading the payload back.
package seal

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// Member is the member of a sealed payload that holds it.
const Member = "$sasSealed"

// KeyMember is the member of a sealed order's claim check that holds its
// encrypted data key.
const KeyMember = "$sasKey"

// contextKey is the encryption context's key: the order's id.
const contextKey = "orderId"

// API is the part of the KMS client a Sealer uses.
type API interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// Sealer makes and opens orders' data keys under one KMS key. A nil
// *Sealer seals nothing and opens nothing sealed.
type Sealer struct {
	api   API
	keyID string
	mu    sync.Mutex
	keys  map[string][]byte // plaintext data keys by their encrypted blob, a few
}

// cacheSize bounds the data keys a Sealer keeps: an Agent instance's
// batch's orders, a few times over.
const cacheSize = 256

// New is a Sealer under the KMS key keyID (an id, ARN or alias; "": one that
// only opens, each blob naming its key).
func New(api API, keyID string) *Sealer {
	return &Sealer{api: api, keyID: keyID, keys: map[string][]byte{}}
}

// Key is one order's data key.
type Key struct {
	orderID string
	plain   []byte
	blob    []byte // encrypted under the KMS key
}

// NewKey asks KMS for a data key for the order.
func (s *Sealer) NewKey(ctx context.Context, orderID string) (Key, error) {
	out, err := s.api.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{KeyId: &s.keyID, KeySpec: types.DataKeySpecAes256,
		EncryptionContext: map[string]string{contextKey: orderID}})
	if err != nil {
		return Key{}, fmt.Errorf("a data key for %s: %w", orderID, err)
	}
	s.remember(out.CiphertextBlob, out.Plaintext)
	return Key{orderID: orderID, plain: out.Plaintext, blob: out.CiphertextBlob}, nil
}

// envelope is a sealed payload's Member.
type envelope struct {
	Key  []byte `json:"key"` // the data key, encrypted under the KMS key
	IV   []byte `json:"iv"`
	Data []byte `json:"data"`
}

// Seal encrypts plain for k's order; head's members ride beside it in
// clear (those set).
func (k Key) Seal(plain []byte, head map[string]string) (json.RawMessage, error) {
	gcm, err := newGCM(k.plain)
	if err != nil {
		return nil, err
	}
	iv := make([]byte, gcm.NonceSize())
	_, _ = rand.Read(iv) // crypto/rand never fails on supported platforms
	m := map[string]any{Member: envelope{Key: k.blob, IV: iv, Data: gcm.Seal(nil, iv, plain, []byte(k.orderID))}}
	for name, v := range head {
		if v != "" {
			m[name] = v
		}
	}
	return json.Marshal(m)
}

// Blob is k's encrypted data key, for a claim check's head (KeyMember).
func (k Key) Blob() []byte { return k.blob }

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("a data key: %w", err)
	}
	return cipher.NewGCM(block)
}

// marker is how every sealed payload's JSON names its envelope.
var marker = []byte(`"` + Member + `":`)

// parse is raw's envelope; ok false if raw is not sealed.
func parse(raw []byte) (envelope, bool) {
	if !bytes.Contains(raw, marker) {
		return envelope{}, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return envelope{}, false
	}
	var e envelope
	if json.Unmarshal(m[Member], &e) != nil || len(e.Key) == 0 || len(e.IV) == 0 {
		return envelope{}, false
	}
	return e, true
}

// IsSealed reports whether raw is a sealed payload.
func IsSealed(raw []byte) bool {
	_, ok := parse(raw)
	return ok
}

// Error is a sealed payload that cannot be opened as it was sealed: its
// data key is not the order's, or its data was altered. No try again
// changes it: the step that needs it fails.
type Error struct {
	OrderID string
	Reason  string
}

func (e *Error) Error() string { return fmt.Sprintf("sealed data of %s: %s", e.OrderID, e.Reason) }

// Open is the data raw seals for the order (raw itself, if it is not
// sealed). Its data key is decrypted by KMS once and kept.
func (s *Sealer) Open(ctx context.Context, orderID string, raw []byte) ([]byte, error) {
	e, ok := parse(raw)
	if !ok {
		return raw, nil
	}
	if s == nil {
		return nil, &Error{OrderID: orderID, Reason: "this deployment seals nothing (sealData off): it has no key to open it"}
	}
	key, err := s.keyOf(ctx, orderID, e.Key)
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(key.plain)
	if err != nil {
		return nil, err
	}
	if len(e.IV) != gcm.NonceSize() {
		return nil, &Error{OrderID: orderID, Reason: "its nonce is not AES-GCM's"}
	}
	plain, err := gcm.Open(nil, e.IV, e.Data, []byte(orderID))
	if err != nil {
		return nil, &Error{OrderID: orderID, Reason: "it does not open: altered, or another order's"}
	}
	return plain, nil
}

// KeyOf is the data key of the order whose stored form is stored: sealed
// itself, or a claim check of it with the key in its head. ok is false if
// the order is not sealed (its results are not either).
func (s *Sealer) KeyOf(ctx context.Context, orderID string, stored []byte) (Key, bool, error) {
	blob, ok := blobOf(stored)
	if !ok {
		return Key{}, false, nil
	}
	if s == nil {
		return Key{}, true, &Error{OrderID: orderID, Reason: "this deployment seals nothing (sealData off): it has no key to seal its results"}
	}
	k, err := s.keyOf(ctx, orderID, blob)
	return k, true, err
}

// blobOf is the encrypted data key a stored order names.
func blobOf(stored []byte) ([]byte, bool) {
	if e, ok := parse(stored); ok {
		return e.Key, true
	}
	if !bytes.Contains(stored, []byte(`"`+KeyMember+`":`)) {
		return nil, false
	}
	var head struct {
		Key []byte `json:"$sasKey"`
	}
	if json.Unmarshal(stored, &head) != nil || len(head.Key) == 0 {
		return nil, false
	}
	return head.Key, true
}

// keyOf decrypts blob for the order, or finds it decrypted before.
func (s *Sealer) keyOf(ctx context.Context, orderID string, blob []byte) (Key, error) {
	s.mu.Lock()
	plain, ok := s.keys[string(blob)]
	s.mu.Unlock()
	if ok {
		return Key{orderID: orderID, plain: plain, blob: blob}, nil
	}
	in := &kms.DecryptInput{CiphertextBlob: blob, EncryptionContext: map[string]string{contextKey: orderID}}
	if s.keyID != "" { // else the blob names its key (an operator's sealer)
		in.KeyId = aws.String(s.keyID)
	}
	out, err := s.api.Decrypt(ctx, in)
	var invalid *types.InvalidCiphertextException
	if errors.As(err, &invalid) {
		return Key{}, &Error{OrderID: orderID, Reason: "its data key is not the order's (KMS: invalid ciphertext)"}
	}
	if err != nil {
		return Key{}, fmt.Errorf("the data key of %s: %w", orderID, err)
	}
	s.remember(blob, out.Plaintext)
	return Key{orderID: orderID, plain: out.Plaintext, blob: blob}, nil
}

// remember keeps a data key, forgetting them all when there are too many.
func (s *Sealer) remember(blob, plain []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.keys) >= cacheSize {
		clear(s.keys)
	}
	s.keys[string(blob)] = plain
}
