package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/resilience"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// memObjects is a payload bucket in memory (S3's own behaviour is
// payload's tests', on moto).
type memObjects struct {
	payload.API
	mu   sync.Mutex
	byID map[string][]byte
}

func (m *memObjects) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	b, err := io.ReadAll(in.Body)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byID[aws.ToString(in.Key)] = b
	return &s3.PutObjectOutput{}, err
}

func (m *memObjects) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.byID[aws.ToString(in.Key)]
	if !ok {
		return nil, &types.NoSuchKey{}
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(bytes.NewReader(b)), ContentLength: aws.Int64(int64(len(b)))}, nil
}

// keeping is the fixture's store, keeping the results put.
type keeping struct {
	*claims
	mu   sync.Mutex
	kept []json.RawMessage
}

func (k *keeping) PutResult(ctx context.Context, r statestore.Result) error {
	k.mu.Lock()
	k.kept = append(k.kept, r.JSON)
	k.mu.Unlock()
	return k.claims.PutResult(ctx, r)
}

// answerCase is a service's answer, and what its step makes of it: the
// result kept (its kept form), or the refusal's reason.
type answerCase struct {
	answer  []byte
	kept    string // "" with refused
	refused string // a regular expression
	undo    bool   // the answer is an undo's: not kept, nothing refused
}

// An answer is weighed by its kept form (a JSON string, if it is not JSON:
// "<", ">", "&" a byte each, control bytes six, invalid UTF-8 three), and,
// stored sealed, by what is stored: at the smallest and the largest result
// limit, with and without a payload bucket, sealed and not. An answer that
// cannot be kept is refused at once, the step oversized, the reason giving
// its sizes: it was weighed as it came and then kept in another form,
// which failed to be kept on every try, nothing recorded, and the step
// failed as timed out though its service answered (40 KB of "<" under a
// 60 KB limit with no bucket was 245,762 bytes to keep; 4 MB of control
// bytes under 16 MB, 25 MB).
func TestAnAnswerIsWeighedAsItIsKept(t *testing.T) {
	t.Parallel()
	quoted := func(s string) string { return `"` + s + `"` }
	ctl4MB, ctl60KB := bytes.Repeat([]byte{1}, 4<<20), bytes.Repeat([]byte{1}, 60<<10)
	json60KB := []byte(`{"pad":"` + strings.Repeat("j", 60<<10-10) + `"}`)
	lt40KB := strings.Repeat("<", 40<<10)
	for _, limit := range []int{1, workflow.MaxResultLimit} {
		for _, bucket := range []bool{false, true} {
			for _, sealed := range []bool{false, true} {
				cases := map[string]answerCase{
					"JSON at the limit": {answer: []byte("7"), kept: "7"},
					"a byte of text": {answer: []byte("<"), refused: regexp.QuoteMeta("inventory answered 1 bytes, not JSON: kept as a JSON string of 3 bytes, " +
						"over workflow order's 1-byte result limit (resultLimit)")},
					"an undo's byte of text": {answer: []byte("<"), undo: true},
				}
				if limit > 1 {
					noRoom := func(came, stored string) string { // stored: a regular expression
						if bucket {
							return ""
						}
						return regexp.QuoteMeta("inventory answered "+came) + stored +
							regexp.QuoteMeta(", over the 65536 a deployment without a payload bucket keeps (payloadBucket)")
					}
					cases = map[string]answerCase{
						"40 KB of <": {answer: []byte(lt40KB), kept: quoted(lt40KB)},
						"4 MB of control bytes": {answer: ctl4MB, refused: regexp.QuoteMeta("inventory answered 4194304 bytes, not JSON: kept as a JSON string " +
							"of 25165826 bytes, over workflow order's 16777216-byte result limit (resultLimit)")},
						"60 KB of control bytes": {answer: ctl60KB, kept: quoted(strings.Repeat(`\u0001`, 60<<10)),
							refused: noRoom("61440 bytes, not JSON: kept as a JSON string of 368642 bytes", "")},
						"60 KB of JSON": {answer: json60KB, kept: string(json60KB)},
					}
					if sealed && !bucket {
						c := cases["60 KB of JSON"]
						c.refused = noRoom("61440 bytes", `, 8[0-9]{4} sealed`)
						cases["60 KB of JSON"] = c
					}
				}
				for name, c := range cases {
					t.Run(fmt.Sprintf("limit %d, bucket %t, sealed %t, %s", limit, bucket, sealed, name), func(t *testing.T) {
						t.Parallel()
						weighed(t, limit, bucket, sealed, c)
					})
				}
			}
		}
	}
}

// weighed runs an attempt of a workflow whose result limit is limit, with
// a payload bucket or not, its order sealed or not, whose service answers
// c.answer, and checks what its step made of it.
func weighed(t *testing.T, limit int, bucket, sealed bool, c answerCase) {
	d := workflow.Orders(workflow.Settings{})
	d.ResultLimit = limit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(c.answer) }))
	t.Cleanup(srv.Close)
	out, store := &sent{}, &keeping{claims: &claims{timeout: time.Minute, refuse: map[string]error{}}}
	deps := agent.Deps{Remote: &agent.HTTPRemote{Endpoint: srv.URL, Service: "inventory", Client: srv.Client()},
		Breaker: &resilience.Breaker{Threshold: 100, Cooldown: time.Second}, Store: store, Outcomes: recorder{store.claims}, Send: out,
		Metrics: metrics.New(metrics.NewTally(), "agent"), Log: slog.New(slog.DiscardHandler)}
	var p *payload.Store
	var x *seal.Sealer
	if bucket {
		p = payload.New(&memObjects{byID: map[string][]byte{}}, "b", 0)
	}
	order := json.RawMessage(`{"orderId":"o-1"}`)
	if sealed {
		x = seal.New(fixedKMS{}, "key")
		key, err := x.NewKey(context.Background(), "o-1")
		require.NoError(t, err)
		order, err = key.Seal(order, map[string]string{"orderId": "o-1"})
		require.NoError(t, err)
	}
	deps.Kept = kept.New(p, x)
	h := agent.New(agent.Config{Workflows: workflow.MustSet(d), Name: "inventory", InstanceID: "agent-inventory/test", CallTimeout: 10 * time.Second,
		Backoff: resilience.Backoff{Base: time.Millisecond, Max: time.Millisecond}}, deps)
	body, _ := json.Marshal(message.AgentRequest{OrderID: "o-1", Step: 0, Undo: c.undo, StepName: "reserve", Payload: order})
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: string(body)}}})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures, "recorded at once, never left to time out")
	require.Len(t, store.recorded, 1, "recorded once")
	require.Len(t, out.replies, 1)
	if c.refused != "" {
		require.Regexp(t, "^fail o-1 attempt 3: "+c.refused+"$", store.recorded[0])
		require.Empty(t, store.kept, "nothing kept")
		return
	}
	require.Equal(t, "complete o-1 attempt 3", store.recorded[0])
	if c.undo {
		require.Empty(t, store.kept, "an undo's answer that cannot be kept is not: nothing reads it")
		return
	}
	require.Len(t, store.kept, 1)
	got, err := deps.Kept.Open(context.Background(), "o-1", kept.Stored(store.kept[0]))
	require.NoError(t, err)
	require.Equal(t, c.kept, string(got), "kept as a JSON string with no HTML escapes, or as it is")
	stored := store.kept[0]
	_, check := payload.Parse(stored)
	require.Equal(t, bucket && len(c.kept) > payload.DefaultInline, check, "over the inline limit, in the bucket")
	require.True(t, check || sealed == seal.IsSealed(stored), "inline, sealed if its order is")
}
