package explore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing/iotest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/payload"
)

// objects is the payload bucket of a run that keeps its payloads there
// (plan.payloads): in memory, as the explorer's queues are, so that the
// explorer decides its faults: with faults, a write whose answer is lost
// after the object was stored (the writer tries again: the same object, by
// its hash), and a read that fails (its message comes back). Its real
// behaviour is S3's, tested on moto (shared/payload).
type objects struct {
	mu     sync.Mutex
	rng    *rand.Rand // its own: a regression seed's run is the same without it
	faulty bool
	byKey  map[string][]byte
	count  func(string)
	// offloads names the bodies senders offload (offload).
	offloads int
}

// bucketName is the payload bucket's name in every run.
const bucketName = "explore-payloads"

// newObjects is a run's bucket: faults injected if faulty.
func newObjects(seed uint64, faulty bool, count func(string)) *objects {
	return &objects{rng: rand.New(rand.NewPCG(seed, 0x0b1)), faulty: faulty, byKey: map[string][]byte{}, count: count}
}

// fault reports whether the explorer fails this request (1 in n, with faults).
func (o *objects) fault(n int) bool { return o.faulty && o.rng.IntN(n) == 0 }

// errLost is a request whose answer the explorer lost.
var errLost = errors.New("connection reset by the explorer")

// PutObject stores the object; with faults, its answer may be lost after.
func (o *objects) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	b, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.byKey[aws.ToString(in.Key)] = b
	o.count("payloads kept")
	if o.fault(6) {
		o.count("payload writes whose answer was lost")
		return nil, errLost
	}
	return &s3.PutObjectOutput{}, nil
}

// GetObject reads the object; with faults, the read may fail.
func (o *objects) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cut := false
	if o.fault(8) {
		if cut = o.rng.IntN(2) == 0; !cut {
			o.count("payload reads failed")
			return nil, errLost
		}
	}
	b, ok := o.byKey[aws.ToString(in.Key)]
	if !ok {
		return nil, &types.NoSuchKey{Message: aws.String("no such key")}
	}
	var body io.Reader = bytes.NewReader(b)
	if cut {
		// Its connection reset halfway: read whole into memory, or sent on
		// to a service as it is read (a step's input, streamed), it fails.
		o.count("payload reads cut short")
		body = io.MultiReader(bytes.NewReader(b[:len(b)/2]), iotest.ErrReader(errLost))
	} else {
		o.count("payloads read back")
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(body), ContentLength: aws.Int64(int64(len(b)))}, nil
}

// CopyObject writes an object again in place (payload.Store.Renew). Its
// copy source is read as S3 reads it, a URL's path: cut at a "#" or a "?",
// then unescaped; a source that names no object is NoSuchKey (a key's "#"
// sent as it is failed every operator's decision on an order with a
// forEach result in the bucket).
func (o *objects) CopyObject(_ context.Context, in *s3.CopyObjectInput, _ ...func(*s3.Options)) (*s3.CopyObjectOutput, error) {
	u, err := url.Parse(aws.ToString(in.CopySource))
	if err != nil {
		return nil, fmt.Errorf("copy source %q: %w", aws.ToString(in.CopySource), err)
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.byKey[key]; !ok || bucket != bucketName {
		return nil, &types.NoSuchKey{Message: aws.String("no such key: " + key)}
	}
	return &s3.CopyObjectOutput{}, nil
}

// ListObjectsV2 lists the keys under a prefix, in one page.
func (o *objects) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := &s3.ListObjectsV2Output{}
	for _, k := range slices.Sorted(maps.Keys(o.byKey)) {
		if strings.HasPrefix(k, aws.ToString(in.Prefix)) {
			out.Contents = append(out.Contents, types.Object{Key: aws.String(k), Size: aws.Int64(int64(len(o.byKey[k])))})
		}
	}
	return out, nil
}

// offload keeps body under incoming/ as an SQS Extended Client sender
// does, under a name of its own (its own write, with no fault of the
// explorer's), and returns the pointer message to send in its place. With
// atRoot, it keeps it at the bucket's root instead, as the Python library
// does by default.
func (o *objects) offload(body string, atRoot bool) string {
	o.mu.Lock()
	o.offloads++
	key := fmt.Sprintf("%sexplore-%d", offload.IncomingPrefix, o.offloads)
	if atRoot {
		key = fmt.Sprintf("explore-%d", o.offloads)
	}
	o.byKey[key] = []byte(body)
	o.mu.Unlock()
	ptr, _ := json.Marshal([]any{"software.amazon.payloadoffloading.PayloadS3Pointer",
		map[string]string{"s3BucketName": bucketName, "s3Key": key}}) // strings: no error
	return string(ptr)
}

// keys are the keys under prefix, sorted.
func (o *objects) keys(prefix string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(o.byKey)) {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	return keys
}

// object is what key holds now (nil: nothing).
func (o *objects) object(key string) []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byKey[key]
}

var _ payload.API = (*objects)(nil)
