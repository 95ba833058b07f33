package chaos

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// storeFaults is the handlers' DynamoDB HTTP client under the plan's state
// store faults (Plan.StoreFaults): a request that fails before it reaches
// the engine, and a write the engine applied whose answer is lost (a
// connection cut). The SDK tries each again as it would against AWS, and
// its condition then meets the write's own outcome; when its tries are
// spent, the handler sees the error (the product reads the item back).
type storeFaults struct {
	next dynamodb.HTTPClient
	in   *Injector // counts them
	rate float64
	mu   *sync.Mutex
	rng  *rand.Rand // its own: the seed's other faults draw as without it
}

// Do implements dynamodb.HTTPClient.
func (f storeFaults) Do(r *http.Request) (*http.Response, error) {
	rate := f.rate
	if f.draw() < rate/2 {
		f.in.count("state store request failed (the SDK tries it again)")
		return nil, syscall.ECONNRESET
	}
	resp, err := f.next.Do(r)
	target := r.Header.Get("X-Amz-Target")
	write := strings.HasSuffix(target, ".UpdateItem") || strings.HasSuffix(target, ".PutItem") ||
		strings.HasSuffix(target, ".TransactWriteItems") || strings.HasSuffix(target, ".DeleteItem")
	if err != nil || resp.StatusCode != http.StatusOK || !write || f.draw() >= rate/2 {
		return resp, err
	}
	_ = resp.Body.Close()
	f.in.count("state store write applied, its answer lost (the SDK tries it again)")
	return nil, syscall.ECONNRESET
}

// draw is the next number in [0,1).
func (f storeFaults) draw() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64()
}

// storeFaults wraps the handlers' DynamoDB client with the plan's state
// store faults (none: nil).
func (p Plan) storeFaults(in *Injector) func(dynamodb.HTTPClient) dynamodb.HTTPClient {
	if p.StoreFaults <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(p.Seed, 0xdb))
	mu := &sync.Mutex{}
	return func(next dynamodb.HTTPClient) dynamodb.HTTPClient {
		return storeFaults{next: next, in: in, rate: p.StoreFaults, mu: mu, rng: rng}
	}
}
