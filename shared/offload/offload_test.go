package offload_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/offload"
)

var endpoint string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMoto(m, &endpoint)) }

var seq atomic.Int64

// bucket is a new bucket on the emulator, and its client.
func bucket(t *testing.T) (*s3.Client, string) {
	t.Helper()
	c, err := awsclient.Load(context.Background(), awsclient.Options{Endpoint: endpoint, Emulated: true})
	require.NoError(t, err)
	name := fmt.Sprintf("offload-test-%d-%d", time.Now().UnixNano()%1e9, seq.Add(1))
	require.NoError(t, provision.EnsureBucket(context.Background(), c.S3, name))
	return c.S3, name
}

func TestAnExtendedClientPointerIsRead(t *testing.T) {
	t.Parallel()
	for body, want := range map[string][2]string{
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b-1","s3Key":"k/2"}]`:   {"b-1", "k/2"},
		` ["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3Key":"k","s3BucketName":"b"}] `:    {"b", "k"},
		`["com.amazon.sqs.javamessaging.MessageS3Pointer", {"s3BucketName": "b", "s3Key": "k"}]`:        {"b", "k"},
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"","s3Key":"k"}]`:        {},
		`["software.amazon.payloadoffloading.PayloadS3Pointer"]`:                                        {},
		`{"orderId":"software.amazon.payloadoffloading.PayloadS3Pointer"}`:                              {},
		`["other.Pointer",{"s3BucketName":"b","s3Key":"k"}]`:                                            {},
		`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}] extra`: {},
	} {
		b, k, ok := offload.Pointer(body)
		require.Equal(t, want[0] != "", ok, body)
		require.Equal(t, want, [2]string{b, k}, body)
	}
	api, b := bucket(t)
	s := offload.New(api, b)
	ctx := context.Background()
	_, err := api.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("in/1"), Body: strings.NewReader(`{"orderId":"x"}`)})
	require.NoError(t, err)
	got, err := s.Fetch(ctx, b, "in/1", 100)
	require.NoError(t, err)
	require.Equal(t, `{"orderId":"x"}`, string(got))
	_, err = s.Fetch(ctx, b, "in/1", 10)
	require.ErrorContains(t, err, "over the 10-byte limit")
	_, err = s.Fetch(ctx, b, "in/2", 100)
	var perr *offload.Error
	require.True(t, errors.As(err, &perr), "%v", err)
}

// A body offloaded is read back by its pointer, as Submission follows it;
// written over once taken (Reseal), it reads as written. Only a body under
// incoming/ is written over.
func TestAnOffloadedBodyIsFollowedAndResealedInPlace(t *testing.T) {
	t.Parallel()
	api, b := bucket(t)
	s := offload.New(api, b)
	ctx := context.Background()
	ptr, err := s.Offload(ctx, []byte(`{"orderId":"o-1"}`))
	require.NoError(t, err)
	pb, key, ok := offload.Pointer(ptr)
	require.True(t, ok, ptr)
	require.Equal(t, b, pb)
	require.True(t, offload.Incoming(key), key)
	got, err := s.Fetch(ctx, pb, key, 100)
	require.NoError(t, err)
	require.Equal(t, `{"orderId":"o-1"}`, string(got))

	require.NoError(t, s.Reseal(ctx, key, []byte(`{"orderId":"o-1","$sasSealed":{}}`)))
	got, err = s.Fetch(ctx, pb, key, 100)
	require.NoError(t, err)
	require.Equal(t, `{"orderId":"o-1","$sasSealed":{}}`, string(got))
	require.ErrorContains(t, s.Reseal(ctx, offload.OrdersPrefix+"o-1/order/00", []byte(`{}`)), "only a body offloaded under incoming/")

	var none *offload.Store
	_, err = none.Offload(ctx, []byte(`{}`))
	require.ErrorContains(t, err, "no payload bucket")
	_, err = none.Fetch(ctx, b, key, 100)
	require.ErrorContains(t, err, "no payload bucket")
	require.Empty(t, none.Bucket())
}
