package kept_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
)

// sealedOver is a boundary over a new bucket, sealing under a new key of
// moto's KMS, and an order of orderID sealed under a data key of its own,
// as kept.
func sealedOver(t *testing.T, orderID string) (*kept.Boundary, *s3.Client, string, kept.Value) {
	t.Helper()
	ctx := context.Background()
	api, b := bucket(t)
	keyID, err := provision.EnsureKey(ctx, clients(t).KMS, "alias/kept-test-"+strings.ReplaceAll(t.Name(), "/", "-"))
	require.NoError(t, err)
	k := kept.New(kept.Payloads(api, b, 0), kept.Sealer(clients(t).KMS, keyID))
	s, err := k.SealOrder(ctx, orderID, []byte(`{"orderId":"`+orderID+`"}`), map[string]string{"orderId": orderID})
	require.NoError(t, err)
	order, err := k.Offload(ctx, orderID, "order", s)
	require.NoError(t, err)
	return k, api, b, order
}

// Sealed as the boundary seals it and kept in the payload bucket, a value
// is in the object form, and read back (Open) it opens in the buffer it
// was read into; an object kept in the JSON form before the object form
// existed (an order in flight across the upgrade) still opens; one cut
// short is a *payload.Error (its claim check's size).
func TestSealedObjectsOfEitherFormReadBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, api, bucket, order := sealedOver(t, "o-forms")
	plain := []byte(`{"pages":"` + strings.Repeat("p", 200_000) + `"}`)

	obj, err := k.Seal(ctx, "o-forms", order, plain)
	require.NoError(t, err)
	asObject, err := k.Offload(ctx, "o-forms", "results/a-r1", obj)
	require.NoError(t, err)
	ref, ok := payload.Parse(asObject.JSON())
	require.True(t, ok)
	require.True(t, strings.HasSuffix(ref.Key, payload.SealedSuffix), "over the inline limit: the object form, its key says so: %s", ref.Key)
	require.Less(t, ref.Bytes-len(plain), 400, "it weighs its plaintext and its head")
	got, err := k.Open(ctx, "o-forms", asObject)
	require.NoError(t, err)
	require.Equal(t, plain, []byte(got))

	// An object kept in the JSON form, as before the object form.
	key, _, err := k.Sealer().KeyOf(ctx, "o-forms", order.JSON())
	require.NoError(t, err)
	inJSON, err := key.Seal(plain, nil)
	require.NoError(t, err)
	sum := sha256.Sum256(inJSON)
	legacy := payload.Ref{Bucket: bucket, Key: payload.OrderPrefix("o-forms") + "results/c-r1/" + hex.EncodeToString(sum[:]),
		Bytes: len(inJSON), SHA256: hex.EncodeToString(sum[:])}
	_, err = api.PutObject(ctx, &s3.PutObjectInput{Bucket: &legacy.Bucket, Key: &legacy.Key, Body: bytes.NewReader(inJSON)})
	require.NoError(t, err)
	got, err = k.Open(ctx, "o-forms", kept.Stored(payload.Check(legacy, nil)))
	require.NoError(t, err)
	require.Equal(t, plain, []byte(got), "an object in the JSON form opens")

	// The object cut short in the bucket.
	_, err = api.PutObject(ctx, &s3.PutObjectInput{Bucket: &ref.Bucket, Key: &ref.Key, Body: bytes.NewReader(plain[:len(plain)/2])})
	require.NoError(t, err)
	_, err = k.Open(ctx, "o-forms", asObject)
	var lost *payload.Error
	require.ErrorAs(t, err, &lost, "cut short in the bucket: its claim check says so first")
	require.ErrorContains(t, err, fmt.Sprintf("not the %d kept", ref.Bytes))

	small, err := k.SealOrder(ctx, "o-small", []byte(`{"a":1}`), map[string]string{"orderId": "o-small"})
	require.NoError(t, err)
	inline, err := k.Offload(ctx, "o-small", "order", small)
	require.NoError(t, err)
	require.Empty(t, inline.Bucket(), "kept inline")
	require.True(t, seal.IsSealed(inline.JSON()), "inline: the JSON form")
	require.Contains(t, string(inline.JSON()), `"orderId":"o-small"`)
	opened, err := k.Open(ctx, "o-small", inline)
	require.NoError(t, err)
	require.JSONEq(t, `{"a":1}`, string(opened))

	noBucket := kept.New(nil, k.Sealer())
	large, err := noBucket.Seal(ctx, "o-forms", order, plain)
	require.NoError(t, err)
	require.Greater(t, large.Len(), len(plain)*4/3, "no bucket: the JSON form, in base64, which its caller refuses over Max")
	_, err = noBucket.Offload(ctx, "o-forms", "results/a-r1", large)
	require.ErrorIs(t, err, kept.ErrNoBucket)
}

// The largest value sealed as the boundary seals it (the object form, its
// plaintext's size and a few hundred bytes; the JSON form would be four
// thirds of it in base64) is taken by the payload bucket, and read back
// and opened whole: a 16 MB result of a sealed order is not refused after
// its call took effect.
func TestTheLargestValueSealedIsKeptAndOpened(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, _, _, order := sealedOver(t, "o-big")
	plain := []byte(`{"pages":"` + strings.Repeat("p", kept.MaxBytes-12) + `"}`)
	require.Len(t, plain, kept.MaxBytes)
	key, _, err := k.Sealer().KeyOf(ctx, "o-big", order.JSON())
	require.NoError(t, err)
	inJSON, err := key.Seal(plain, nil)
	require.NoError(t, err)
	require.LessOrEqual(t, len(inJSON), payload.MaxStoredBytes, "even in the JSON form, a body the store takes (objects kept before the object form)")
	sealed, err := k.Seal(ctx, "o-big", order, plain)
	require.NoError(t, err)
	require.LessOrEqual(t, sealed.Len(), k.Max())
	v, err := k.Offload(ctx, "o-big", "results/s0-r1", sealed)
	require.NoError(t, err)
	ref, ok := payload.Parse(v.JSON())
	require.True(t, ok)
	require.Less(t, ref.Bytes, kept.MaxBytes+1024, "kept in the object form")
	opened, err := k.Open(ctx, "o-big", v)
	require.NoError(t, err)
	require.Equal(t, plain, []byte(opened))
}
