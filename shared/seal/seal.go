// Package seal encrypts a task's data under a data key of its own order
// (envelope encryption): AES-256-GCM, the data key made by KMS under the
// customer's key and kept, encrypted, beside the data. The tables, the
// queues, the payload bucket and the logs then hold ciphertext only: who
// reads an order's data, or its results, needs kms:Decrypt on the key, for
// that order (its id is the key's encryption context, and the cipher's
// additional data).
//
// A sealed payload has two forms. Inline (in a table's item, a message), it
// is a JSON object, {"$sasSealed":{"key":…,"iv":…,"data":…}}, with an
// order's orderId, workflow and replyQueue beside it, which the product
// reads without the data. Kept in the payload bucket, it is in the object
// form (object.go): the ciphertext as it is, after a small binary head, so
// that it weighs its plaintext and a few hundred bytes, read back and opened
// in place. Objects kept in the JSON form before the object form existed
// open as they are. A claim check of a sealed order keeps the encrypted
// data key in its head (KeyMember), so that the key is known without
// reading the payload back.
//
// It is a codec of shared/kept, the one boundary for what is kept of a
// value: only that package seals and opens an order's data with it (and
// shared/flow makes a deployment's own secrets: NewSecret).
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

// envelope is a sealed payload's Member, as Seal writes it.
type envelope struct {
	Key  []byte `json:"key"` // the data key, encrypted under the KMS key
	IV   []byte `json:"iv"`
	Data []byte `json:"data"`
}

// Seal encrypts plain for k's order in the JSON form, for a table's item or
// a message; head's members ride beside it in clear (those set). For the
// payload bucket, SealObject.
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

// parse is raw's parts, in either form; ok false if raw is not sealed, and
// reason, for one in the object form, why it is not whole.
func parse(raw []byte) (p parts, ok bool, reason string) {
	if p, ok, reason = parseObject(raw); ok {
		return p, true, reason
	}
	p, ok = parseJSON(raw)
	return p, ok, ""
}

// parseJSON is the parts of raw in the JSON form, its ciphertext left in
// base64 where raw holds it (no copy of raw is made); ok false if raw is
// not in that form.
func parseJSON(raw []byte) (parts, bool) {
	if !bytes.Contains(raw, marker) {
		return parts{}, false
	}
	var m struct {
		E *struct {
			Key  []byte `json:"key"`
			IV   []byte `json:"iv"`
			Data token  `json:"data"`
		} `json:"$sasSealed"`
	}
	if json.Unmarshal(raw, &m) != nil || m.E == nil || len(m.E.Key) == 0 || len(m.E.IV) == 0 {
		return parts{}, false
	}
	if len(m.E.Data) == 0 {
		m.E.Data = token(`""`) // no data: none opens
	}
	return parts{key: m.E.Key, iv: m.E.IV, b64: m.E.Data}, true
}

// IsSealed reports whether raw is a sealed payload, in either form.
func IsSealed(raw []byte) bool {
	_, ok, _ := parse(raw)
	return ok
}

// Error is a sealed payload that cannot be opened as it was sealed: its
// data key is not the order's, or its data was altered. No try again
// changes it: the step that needs it fails.
type Error struct {
	OrderID string
	Reason  string
	// NoKey: the function has no key at all (no dataKey), so it cannot
	// tell; one that has (a deployment that gained its key a moment ago,
	// its functions' configurations updated one after another) may.
	NoKey bool
}

func (e *Error) Error() string { return fmt.Sprintf("sealed data of %s: %s", e.OrderID, e.Reason) }

// Open is the data raw seals for the order (raw itself, if it is not
// sealed), raw left as it is. Its data key is decrypted by KMS once and
// kept.
func (s *Sealer) Open(ctx context.Context, orderID string, raw []byte) ([]byte, error) {
	return s.open(ctx, orderID, raw, false)
}

// OpenInPlace is Open of raw, a payload read back into a buffer of its
// own: opened in that buffer, raw's bytes become the plaintext's (in the
// JSON form, its base64 decoded where it was), so that a payload read back
// takes no more memory than its size.
func (s *Sealer) OpenInPlace(ctx context.Context, orderID string, raw []byte) ([]byte, error) {
	return s.open(ctx, orderID, raw, true)
}

func (s *Sealer) open(ctx context.Context, orderID string, raw []byte, inPlace bool) ([]byte, error) {
	p, ok, reason := parse(raw)
	switch {
	case !ok:
		return raw, nil
	case reason != "":
		return nil, &Error{OrderID: orderID, Reason: reason}
	case s == nil:
		return nil, &Error{OrderID: orderID, Reason: "this function has no data key (dataKey) to open it", NoKey: true}
	}
	key, err := s.keyOf(ctx, orderID, p.key)
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(key.plain)
	if err != nil {
		return nil, err
	}
	if len(p.iv) != gcm.NonceSize() {
		return nil, &Error{OrderID: orderID, Reason: "its nonce is not AES-GCM's"}
	}
	ct, err := p.ciphertext(inPlace)
	if err != nil {
		return nil, &Error{OrderID: orderID, Reason: fmt.Sprintf("its data is not as sealed (%v)", err)}
	}
	dst := ct[:0] // in place: the ciphertext's own bytes (decoded from base64: a copy, unless inPlace)
	if p.object && !inPlace {
		dst = nil // raw's own bytes: left as they are
	}
	plain, err := gcm.Open(dst, p.iv, ct, []byte(orderID))
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
		return Key{}, true, &Error{OrderID: orderID, Reason: "this function has no data key (dataKey) to seal its results", NoKey: true}
	}
	k, err := s.keyOf(ctx, orderID, blob)
	return k, true, err
}

// blobOf is the encrypted data key a stored order names.
func blobOf(stored []byte) ([]byte, bool) {
	if p, ok, reason := parse(stored); ok && reason == "" {
		return p.key, true
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
