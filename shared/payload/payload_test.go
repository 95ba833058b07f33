package payload_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/payload"
)

var endpoint string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMoto(m, &endpoint)) }

var seq atomic.Int64

// bucket is a new bucket on the emulator, and its client.
func bucket(t *testing.T) (*s3.Client, string) {
	t.Helper()
	c, err := awsclient.Load(context.Background(), awsclient.Options{Endpoint: endpoint, Emulated: true})
	require.NoError(t, err)
	name := fmt.Sprintf("payload-test-%d-%d", time.Now().UnixNano()%1e9, seq.Add(1))
	require.NoError(t, provision.EnsureBucket(context.Background(), c.S3, name))
	return c.S3, name
}

func TestAPayloadGoneOrAlteredIsAnErrorThatNamesIt(t *testing.T) {
	t.Parallel()
	api, b := bucket(t)
	s := payload.New(api, b, 1024)
	ctx := context.Background()
	body := []byte(`"` + strings.Repeat("z", 4000) + `"`)
	ref, err := s.Put(ctx, "o-2", "results/charge-r1", body, false)
	require.NoError(t, err)

	overwrite := func(b []byte) {
		_, err := api.PutObject(ctx, &s3.PutObjectInput{Bucket: &ref.Bucket, Key: &ref.Key, Body: strings.NewReader(string(b))})
		require.NoError(t, err)
	}
	var perr *payload.Error
	altered := append([]byte{}, body...)
	altered[100] = 'Z'
	overwrite(altered)
	_, err = s.Get(ctx, ref)
	require.ErrorAs(t, err, &perr)
	require.ErrorContains(t, err, "SHA-256 differs")
	require.ErrorContains(t, err, ref.Key)

	overwrite(body[:100])
	_, err = s.Get(ctx, ref)
	require.ErrorAs(t, err, &perr)
	require.ErrorContains(t, err, "holds 100 bytes")

	overwrite(append(body, ' '))
	_, err = s.Get(ctx, ref)
	require.ErrorAs(t, err, &perr)
	require.ErrorContains(t, err, "more than")

	_, err = api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
	require.NoError(t, err)
	_, err = s.Get(ctx, ref)
	require.ErrorAs(t, err, &perr)
	require.ErrorContains(t, err, "not found")

	// Not one of these errors: S3 itself failing, tried again.
	_, err = payload.New(api, "no-such-bucket-here", 0).Get(ctx, payload.Ref{Bucket: "no-such-bucket-here", Key: "k", Bytes: 1})
	require.ErrorAs(t, err, &perr, "a bucket that is gone is gone")
}

// A resubmitted order's payloads are written again, so that the bucket's
// expiry (days after an object's last write) counts from its new round,
// each still labelled as what it is: JSON, or a sealed object form (its
// key says so).
func TestRenewWritesEveryPayloadOfTheOrderAgain(t *testing.T) {
	t.Parallel()
	api, b := bucket(t)
	s := payload.New(api, b, 1024)
	ctx := context.Background()
	var refs []payload.Ref
	for _, what := range []string{"order", "results/a-r1", "results/b-r1"} {
		body := []byte(`"` + what + strings.Repeat(".", 2000) + `"`)
		if what == "results/b-r1" {
			body = []byte("\x00sas-sealed-1\n" + what + strings.Repeat("\x01", 2000)) // as seal.Key.SealObject makes them
		}
		ref, err := s.Put(ctx, "o-3", what, body, what == "results/b-r1")
		require.NoError(t, err)
		refs = append(refs, ref)
	}
	require.True(t, strings.HasSuffix(refs[2].Key, payload.SealedSuffix), refs[2].Key)
	require.False(t, strings.HasSuffix(refs[1].Key, payload.SealedSuffix), refs[1].Key)
	_, err := s.Put(ctx, "o-30", "order", []byte(`"another order's"`), false)
	require.NoError(t, err)
	written := func(ref payload.Ref) time.Time {
		h, err := api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
		require.NoError(t, err)
		return aws.ToTime(h.LastModified)
	}
	first := written(refs[0])
	for !time.Now().Truncate(time.Second).After(first) { // S3 keeps whole seconds: wait for the next
		time.Sleep(20 * time.Millisecond)
	}
	n, err := s.Renew(ctx, "o-3")
	require.NoError(t, err)
	require.Equal(t, 3, n, "the order's three payloads, not the other order's")
	for i, ref := range refs {
		require.True(t, written(ref).After(first), "%s written again", ref.Key)
		_, err := s.Get(ctx, ref)
		require.NoError(t, err, "and still as kept")
		h, err := api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
		require.NoError(t, err)
		require.Equal(t, map[bool]string{false: "application/json", true: "application/octet-stream"}[i == 2], aws.ToString(h.ContentType), ref.Key)
	}
}

// Every payload of an order is renewed whatever its key holds: an order
// id's letters, digits and "_.:-", a forEach item's record name
// (extract#1) and an event's name, each a character S3's copy source must
// have URL-encoded ("#" cut it: a resubmission of an order with a forEach
// result in the bucket failed with NoSuchKey), and those a key of another
// writer may hold besides (a space, "+", "%", "?", "&", "=", non-ASCII).
func TestRenewReachesAPayloadWhateverItsKeyHolds(t *testing.T) {
	t.Parallel()
	api, b := bucket(t)
	s := payload.New(api, b, 1024)
	ctx := context.Background()
	const id = "Zz09_.:-o"
	whats := []string{"order", "results/extract#1-r1", "results/a.b_c-d#100-r2", "events/Approved_.-x",
		"results/ +%?&=;,@$!'()*[]~é-r1"}
	var refs []payload.Ref
	for _, what := range whats {
		ref, err := s.Put(ctx, id, what, []byte(`"`+what+strings.Repeat(".", 2000)+`"`), false)
		require.NoError(t, err)
		refs = append(refs, ref)
	}
	first := time.Now()
	for !time.Now().Truncate(time.Second).After(first) { // S3 keeps whole seconds: wait for the next
		time.Sleep(20 * time.Millisecond)
	}
	n, err := s.Renew(ctx, id)
	require.NoError(t, err)
	require.Equal(t, len(whats), n)
	for _, ref := range refs {
		h, err := api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
		require.NoError(t, err, ref.Key)
		require.True(t, aws.ToTime(h.LastModified).After(first.Truncate(time.Second)), "%s written again", ref.Key)
		_, err = s.Get(ctx, ref)
		require.NoError(t, err, "%s still as kept", ref.Key)
	}
}

// Open streams a payload as it is read, checked: a receiver given its
// length never has bytes other than the kept ones, for its last byte comes
// only once the whole object was checked against its hash.
func TestAnOpenedPayloadGivesItsLastByteOnlyOnceChecked(t *testing.T) {
	t.Parallel()
	api, b := bucket(t)
	s := payload.New(api, b, 1024)
	ctx := context.Background()
	body := []byte(`"` + strings.Repeat("s", 100_000) + `"`)
	ref, err := s.Put(ctx, "o-4", "order", body, false)
	require.NoError(t, err)

	r, err := s.Open(ctx, ref)
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Equal(t, body, got, "the object, whole")

	var perr *payload.Error
	altered := append([]byte{}, body...)
	altered[5000] = 'S'
	_, err = api.PutObject(ctx, &s3.PutObjectInput{Bucket: &ref.Bucket, Key: &ref.Key, Body: bytes.NewReader(altered)})
	require.NoError(t, err)
	r, err = s.Open(ctx, ref)
	require.NoError(t, err, "its length is the kept one")
	got, err = io.ReadAll(r)
	require.ErrorAs(t, err, &perr)
	require.ErrorContains(t, err, "SHA-256 differs")
	require.Len(t, got, len(body)-1, "every byte but the last: a receiver of its length never has the whole")
	r.Close()

	for _, other := range [][]byte{body[:500], append(append([]byte{}, body...), ' ')} {
		_, err = api.PutObject(ctx, &s3.PutObjectInput{Bucket: &ref.Bucket, Key: &ref.Key, Body: bytes.NewReader(other)})
		require.NoError(t, err)
		_, err = s.Open(ctx, ref)
		require.ErrorAs(t, err, &perr, "%d bytes", len(other))
		require.ErrorContains(t, err, "not the 100002 kept")
	}
	_, err = api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
	require.NoError(t, err)
	_, err = s.Open(ctx, ref)
	require.ErrorAs(t, err, &perr)
	require.ErrorContains(t, err, "not found")

	// A read cut short (a connection reset) is S3 failing, tried again:
	// no *Error; nor one whose length S3 did not say, that ends short.
	for name, obj := range map[string]*s3.GetObjectOutput{
		"cut": {Body: io.NopCloser(io.MultiReader(bytes.NewReader(body[:700]), iotest.ErrReader(errors.New("connection reset")))), ContentLength: aws.Int64(int64(len(body)))},
		"cut at its last byte": {Body: io.NopCloser(io.MultiReader(bytes.NewReader(body[:len(body)-1]), iotest.ErrReader(io.ErrUnexpectedEOF))),
			ContentLength: aws.Int64(int64(len(body)))},
		"short": {Body: io.NopCloser(bytes.NewReader(body[:700]))},
		"long":  {Body: io.NopCloser(bytes.NewReader(append(append([]byte{}, body...), ' ')))},
	} {
		r, err := payload.New(cannedObject{obj}, b, 1024).Open(ctx, ref)
		require.NoError(t, err, name)
		got, err := io.ReadAll(r)
		if strings.HasPrefix(name, "cut") {
			require.False(t, errors.As(err, &perr), "%s: %v", name, err)
		} else {
			require.ErrorAs(t, err, &perr, name)
		}
		require.Less(t, len(got), len(body), name)
	}
}

// cannedObject answers every GetObject with its object.
type cannedObject struct{ out *s3.GetObjectOutput }

func (c cannedObject) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return c.out, nil
}
func (cannedObject) PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return nil, errors.New("not kept here")
}
func (cannedObject) CopyObject(context.Context, *s3.CopyObjectInput, ...func(*s3.Options)) (*s3.CopyObjectOutput, error) {
	return nil, errors.New("not kept here")
}
func (cannedObject) ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	return nil, errors.New("not kept here")
}

// A claim check read from an order's data is read back for that order
// only, from this deployment's bucket: one that names another order's
// object, or another bucket (a forged one: a service's answer, an event's
// data), reads nothing. Without a bucket nothing is kept, nor read.
func TestACheckBelongsToItsOrderAndItsBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := payload.New(nil, "b", 0)
	ref := payload.Ref{Bucket: "b", Key: payload.OrderPrefix("o-1") + "order/00", Bytes: 1, SHA256: "00"}
	require.NoError(t, s.Belongs("o-1", ref))
	var perr *payload.Error
	require.ErrorAs(t, s.Belongs("o-9", ref), &perr)
	require.ErrorContains(t, s.Belongs("o-9", ref), "not a payload of order o-9")
	elsewhere := ref
	elsewhere.Bucket = "another-bucket"
	require.ErrorAs(t, s.Belongs("o-1", elsewhere), &perr)

	var none *payload.Store
	require.NoError(t, none.Belongs("o-9", ref), "a store with no bucket refuses when it is asked to read")
	_, err := none.Get(ctx, ref)
	require.ErrorContains(t, err, "no payload bucket")
	for _, s := range []*payload.Store{none, payload.New(nil, "", 0)} {
		_, err = s.Put(ctx, "o-1", "order", []byte(`"x"`), false)
		require.ErrorIs(t, err, payload.ErrNoBucket)
	}
}
