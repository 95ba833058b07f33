package seal_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
)

var endpoint string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMoto(m, &endpoint)) }

// counting counts the KMS requests a Sealer makes.
type counting struct {
	*kms.Client
	decrypts atomic.Int32
}

func (c *counting) Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	c.decrypts.Add(1)
	return c.Client.Decrypt(ctx, in, opts...)
}

// sealer is a Sealer under a new key of moto's KMS, and its client.
func sealer(t *testing.T) (*seal.Sealer, *counting, string) {
	t.Helper()
	c, err := awsclient.Load(context.Background(), awsclient.Options{Endpoint: endpoint, Emulated: true})
	require.NoError(t, err)
	key, err := provision.EnsureKey(context.Background(), c.KMS, "alias/seal-test-"+strings.ReplaceAll(t.Name(), "/", "-"))
	require.NoError(t, err)
	api := &counting{Client: c.KMS}
	return seal.New(api, key), api, key
}

func TestSealedDataOpensForItsOrderOnly(t *testing.T) {
	t.Parallel()
	s, api, _ := sealer(t)
	ctx := context.Background()
	key, err := s.NewKey(ctx, "o-1")
	require.NoError(t, err)
	plain := []byte(`{"orderId":"o-1","card":"4111-1111"}`)
	sealed, err := key.Seal(plain, map[string]string{"orderId": "o-1", "workflow": ""})
	require.NoError(t, err)
	require.True(t, seal.IsSealed(sealed))
	require.NotContains(t, string(sealed), "4111", "ciphertext only")
	require.Contains(t, string(sealed), `"orderId":"o-1"`, "the head in clear")

	got, err := s.Open(ctx, "o-1", sealed)
	require.NoError(t, err)
	require.Equal(t, plain, got)
	again, err := key.Seal(plain, nil)
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "a nonce of its own each time")

	// Another Sealer (another instance: its own cache) asks KMS once for
	// the order's key, then keeps it.
	other := seal.New(api, "")
	for range 3 {
		got, err := other.Open(ctx, "o-1", again)
		require.NoError(t, err)
		require.Equal(t, plain, got)
	}
	require.EqualValues(t, 1, api.decrypts.Load(), "one Decrypt for three reads of the order's data")

	var broken *seal.Error
	_, err = seal.New(api, "").Open(ctx, "o-2", sealed)
	require.ErrorAs(t, err, &broken, "another order's id is not the key's encryption context")
	var env struct {
		E map[string][]byte `json:"$sasSealed"`
	}
	require.NoError(t, json.Unmarshal(sealed, &env))
	env.E["data"][3] ^= 1
	altered, _ := json.Marshal(map[string]any{seal.Member: env.E})
	_, err = s.Open(ctx, "o-1", altered)
	require.ErrorAs(t, err, &broken, "altered data does not open")
	require.ErrorContains(t, err, "altered")

	clear, err := s.Open(ctx, "o-1", []byte(`{"a":1}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"a":1}`, string(clear), "what is not sealed is itself")
	var none *seal.Sealer
	_, err = none.Open(ctx, "o-1", sealed)
	require.ErrorContains(t, err, "this function has no data key")
	var noKey *seal.Error
	require.True(t, errors.As(err, &noKey) && noKey.NoKey, "one whose configuration lags its deployment's: given back, not failed")
}

// A sealed order's key is found from its stored form: sealed inline, or
// its claim check with the key in its head; an order not sealed has none.
func TestAnOrdersKeyIsFoundFromItsStoredForm(t *testing.T) {
	t.Parallel()
	s, _, _ := sealer(t)
	ctx := context.Background()
	key, err := s.NewKey(ctx, "o-3")
	require.NoError(t, err)
	sealed, err := key.Seal([]byte(`{"orderId":"o-3"}`), nil)
	require.NoError(t, err)
	check := payload.Check(payload.Ref{Bucket: "b", Key: "k", Bytes: 9, SHA256: "00"},
		map[string]string{"orderId": "o-3", seal.KeyMember: base64.StdEncoding.EncodeToString(key.Blob())})
	for _, stored := range [][]byte{sealed, check} {
		k, ok, err := s.KeyOf(ctx, "o-3", stored)
		require.NoError(t, err)
		require.True(t, ok)
		result, err := k.Seal([]byte(`{"r":1}`), nil)
		require.NoError(t, err)
		got, err := s.Open(ctx, "o-3", result)
		require.NoError(t, err)
		require.JSONEq(t, `{"r":1}`, string(got), "a result sealed under the order's key opens")
	}
	_, ok, err := s.KeyOf(ctx, "o-4", []byte(`{"orderId":"o-4"}`))
	require.NoError(t, err)
	require.False(t, ok, "an order not sealed")
}

// incorrectKey is KMS answering a Decrypt whose KeyId is not the key the
// blob was made under (what KMS answers, and moto does not: it denies).
type incorrectKey struct{ seal.API }

func (incorrectKey) Decrypt(context.Context, *kms.DecryptInput, ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	return nil, &types.IncorrectKeyException{Message: aws.String("The key ID in the request does not identify a CMK that can perform this operation.")}
}

// A secret is made as an order's data key is, its owner's name in the
// order id's place (so the same role conditions hold), and opens for that
// owner alone; one made under another key (the deployment's key changed,
// an alias pointed elsewhere) is a *seal.Error: no try again opens it, and
// its owner makes it anew (keyname.Namer).
func TestASecretOpensForItsOwnerUnderItsKeyOnly(t *testing.T) {
	t.Parallel()
	s, api, key := sealer(t)
	ctx := context.Background()
	plain, blob, err := s.NewSecret(ctx, "~agent/payment")
	require.NoError(t, err)
	require.Len(t, plain, 32)
	require.Equal(t, key, s.KeyID())
	got, err := seal.New(api, key).OpenSecret(ctx, "~agent/payment", blob) // another instance's Sealer: from KMS
	require.NoError(t, err)
	require.Equal(t, plain, got)
	var broken *seal.Error
	_, err = seal.New(api, key).OpenSecret(ctx, "~agent/courier", blob)
	require.ErrorAs(t, err, &broken, "another owner's")
	_, err = seal.New(incorrectKey{}, key).OpenSecret(ctx, "~agent/payment", blob)
	require.ErrorAs(t, err, &broken, "under another key")
	require.Contains(t, err.Error(), "not under the deployment's key")
}
