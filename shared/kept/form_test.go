package kept_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
)

// fixedKMS is a KMS whose every data key is the same, its blob naming the
// order it was made for.
type fixedKMS struct{}

var fixedKey = bytes.Repeat([]byte{7}, 32)

func (fixedKMS) GenerateDataKey(_ context.Context, in *kms.GenerateDataKeyInput, _ ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	return &kms.GenerateDataKeyOutput{Plaintext: fixedKey, CiphertextBlob: []byte("blob of " + in.EncryptionContext["orderId"])}, nil
}

func (fixedKMS) Decrypt(_ context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	if string(in.CiphertextBlob) != "blob of "+in.EncryptionContext["orderId"] {
		return nil, &kmstypes.InvalidCiphertextException{Message: aws.String("not this order's")}
	}
	return &kms.DecryptOutput{Plaintext: fixedKey}, nil
}

// sealedOrder is an order of orderID sealed inline under a data key of its
// own, as Submission keeps one, on a boundary with no bucket.
func sealedOrder(t *testing.T, orderID string) (*kept.Boundary, kept.Value) {
	t.Helper()
	k := kept.New(nil, kept.Sealer(fixedKMS{}, "key"))
	s, err := k.SealOrder(context.Background(), orderID, []byte(`{"orderId":"`+orderID+`","card":"4111"}`), map[string]string{"orderId": orderID})
	require.NoError(t, err)
	v, err := k.Offload(context.Background(), orderID, "order", s)
	require.NoError(t, err)
	return k, v
}

// Only what the product makes is in its own form: a claim check, sealed
// data in either form. A value that merely holds their members deeper, or
// a check of no object, is not.
func TestOwnIsAClaimCheckOrSealedDataOnly(t *testing.T) {
	t.Parallel()
	_, sealed := sealedOrder(t, "o-1")
	for raw, own := range map[string]bool{
		string(payload.Check(payload.Ref{Bucket: "b", Key: "k", Bytes: 1, SHA256: "00"}, nil)): true,
		string(sealed.JSON()):                               true,
		"\x00sas-sealed-1\nwhatever":                        true,
		`{"orderId":"o-1"}`:                                 false,
		`{"data":{"$sasPayload":{"bucket":"b","key":"k"}}}`: false,
		`{"$sasPayload":{"bucket":"","key":"k"}}`:           false,
		`"$sasSealed"`:                                      false,
		``:                                                  false,
	} {
		require.Equal(t, own, kept.Own([]byte(raw)), "%.80q", raw)
	}
}

// A sealed order's results are sealed under its data key, and open to
// what was given; an order not sealed keeps them as they are. A function
// with no data key meets a sealed order as NoKey, before anything is read,
// and never keeps its results in clear.
func TestWhatIsMadeOfASealedOrderIsSealedUnderItsKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, order := sealedOrder(t, "o-1")
	require.True(t, seal.IsSealed(order.JSON()))
	require.NotContains(t, string(order.JSON()), "4111")
	s, err := k.Seal(ctx, "o-1", order, []byte(`{"charged":"4111"}`))
	require.NoError(t, err)
	v, err := k.Offload(ctx, "o-1", "results/charge-r1", s)
	require.NoError(t, err)
	require.NotContains(t, string(v.JSON()), "4111")
	opened, err := k.Open(ctx, "o-1", v)
	require.NoError(t, err)
	require.JSONEq(t, `{"charged":"4111"}`, string(opened))

	clear := kept.Stored([]byte(`{"orderId":"o-2"}`))
	s, err = k.Seal(ctx, "o-2", clear, []byte(`{"charged":"4111"}`))
	require.NoError(t, err)
	v, err = k.Offload(ctx, "o-2", "results/charge-r1", s)
	require.NoError(t, err)
	require.Equal(t, `{"charged":"4111"}`, string(v.JSON()), "an order not sealed: as it is")

	var none *kept.Boundary
	require.True(t, kept.NoKey(none.Readable("o-1", order)), "no key: given back before anything is read")
	require.NoError(t, none.Readable("o-2", clear))
	_, err = none.Seal(ctx, "o-1", order, []byte(`{}`))
	require.True(t, kept.NoKey(err), "no result of a sealed order kept in clear: %v", err)
	require.False(t, kept.Broken(err), "given back, not failed")
	_, err = kept.New(nil, kept.Sealer(fixedKMS{}, "key")).Open(ctx, "o-9", order)
	require.True(t, kept.Broken(err), "another order's data: it does not open, now or ever: %v", err)
}

// checkOf is the claim check of body, as if it were kept in bucket b.
func checkOf(body string) kept.Value {
	return kept.Stored(payload.Check(payload.Ref{Bucket: "b", Key: payload.OrderPrefix("o-1") + "order/x", Bytes: len(body),
		SHA256: fmt.Sprintf("%x", sha256.Sum256([]byte(body)))}, nil))
}

// An order as stored is the order sent: by its bytes, by its claim check's
// SHA-256, or, sealed, once opened.
func TestAStoredOrderIsTheSameAsItsBody(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, sealed := sealedOrder(t, "o-1")
	for _, c := range []struct {
		stored kept.Value
		body   string
		same   bool
	}{
		{kept.Stored([]byte(`{"orderId":"o-1"}`)), `{"orderId":"o-1"}`, true},
		{kept.Stored([]byte(`{"orderId":"o-1"}`)), `{"orderId":"o-1","x":1}`, false},
		{checkOf(`{"orderId":"o-1"}`), `{"orderId":"o-1"}`, true}, // by its hash: nothing read
		{checkOf(`{"orderId":"o-1"}`), `{"orderId":"o-2"}`, false},
		{sealed, `{"orderId":"o-1","card":"4111"}`, true},
		{sealed, `{"orderId":"o-1","card":"4112"}`, false},
	} {
		same, err := k.Same(ctx, "o-1", c.stored, c.body)
		require.NoError(t, err)
		require.Equal(t, c.same, same, "%.60s", c.body)
	}
}
