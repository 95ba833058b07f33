package kept_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/payload"
)

var endpoint string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMoto(m, &endpoint)) }

var seq atomic.Int64

// clients are the emulator's clients.
func clients(t *testing.T) *awsclient.Clients {
	t.Helper()
	c, err := awsclient.Load(context.Background(), awsclient.Options{Endpoint: endpoint, Emulated: true})
	require.NoError(t, err)
	return c
}

// bucket is a new bucket on the emulator, and its client.
func bucket(t *testing.T) (*s3.Client, string) {
	t.Helper()
	c := clients(t)
	name := fmt.Sprintf("kept-test-%d-%d", time.Now().UnixNano()%1e9, seq.Add(1))
	require.NoError(t, provision.EnsureBucket(context.Background(), c.S3, name))
	return c.S3, name
}

func TestAValueOverTheInlineLimitTravelsAsItsClaimCheck(t *testing.T) {
	t.Parallel()
	api, b := bucket(t)
	k := kept.New(kept.Payloads(api, b, 1024), nil)
	ctx := context.Background()

	small := []byte(`{"a":"` + strings.Repeat("x", 1000) + `"}`)
	v, err := k.Offload(ctx, "o-1", "order", kept.Unsealed(small, nil))
	require.NoError(t, err)
	require.Equal(t, small, []byte(v.JSON()), "a value at the limit stays inline")
	require.Empty(t, v.Bucket())

	large := []byte(`{"a":"` + strings.Repeat("y", 5000) + `"}`)
	check, err := k.Offload(ctx, "o-1", "order", kept.Unsealed(large, map[string]string{"orderId": "o-1", "workflow": ""}))
	require.NoError(t, err)
	require.Less(t, len(check.JSON()), 400)
	require.Contains(t, string(check.JSON()), `"orderId":"o-1"`, "the head rides beside the check")
	require.NotContains(t, string(check.JSON()), `"workflow"`, "an empty head member is left out")
	require.Equal(t, b, check.Bucket())
	require.EqualValues(t, len(large), check.Weight(), "it weighs what it reads back")
	ref, ok := payload.Parse(check.JSON())
	require.True(t, ok)
	require.Equal(t, len(large), ref.Bytes)
	require.Equal(t, fmt.Sprintf("%x", sha256.Sum256(large)), ref.SHA256)
	require.True(t, strings.HasPrefix(ref.Key, payload.OrderPrefix("o-1")))

	again, err := k.Offload(ctx, "o-1", "order", kept.Unsealed(large, map[string]string{"orderId": "o-1"}))
	require.NoError(t, err)
	require.JSONEq(t, string(check.JSON()), string(again.JSON()), "the same value, the same check: a try again writes the same object")

	back, err := k.Open(ctx, "o-1", check)
	require.NoError(t, err)
	require.Equal(t, large, []byte(back))
	same, err := k.Open(ctx, "o-1", v)
	require.NoError(t, err)
	require.Equal(t, small, []byte(same), "what is no check opens to itself")

	// A check of another order's value, or of another bucket (a forged
	// one: a service's answer, an event's data), reads nothing.
	var perr *payload.Error
	_, err = k.Open(ctx, "o-9", check)
	require.ErrorAs(t, err, &perr)
	require.ErrorContains(t, err, "not a payload of order o-9")
	elsewhere := ref
	elsewhere.Bucket = "another-bucket"
	_, err = k.Open(ctx, "o-1", kept.Stored(payload.Check(elsewhere, nil)))
	require.ErrorAs(t, err, &perr)
	require.True(t, kept.Broken(err), "no try again reads it")
}

func TestWithoutABucketEveryValueIsInlineUpToTheInlineMaximum(t *testing.T) {
	t.Parallel()
	for _, k := range []*kept.Boundary{nil, kept.New(nil, nil)} {
		require.Equal(t, kept.MaxInline, k.Inline())
		require.Equal(t, kept.MaxInline, k.Max())
		require.False(t, k.HasBucket())
		body := []byte(strings.Repeat("a", kept.MaxInline))
		v, err := k.Offload(context.Background(), "o", "order", kept.Unsealed(body, nil))
		require.NoError(t, err)
		require.Equal(t, body, []byte(v.JSON()))
		_, err = k.Offload(context.Background(), "o", "order", kept.Unsealed(append(body, 'b'), nil))
		require.ErrorIs(t, err, kept.ErrNoBucket)
		_, err = k.Open(context.Background(), "o", kept.Stored(payload.Check(payload.Ref{Bucket: "b", Key: "k"}, nil)))
		require.ErrorContains(t, err, "no payload bucket")
	}
}

// What stays inline is weighed as it travels in a message: U+FFFE and
// U+FFFF, which SQS refuses in a body, are escaped (six bytes for three),
// and a value whose escaped form is over the inline limit is kept in the
// bucket. Weighed raw, 171 of them stayed inline at 521 bytes, and the
// message carrying them was refused by SQS (or, escaped by its sender,
// grew past what the limit promised).
func TestAValueIsWeighedAsItTravels(t *testing.T) {
	t.Parallel()
	api, b := bucket(t)
	k := kept.New(kept.Payloads(api, b, 1024), nil)
	ctx := context.Background()
	doc := func(n int) []byte {
		return []byte(`{"a":"` + strings.Repeat("\uffff", n/2) + strings.Repeat("\ufffe", n-n/2) + `"}`)
	}

	fits := doc(169) // 515 bytes raw, 1,022 escaped
	v, err := k.Offload(ctx, "o-1", "order", kept.Unsealed(fits, nil))
	require.NoError(t, err)
	require.Len(t, v.JSON(), 1022, "inline, escaped")
	require.NotContains(t, string(v.JSON()), "\uffff")
	var a, b2 map[string]string
	require.NoError(t, json.Unmarshal(v.JSON(), &a))
	require.NoError(t, json.Unmarshal(fits, &b2))
	require.Equal(t, b2, a, "the same JSON")

	over := doc(171) // 521 bytes raw, 1,034 escaped
	check, err := k.Offload(ctx, "o-1", "order", kept.Unsealed(over, nil))
	require.NoError(t, err)
	ref, ok := payload.Parse(check.JSON())
	require.True(t, ok, "kept in the bucket")
	require.Equal(t, len(over), ref.Bytes)
}
