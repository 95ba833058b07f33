package seal_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/statestore"
)

// plainOf is n bytes of a JSON string of c, its quotes counted.
func plainOf(n int, c byte) []byte {
	b := bytes.Repeat([]byte{c}, n)
	if n >= 2 {
		b[0], b[n-1] = '"', '"'
	}
	return b
}

// The object form round trips at every length (the cipher's blocks, the
// chunks a JSON form's base64 is decoded by): its head is a few hundred
// bytes, its ciphertext the plaintext's length and the tag. Open leaves it
// as it is; OpenInPlace opens it in its own bytes.
func TestTheObjectFormRoundTripsAndOpensInPlace(t *testing.T) {
	t.Parallel()
	s, _, _ := sealer(t)
	ctx := context.Background()
	key, err := s.NewKey(ctx, "o-obj")
	require.NoError(t, err)
	for _, n := range []int{0, 1, 2, 3, 4, 15, 16, 17, 3071, 3072, 3073, 4096, 100_003, 1<<20 + 1} {
		plain := plainOf(n, 'x')
		obj, err := key.SealObject(plain)
		require.NoError(t, err)
		require.True(t, seal.IsObject(obj), "%d bytes", n)
		require.True(t, seal.IsSealed(obj), "%d bytes", n)
		require.False(t, json.Valid(obj), "not JSON: never inline")
		require.Less(t, len(obj)-n, 400, "%d bytes: its head and tag, a few hundred bytes", n)
		if n > 16 {
			require.False(t, bytes.Contains(obj, plain[1:17]), "%d bytes: ciphertext only", n)
		}

		kept := bytes.Clone(obj)
		got, err := s.Open(ctx, "o-obj", obj)
		require.NoError(t, err, "%d bytes", n)
		require.Equal(t, string(plain), string(got), "%d bytes", n)
		require.Equal(t, kept, obj, "%d bytes: Open leaves it as it is", n)

		got, err = s.OpenInPlace(ctx, "o-obj", obj)
		require.NoError(t, err, "%d bytes", n)
		require.Equal(t, string(plain), string(got), "%d bytes", n)
		if n > 0 {
			require.Equal(t, &obj[len(obj)-n-16], &got[0], "%d bytes: opened where its ciphertext was", n)
		}

		k, ok, err := s.KeyOf(ctx, "o-obj", kept)
		require.NoError(t, err)
		require.True(t, ok, "its data key is in its head")
		require.Equal(t, key.Blob(), k.Blob())
	}
	again, err := key.SealObject([]byte(`{"a":1}`))
	require.NoError(t, err)
	first, err := key.SealObject([]byte(`{"a":1}`))
	require.NoError(t, err)
	require.NotEqual(t, first, again, "a nonce of its own each time")
}

// A payload sealed in the JSON form (inline, or an object kept before the
// object form existed) still opens, left as it is by Open and decoded and
// opened in its own bytes by OpenInPlace, for its own order only.
func TestTheJSONFormStillOpens(t *testing.T) {
	t.Parallel()
	s, _, _ := sealer(t)
	ctx := context.Background()
	key, err := s.NewKey(ctx, "o-json")
	require.NoError(t, err)
	elsewhere := seal.New(s2(t), "") // another instance: it asks KMS, which knows the order's id
	for _, n := range []int{1, 2, 3, 4, 5, 3071, 3072, 3073, 3074, 100_001, 1<<20 + 2} {
		plain := plainOf(n, 'j')
		sealed, err := key.Seal(plain, map[string]string{"orderId": "o-json"})
		require.NoError(t, err)
		require.True(t, seal.IsSealed(sealed))
		require.False(t, seal.IsObject(sealed))

		kept := bytes.Clone(sealed)
		got, err := s.Open(ctx, "o-json", sealed)
		require.NoError(t, err, "%d bytes", n)
		require.Equal(t, plain, got)
		require.Equal(t, kept, []byte(sealed), "Open leaves it as it is")
		got, err = s.OpenInPlace(ctx, "o-json", sealed)
		require.NoError(t, err, "%d bytes", n)
		require.Equal(t, plain, got)
		if n > 0 {
			i := bytes.Index(kept, []byte(`"data":"`)) + len(`"data":`)
			require.Equal(t, &sealed[i], &got[0], "%d bytes: opened where its base64 was", n)
		}

		_, err = elsewhere.Open(ctx, "o-other", kept)
		require.Error(t, err, "%d bytes: the order's own", n)
	}
}

// s2 is the KMS client of another Sealer (another instance).
func s2(t *testing.T) seal.API {
	t.Helper()
	_, api, _ := sealer(t)
	return api
}

// An object form altered, of another order, with another order's data key
// in its head, or cut short (in its head, in its ciphertext) or longer, is
// refused with the reason (a *seal.Error: no try again opens it), never
// taken for data that is not sealed.
func TestAnAlteredOrCutObjectIsRefusedWithTheReason(t *testing.T) {
	t.Parallel()
	s, _, _ := sealer(t)
	ctx := context.Background()
	key, err := s.NewKey(ctx, "o-cut")
	require.NoError(t, err)
	other, err := s.NewKey(ctx, "o-elsewhere")
	require.NoError(t, err)
	plain := plainOf(10_000, 'c')
	obj, err := key.SealObject(plain)
	require.NoError(t, err)
	head := len(obj) - len(plain) - 16

	refused := func(raw []byte, orderID, reason string) {
		t.Helper()
		for name, open := range map[string]func(context.Context, string, []byte) ([]byte, error){"Open": s.Open, "OpenInPlace": s.OpenInPlace} {
			got, err := open(ctx, orderID, bytes.Clone(raw))
			var broken *seal.Error
			require.ErrorAs(t, err, &broken, "%s: %s", name, reason)
			require.ErrorContains(t, err, reason, name)
			require.Nil(t, got, name)
		}
		require.True(t, seal.IsSealed(raw), "%s: the product's own form (an answer in it is refused)", reason)
	}
	altered := bytes.Clone(obj)
	altered[head+5000] ^= 1
	refused(altered, "o-cut", "it does not open: altered, or another order's")
	refused(obj, "o-elsewhere", "sealed data of o-elsewhere")
	theirs, err := other.SealObject(plain)
	require.NoError(t, err)
	swapped := append(bytes.Clone(theirs[:len(theirs)-len(plain)-16]), obj[head:]...)
	refused(swapped, "o-cut", "o-cut")

	refused(obj[:head+4000], "o-cut", fmt.Sprintf("cut short: it holds 4000 bytes of its %d-byte ciphertext", len(plain)+16))
	refused(obj[:head], "o-cut", fmt.Sprintf("cut short: it holds 0 bytes of its %d-byte ciphertext", len(plain)+16))
	refused(obj[:head-3], "o-cut", fmt.Sprintf("cut short in its head (%d bytes)", head-3))
	refused(obj[:20], "o-cut", "cut short in its head (20 bytes)")
	refused(append(bytes.Clone(obj), "abc"...), "o-cut", fmt.Sprintf("it holds 3 bytes after its %d-byte ciphertext", len(plain)+16))
	next := bytes.Clone(obj)
	copy(next, "\x00sas-sealed-2\n")
	refused(next, "o-cut", "a sealed form this version does not open")
	refused([]byte("\x00sas-sealed-"), "o-cut", "a sealed form this version does not open")
	noNonce := bytes.Clone(obj[:len("\x00sas-sealed-1\n")+2])
	keyLen := int(binary.BigEndian.Uint16(noNonce[len(noNonce)-2:]))
	noNonce = append(noNonce, obj[len(noNonce):len(noNonce)+keyLen]...)
	noNonce = append(append(noNonce, 0), binary.BigEndian.AppendUint64(nil, 0)...)
	refused(noNonce, "o-cut", "its head names no data key or no nonce")

	var none *seal.Sealer
	_, err = none.Open(ctx, "o-cut", obj)
	require.ErrorContains(t, err, "this function has no data key")
	var noKey *seal.Error
	require.True(t, errors.As(err, &noKey) && noKey.NoKey, "one whose configuration lags its deployment's: given back, not failed")
}

// Sealed as the payload store seals it (Seal) and kept in the payload
// bucket, a payload is in the object form, and read back (statestore.Read)
// it opens in the buffer it was read into; an object kept in the JSON form
// before the object form existed (an order in flight across the upgrade)
// still opens; one cut short is a *payload.Error (its claim check's size).
func TestSealedObjectsOfEitherFormReadBack(t *testing.T) {
	t.Parallel()
	s, _, _ := sealer(t)
	ctx := context.Background()
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: endpoint, Emulated: true})
	require.NoError(t, err)
	bucket := "seal-test-forms"
	require.NoError(t, provision.EnsureBucket(ctx, c.S3, bucket))
	p := payload.New(c.S3, bucket, 0)
	key, err := s.NewKey(ctx, "o-forms")
	require.NoError(t, err)
	plain := []byte(`{"pages":"` + strings.Repeat("p", 200_000) + `"}`)

	obj, err := p.Seal(key, plain, nil)
	require.NoError(t, err)
	require.True(t, seal.IsObject(obj), "over the inline limit: the object form")
	asObject, err := p.Keep(ctx, "o-forms", "results/a-r1", obj, nil)
	require.NoError(t, err)
	ref, ok := payload.Parse(asObject)
	require.True(t, ok)
	require.True(t, strings.HasSuffix(ref.Key, payload.SealedSuffix), ref.Key)
	require.Less(t, ref.Bytes-len(plain), 400, "it weighs its plaintext and its head")
	got, err := statestore.Read(ctx, p, s, "o-forms", asObject)
	require.NoError(t, err)
	require.Equal(t, plain, []byte(got))
	inJSON, err := key.Seal(plain, nil)
	require.NoError(t, err)

	// An object kept in the JSON form, as before the object form.
	sum := sha256Of(inJSON)
	legacy := payload.Ref{Bucket: bucket, Key: payload.OrderPrefix("o-forms") + "results/c-r1/" + sum, Bytes: len(inJSON), SHA256: sum}
	_, err = c.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: &legacy.Bucket, Key: &legacy.Key, Body: bytes.NewReader(inJSON)})
	require.NoError(t, err)
	got, err = statestore.Read(ctx, p, s, "o-forms", payload.Check(legacy, nil))
	require.NoError(t, err)
	require.Equal(t, plain, []byte(got), "an object in the JSON form opens")

	// The object cut short in the bucket.
	_, err = c.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: &ref.Bucket, Key: &ref.Key, Body: bytes.NewReader(obj[:len(obj)/2])})
	require.NoError(t, err)
	_, err = statestore.Read(ctx, p, s, "o-forms", asObject)
	var lost *payload.Error
	require.ErrorAs(t, err, &lost, "cut short in the bucket: its claim check says so first")
	require.ErrorContains(t, err, fmt.Sprintf("not the %d kept", ref.Bytes))

	small, err := p.Seal(key, []byte(`{"a":1}`), map[string]string{"orderId": "o-forms"})
	require.NoError(t, err)
	require.False(t, seal.IsObject(small), "inline: the JSON form")
	require.Contains(t, string(small), `"orderId":"o-forms"`)
	kept, err := p.Keep(ctx, "o-forms", "results/d-r1", small, nil)
	require.NoError(t, err)
	require.Equal(t, small, []byte(kept), "kept inline")
	var noBucket *payload.Store
	large, err := noBucket.Seal(key, plain, nil)
	require.NoError(t, err)
	require.False(t, seal.IsObject(large), "no bucket: the JSON form, which its caller refuses over the inline limit")
}

func sha256Of(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
