package seal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/seal"
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
