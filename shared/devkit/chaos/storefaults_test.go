package chaos

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
)

// The rate check's probe of the store times one write past the injected
// state store faults: a store that fails every request of the handlers'
// client still answers the probe, which neither draws from the faults'
// stream nor adds to their counts (it did both, so a run's fault figures
// counted the probe's faults with the handlers').
func TestTheStoresProbeGoesPastTheInjectedFaults(t *testing.T) {
	var writes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writes.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	in := NewInjector(Plan{Seed: 1})
	faults := storeFaults{next: srv.Client(), in: in, rate: 2, mu: &sync.Mutex{}, rng: rand.New(rand.NewPCG(1, 0xdb))} // every request fails
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), HTTPClient: faults,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	ctx := context.Background()

	item := map[string]types.AttributeValue{"OrderID": &types.AttributeValueMemberS{Value: "o-1"}}
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("state"), Item: item}, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	require.Error(t, err, "the handlers' requests fail")
	require.Equal(t, map[string]int{"state store request failed (the SDK tries it again)": 1}, in.Counts())
	require.Zero(t, writes.Load())

	require.Positive(t, storeRoundTrip(ctx, db, "state"), "the probe's write went through")
	require.Equal(t, int32(1), writes.Load())
	require.Equal(t, map[string]int{"state store request failed (the SDK tries it again)": 1}, in.Counts(), "the probe's is not counted")
}
