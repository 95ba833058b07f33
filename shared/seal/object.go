package seal

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

// The object form of a sealed payload, the one the payload bucket keeps
// (shared/kept keeps it there): the ciphertext as it is, no base64, after a head of a
// few hundred bytes:
//
//	"\x00sas-sealed-1\n"      objectMagic: a byte no JSON starts with, the form and its version
//	uint16, bytes             the data key, encrypted under the KMS key
//	uint8, bytes              the nonce
//	uint64                    the ciphertext's length (its GCM tag in it)
//	bytes                     the ciphertext
//
// all lengths big-endian. Its additional data is the order's id, as the
// JSON form's. Read into one buffer of its size, it is opened in place
// (Sealer.OpenInPlace): a payload in this form takes no more memory than
// its plaintext and its head.

// objectMagic starts every payload sealed in the object form;
// objectPrefix, every object form of any version.
const (
	objectPrefix = "\x00sas-sealed-"
	objectMagic  = objectPrefix + "1\n"
)

// IsObject reports whether raw is a payload sealed in the object form
// (whole or not: Open says what is wrong with one that is not).
func IsObject(raw []byte) bool { return bytes.HasPrefix(raw, []byte(objectPrefix)) }

// SealObject encrypts plain for k's order in the object form, in one
// buffer of its final size: for the payload bucket, never inline (it is
// not JSON).
func (k Key) SealObject(plain []byte) ([]byte, error) {
	gcm, err := newGCM(k.plain)
	if err != nil {
		return nil, err
	}
	if len(k.blob) > math.MaxUint16 {
		return nil, fmt.Errorf("seal for %s: a data key of %d bytes (at most %d)", k.orderID, len(k.blob), math.MaxUint16)
	}
	iv := make([]byte, gcm.NonceSize())
	_, _ = rand.Read(iv) // crypto/rand never fails on supported platforms
	n := len(plain) + gcm.Overhead()
	b := objectHead(make([]byte, 0, headSize(len(k.blob), len(iv))+n), k.blob, iv, n)
	return gcm.Seal(b, iv, plain, []byte(k.orderID)), nil
}

// headSize is the length of an object form's head.
func headSize(key, iv int) int { return len(objectMagic) + 2 + key + 1 + iv + 8 }

// objectHead appends the head of an object form to b.
func objectHead(b, key, iv []byte, ciphertext int) []byte {
	b = append(b, objectMagic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(key)))
	b = append(b, key...)
	b = append(b, byte(len(iv)))
	b = append(b, iv...)
	return binary.BigEndian.AppendUint64(b, uint64(ciphertext))
}

// parseObject is the parts of raw in the object form, its ciphertext in
// raw's own bytes; ok false if raw is not in that form (of any version),
// and reason, for one that is, why it is not whole.
func parseObject(raw []byte) (p parts, ok bool, reason string) {
	if !bytes.HasPrefix(raw, []byte(objectPrefix)) {
		return p, false, ""
	}
	if !bytes.HasPrefix(raw, []byte(objectMagic)) {
		return p, true, fmt.Sprintf("a sealed form this version does not open (%q)", raw[:min(len(raw), len(objectMagic))])
	}
	b := raw[len(objectMagic):]
	short := fmt.Sprintf("cut short in its head (%d bytes)", len(raw))
	if len(b) < 2 {
		return p, true, short
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n+1 {
		return p, true, short
	}
	p.key, b = b[2:2+n], b[2+n:]
	n = int(b[0])
	if len(b) < 1+n+8 {
		return p, true, short
	}
	p.iv, b = b[1:1+n], b[1+n:]
	want := binary.BigEndian.Uint64(b)
	b = b[8:]
	switch {
	case uint64(len(b)) < want:
		return p, true, fmt.Sprintf("cut short: it holds %d bytes of its %d-byte ciphertext", len(b), want)
	case uint64(len(b)) > want:
		return p, true, fmt.Sprintf("it holds %d bytes after its %d-byte ciphertext", uint64(len(b))-want, want)
	}
	if len(p.key) == 0 || len(p.iv) == 0 {
		return p, true, "its head names no data key or no nonce"
	}
	p.ct, p.object = b, true
	return p, true, ""
}

// parts is a sealed payload's: its data key (encrypted under the KMS key),
// nonce and ciphertext; in the object form, its ciphertext in raw's own
// bytes (ct); in the JSON form, as raw holds it, a JSON string of base64
// (b64), until decoded.
type parts struct {
	key, iv []byte
	object  bool
	ct      []byte
	b64     token
}

// token is a JSON value as its input holds it: encoding/json gives an
// Unmarshaler the input's own bytes, not a copy, so a ciphertext in base64
// is decoded where it is (OpenInPlace) or into a buffer of its own size,
// raw never copied whole. (Were it given a copy, as another encoding/json
// might, the ciphertext would be decoded in that copy: as correct, if not
// in place.)
type token []byte

// UnmarshalJSON implements json.Unmarshaler.
func (t *token) UnmarshalJSON(b []byte) error {
	*t = b
	return nil
}

// quoted reports whether p's base64 is no plain JSON string (escapes in
// it, or not a string at all): decoded by encoding/json then.
func (p parts) quoted() bool {
	t := p.b64
	return len(t) < 2 || t[0] != '"' || t[len(t)-1] != '"' || bytes.IndexByte(t, '\\') >= 0
}

// ciphertext is p's ciphertext: in the JSON form, decoded in place (in
// raw's own bytes) if inPlace, or else into a buffer of its own.
func (p parts) ciphertext(inPlace bool) ([]byte, error) {
	if p.object {
		return p.ct, nil
	}
	if p.quoted() {
		var ct []byte
		err := json.Unmarshal(p.b64, &ct)
		return ct, err
	}
	data := p.b64[1 : len(p.b64)-1]
	if inPlace {
		return decodeBase64(p.b64, data) // from its quote on: it writes behind what it reads
	}
	n, err := decodedLen(data)
	if err != nil {
		return nil, err
	}
	return decodeBase64(make([]byte, n), data)
}

// decodedLen is the length of the bytes data (base64, padded) encodes.
func decodedLen(data []byte) (int, error) {
	if len(data)%4 != 0 {
		return 0, fmt.Errorf("base64 of %d characters, not a multiple of 4", len(data))
	}
	n := len(data) / 4 * 3
	for i := len(data) - 1; i >= 0 && i >= len(data)-2 && data[i] == '='; i-- {
		n--
	}
	return n, nil
}

// decodeBase64 decodes src (base64, padded) into dst, which may be src
// itself or start before it: a chunk of src is copied aside before its
// bytes are written, and they are never written past what was read (three
// bytes for four).
func decodeBase64(dst, src []byte) ([]byte, error) {
	var chunk [4 << 10]byte
	n := 0
	for len(src) > 0 {
		k := copy(chunk[:], src)
		src = src[k:]
		m, err := base64.StdEncoding.Decode(dst[n:], chunk[:k])
		if err != nil {
			return nil, fmt.Errorf("base64: %w", err)
		}
		n += m
	}
	return dst[:n], nil
}
