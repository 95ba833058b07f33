package localrun_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/agent"
	"github.com/sas-go/sas/shared/devkit/localrun"
	"github.com/sas-go/sas/shared/devkit/remotesim"
	"github.com/sas-go/sas/shared/kept"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/metrics"
	"github.com/sas-go/sas/shared/offload"
	"github.com/sas-go/sas/shared/operator"
	"github.com/sas-go/sas/shared/outcome"
	"github.com/sas-go/sas/shared/payload"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// largeFlow is three steps of one Go agent, the first two with undos, each
// result up to the largest a workflow may keep.
const largeFlow = `
name: large
resultLimit: 16MB
deadline: 10m
pickupTimeout: 30s
defaults:
  timeout: 20s
  maxFailures: 2
agents:
  scans:
    custom: true
steps:
  - name: scan
    agent: scans
    undo:
      name: unscan
  - name: file
    agent: scans
    undo:
      name: unfile
  - name: ship
    agent: scans
`

// scans is the large workflow's service: scan answers with as many bytes as
// the order asks for, file answers with the sizes and hashes of what it
// read, ship refuses (so the two before it are undone); every input's
// size and hash is noted by action.
type scans struct {
	mu     sync.Mutex
	inputs map[string]input // by order/action
}

type input struct {
	bytes                       int
	orderDoc, scanPages, result string // the SHA-256 of the order's doc, of scan's pages, of an undo's result's pages
	streamed                    bool   // read as the Agent sent it (agent.Streamer)
}

// ApplyInput implements agent.Streamer: the document decoded as it is read.
func (s *scans) ApplyInput(ctx context.Context, action, key string, in *agent.Input) ([]byte, error) {
	r, err := in.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	n := &counted{r: r}
	out, err := s.apply(action, json.NewDecoder(n), func() int { return n.n }, true)
	switch {
	case err != nil && in.Err() != nil:
		// Its input broke off as it was read: no refusal of a document,
		// but the read's own error, as agent.Streamer asks: a call not
		// made.
		return nil, in.Err()
	case err != nil && ctx.Err() != nil:
		// Its attempt's time ran out as it read (S3 slow on a loaded
		// machine: CI met it): out of time, not a refusal, which would end
		// the order CompensationFailed.
		return nil, ctx.Err()
	}
	return out, err
}

type counted struct {
	r io.Reader
	n int
}

func (c *counted) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += k
	return k, err
}

func sum(s string) string { h := sha256.Sum256([]byte(s)); return fmt.Sprintf("%x", h[:8]) }

func (s *scans) Apply(_ context.Context, action, _ string, in []byte) ([]byte, error) {
	return s.apply(action, json.NewDecoder(bytes.NewReader(in)), func() int { return len(in) }, false)
}

func (s *scans) apply(action string, dec *json.Decoder, read func() int, streamed bool) ([]byte, error) {
	var doc struct {
		Order struct {
			OrderID string `json:"orderId"`
			Doc     string `json:"doc"`
			Answer  int    `json:"answer"`
			Refuse  string `json:"refuse"` // an action refused for this order
		} `json:"order"`
		Results struct {
			Scan struct {
				Pages string `json:"pages"`
			} `json:"scan"`
		} `json:"results"`
		Result struct {
			Pages string `json:"pages"`
		} `json:"result"`
	}
	if err := dec.Decode(&doc); err != nil {
		return nil, &agent.PermanentError{Body: "not a document: " + err.Error()}
	}
	s.mu.Lock()
	if s.inputs == nil {
		s.inputs = map[string]input{}
	}
	s.inputs[doc.Order.OrderID+"/"+action] = input{bytes: read(), orderDoc: sum(doc.Order.Doc),
		scanPages: sum(doc.Results.Scan.Pages), result: sum(doc.Result.Pages), streamed: streamed}
	s.mu.Unlock()
	switch action {
	case doc.Order.Refuse:
		return nil, &agent.PermanentError{Status: 409, Body: action + " refused for this order"}
	case "scan":
		return json.Marshal(map[string]string{"pages": pages(doc.Order.Answer)})
	case "ship":
		return nil, &agent.PermanentError{Status: 422, Body: "no courier takes it"}
	default:
		return []byte(`{"ok":true}`), nil
	}
}

func (s *scans) of(orderID, action string) (input, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.inputs[orderID+"/"+action]
	return in, ok
}

// pages is an answer's text, n bytes of it once quoted in {"pages":…}.
func pages(n int) string {
	n -= len(`{"pages":""}`)
	return strings.Repeat("p", max(n, 0))
}

// largeOrder is an order of n bytes whose scan answers with answer bytes.
func largeOrder(id string, n, answer int) string {
	head := fmt.Sprintf(`{"orderId":%q,"workflow":"large","answer":%d,"doc":"`, id, answer)
	return head + strings.Repeat("d", n-len(head)-2) + `"}`
}

// largeEnv is a pipeline running the workflow file flow (largeFlow, or one
// made from it) on the scans service.
func largeEnv(t *testing.T, flow string, tweak func(*localrun.Options)) (*env, *scans) {
	t.Helper()
	svc := &scans{}
	def, err := workflow.ParseFile("large.yaml", []byte(flow), workflow.Options{})
	require.NoError(t, err)
	return newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		o.Workflows = workflow.MustSet(def)
		o.Remotes = map[string]agent.Remote{"scans": svc}
		// The file's timeouts, not the quick ones of the other tests: a
		// step that reads 32 MB back and writes 16 MB through moto's S3
		// takes seconds on a loaded machine.
		o.Settings.StepTimeout, o.Settings.PickupTimeout = 20*time.Second, 30*time.Second
		if tweak != nil {
			tweak(o)
		}
	}), svc
}

// sendByPointer sends body as the SQS Extended Client libraries do: kept in
// the payload bucket under incoming/, and a pointer to it on the orders
// queue. It returns the pointer message and the object's key.
func (e *env) sendByPointer(body string) (pointer, key string) {
	e.t.Helper()
	key = fmt.Sprintf("%s%d", offload.IncomingPrefix, time.Now().UnixNano())
	return e.sendByPointerAt(e.stack.Topology().OrdersQueue().Name, key, body), key
}

// sendByPointerAt is sendByPointer to queue, with the object under key (the
// Python library's default: a UUID at the bucket's root).
func (e *env) sendByPointerAt(queue, key, body string) (pointer string) {
	e.t.Helper()
	bucket := e.stack.Resources.PayloadBucket
	_, err := e.stack.Deployment.Clients.S3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key,
		Body: strings.NewReader(body), ContentLength: aws.Int64(int64(len(body)))})
	require.NoError(e.t, err)
	pointer = fmt.Sprintf(`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":%q,"s3Key":%q}]`, bucket, key)
	e.send(queue, pointer)
	return pointer
}

// With sealData, an order sent by pointer leaves no clear copy in the
// bucket: once taken, Submission writes the order as it stored it (the
// claim check of its sealed payload) over the body its sender offloaded
// under incoming/. The same pointer message sent again reads the order
// back from there, opened: a duplicate, not a refusal. One offloaded
// elsewhere (the Python library's default key, a UUID at the bucket's
// root), where Submission may not write, is refused with the reason and
// how to send it, not taken to stay in clear.
func TestASealedOrderSentByPointerLeavesNoClearCopy(t *testing.T) {
	t.Parallel()
	e, _ := largeEnv(t, largeFlow, func(o *localrun.Options) { o.SealData = true })
	const secret = "ssn-987-65-4321"
	body := strings.Replace(largeOrder("ptr-sealed-1", 300<<10, 10), `"doc":"`, `"doc":"`+secret, 1)
	pointer, key := e.sendByPointer(body)
	require.Equal(t, workflow.Failed, e.waitEndedWithin([]string{"ptr-sealed-1"}, 2*time.Minute)["ptr-sealed-1"].State)
	c, bucket := e.stack.Deployment.Clients, e.stack.Resources.PayloadBucket
	got, err := c.S3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	require.NoError(t, err)
	b, err := io.ReadAll(got.Body)
	require.NoError(t, err)
	require.False(t, strings.Contains(string(b), secret), "no clear copy under incoming/ (it holds %d bytes: %.100s)", len(b), b)
	stored, err := e.stack.Store.Order(context.Background(), "ptr-sealed-1")
	require.NoError(t, err)
	require.True(t, stored == string(b), "the order as it is stored (the claim check of its sealed payload), not %.100s", b)

	e.send(e.stack.Topology().OrdersQueue().Name, pointer)
	e.eventually("the pointer sent again taken as a duplicate", 60*time.Second, func() bool {
		return e.stack.Tally.Sum(metrics.DuplicateOrders) >= 1
	})
	require.Zero(t, e.stack.Tally.Sum(metrics.MalformedMessages), "nothing rejected")

	const rootKey = "0b7c6a52-1f0e-4e8e-9a51-3d0c2f7e9b11"
	e.sendByPointerAt(e.stack.Topology().OrdersQueue().Name, rootKey, strings.Replace(body, "ptr-sealed-1", "ptr-sealed-root", 1))
	reason := e.rejection(e.stack.Topology().OrdersQueue().DLQName, rootKey)
	require.Contains(t, reason, "names "+rootKey+", outside incoming/: this deployment seals data")
	require.Contains(t, reason, `Python: the message attribute S3Key, "incoming/" and a UUID`)
	_, err = e.stack.Store.Order(context.Background(), "ptr-sealed-root")
	require.Error(t, err, "not taken")
}

// With sealData, an event sent by pointer (its data over SQS's 256 KiB,
// offloaded by operator.Signal as the SQS Extended Client would) leaves no
// clear copy in the bucket either: once taken, Submission writes the event
// over as it was stored (its data sealed, kept in the bucket). The same
// pointer message sent again is a repeat of the event taken, a no-op: not
// a refusal. Once the order is resubmitted (a new round, its wait armed
// again), it is refused with the reason, never taken without its data; a
// new event completes the wait.
func TestASealedEventSentByPointerLeavesNoClearCopy(t *testing.T) {
	t.Parallel()
	flow := strings.Replace(approval("1h", ""), "\nname: approval\n", "\nname: approval\nresultLimit: 1MB\n", 1)
	e := newEnv(t, remotesim.Faults{}, func(o *localrun.Options) {
		running(t, flow)(o)
		o.SealData = true
	})
	ctx := context.Background()
	e.sim.SetFaults("payment", remotesim.Faults{PermanentOrders: []string{"o-big-ev"}}) // round 1 fails after its approval
	e.order("o-big-ev", "")
	e.parked("o-big-ev", 1)
	const secret = "ssn-123-45-6789"
	data := fmt.Sprintf(`{"amountCents":1998,"by":"ana","scan":%q}`, secret+strings.Repeat("s", 300<<10))
	op := operator.New(e.stack.Deployment.Clients, e.stack.Topology())
	sent, err := op.Signal(ctx, "o-big-ev", "approved", "e-big", json.RawMessage(data), false)
	require.NoError(t, err)
	require.True(t, sent.Offloaded, "an event over SQS's 256 KiB is sent by pointer")
	require.Equal(t, workflow.Failed, e.waitEnded([]string{"o-big-ev"})["o-big-ev"].State, "the charge refused")

	bucket := e.stack.Resources.PayloadBucket
	objs, err := e.stack.Deployment.Clients.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(offload.IncomingPrefix)})
	require.NoError(t, err)
	require.Len(t, objs.Contents, 1, "the event's offloaded body")
	key := aws.ToString(objs.Contents[0].Key)
	read := func() []byte {
		got, err := e.stack.Deployment.Clients.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
		require.NoError(t, err)
		b, err := io.ReadAll(got.Body)
		require.NoError(t, err)
		return b
	}
	e.eventually("the offloaded body written over", 30*time.Second, func() bool { return !strings.Contains(string(read()), secret) })
	var stored message.Event
	require.NoError(t, json.Unmarshal(read(), &stored))
	require.Equal(t, "e-big", stored.EventID)
	require.True(t, isCheck(stored.Data), "the event as stored: the claim check of its sealed data, not %.200s", stored.Data)

	pointer := fmt.Sprintf(`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":%q,"s3Key":%q}]`, bucket, key)
	events := e.stack.Topology().EventsQueue()
	e.send(events.Name, pointer)
	e.eventually("the pointer sent again taken as a repeat", 60*time.Second, func() bool {
		return strings.Contains(e.logs.String(), "event taken before: nothing more to do")
	})

	e.sim.SetFaults("payment", remotesim.Faults{})
	_, err = op.Resubmit(ctx, "o-big-ev", "")
	require.NoError(t, err)
	e.eventually("round 2 parked at its wait", 60*time.Second, func() bool {
		task, recs, err := e.stack.Store.Load(ctx, "o-big-ev")
		return err == nil && task.Round == 2 && !recs[1].Armed.IsZero() && recs[1].State == workflow.Pending
	})
	e.send(events.Name, pointer)
	require.Contains(t, e.rejection(events.DLQName, key), "it was taken before, and the body its pointer names holds its data no longer")
	require.Equal(t, workflow.Pending, e.step("o-big-ev", 1).State, "the wait did not take the event without its data")
	// An event offloaded at the bucket's root, where Submission could not
	// write over it: refused with the reason, not taken to stay in clear.
	const rootKey = "5e0c1d7a-8b2f-4c3e-9d6a-7f1b2c3d4e5f"
	e.sendByPointerAt(events.Name, rootKey, `{"kind":"event","orderId":"o-big-ev","event":"approved","eventId":"e-root","data":{"amountCents":1,"by":"root"}}`)
	require.Contains(t, e.rejection(events.DLQName, rootKey), "outside incoming/: this deployment seals data")
	require.Equal(t, workflow.Pending, e.step("o-big-ev", 1).State, "the event at the root not taken")
	e.signal("o-big-ev", "approved", "e-big-2", `{"amountCents":700,"by":"dee"}`)
	require.Equal(t, workflow.Processed, e.waitEnded([]string{"o-big-ev"})["o-big-ev"].State)
	require.EqualValues(t, 700, e.input("o-big-ev", "charge-payment")["amountCents"], "the new event's data")
	e.stop() // every invocation ended: its metrics are written
	require.EqualValues(t, 2, e.stack.Tally.Sum(metrics.EventsReceived), "e-big in round 1, e-big-2 in round 2")
	require.EqualValues(t, 1, e.stack.Tally.Sum(metrics.EventsRefused), "the resealed body in round 2")
	require.EqualValues(t, 2, e.stack.Tally.Sum(metrics.MalformedMessages), "that one and the one at the root rejected to the DLQ, nothing else")
}

// An event's data may be as large as its workflow's result limit, 16 MB at
// most: sent by pointer to a sealed deployment, an event one byte over is
// refused to the events DLQ with the reason, the wait still armed, and one
// at the limit is taken, its data sealed and kept in the bucket, its
// offloaded body written over.
func TestAnEventAtTheResultLimitIsTakenAndOneByteOverIsRefused(t *testing.T) {
	t.Parallel()
	flow := largeFlow[:strings.Index(largeFlow, "steps:")] + `steps:
  - name: scan
    agent: scans
  - name: await
    wait:
      event: approved
      timeout: 5m
`
	e, _ := largeEnv(t, flow, func(o *localrun.Options) { o.SealData = true })
	ctx := context.Background()
	e.send(e.stack.Topology().OrdersQueue().Name, largeOrder("ev-limit", 1000, 10))
	e.parked("ev-limit", 1)
	data := func(n int) json.RawMessage {
		head := `{"scan":"`
		return json.RawMessage(head + strings.Repeat("s", n-len(head)-2) + `"}`)
	}
	op := operator.New(e.stack.Deployment.Clients, e.stack.Topology())
	over, err := op.Signal(ctx, "ev-limit", "approved", "e-over", data(workflow.MaxResultLimit+1), false)
	require.NoError(t, err)
	require.True(t, over.Offloaded)
	events := e.stack.Topology().EventsQueue()
	require.Contains(t, e.rejection(events.DLQName, offload.IncomingPrefix),
		fmt.Sprintf("its data is %d bytes, over workflow large's %d-byte result limit", workflow.MaxResultLimit+1, workflow.MaxResultLimit))
	require.Equal(t, workflow.Pending, e.step("ev-limit", 1).State, "the wait is still armed")

	at, err := op.Signal(ctx, "ev-limit", "approved", "e-at", data(workflow.MaxResultLimit), false)
	require.NoError(t, err)
	require.True(t, at.Offloaded)
	require.Equal(t, workflow.Processed, e.waitEndedWithin([]string{"ev-limit"}, 2*time.Minute)["ev-limit"].State)
	results, err := e.stack.Store.Results(ctx, "ev-limit", 1)
	require.NoError(t, err)
	ref, ok := payload.Parse(results[workflow.Ref{Index: 1}].JSON)
	require.True(t, ok, "the wait's result is a claim check: %.200s", results[workflow.Ref{Index: 1}].JSON)
	require.Greater(t, ref.Bytes, workflow.MaxResultLimit, "of the data sealed")
	e.eventually("the taken event's body written over", 60*time.Second, func() bool {
		bucket := e.stack.Resources.PayloadBucket
		objs, err := e.stack.Deployment.Clients.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(offload.IncomingPrefix)})
		require.NoError(t, err)
		small := 0
		for _, o := range objs.Contents {
			if aws.ToInt64(o.Size) < 4096 {
				small++
			}
		}
		return len(objs.Contents) == 2 && small == 1 // the refused one kept whole for its DLQ pointer
	})
}

// An order of 16 MB, sent as the SQS Extended Client sends it, runs three
// steps whose first answers 16 MB: every service reads back the whole order
// and the results before it (an undo, its step's), while the queues and the
// tables carry claim checks only; the third step's refusal undoes the two.
// On each state-store engine: DynamoDB Local's, and moto's.
func TestAnOrderAndAResultOf16MBRunAndAreUndone(t *testing.T) {
	t.Parallel()
	for engine, endpoint := range map[string]string{"DynamoDB Local": "", "moto": motoEndpoint} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			orderAndResultOf16MB(t, endpoint)
		})
	}
}

// orderAndResultOf16MB is TestAnOrderAndAResultOf16MBRunAndAreUndone on the
// state store at endpoint ("": DynamoDB Local).
func orderAndResultOf16MB(t *testing.T, endpoint string) {
	e, svc := largeEnv(t, largeFlow, func(o *localrun.Options) {
		if endpoint != "" {
			o.DynamoDBEndpoint = endpoint
		}
	})
	body := largeOrder("big-1", payload.MaxBytes, payload.MaxBytes)
	require.Len(t, body, payload.MaxBytes)
	e.sendByPointer(body)
	task := e.waitEndedWithin([]string{"big-1"}, 3*time.Minute)["big-1"]
	require.Equal(t, workflow.Failed, task.State, "ship refused: the order fails, its steps undone")

	var doc struct {
		Doc string `json:"doc"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	want := sum(doc.Doc)
	scanned := sum(pages(payload.MaxBytes))
	for _, action := range []string{"scan", "file", "ship", "unfile", "unscan"} {
		in, ok := svc.of("big-1", action)
		require.True(t, ok, "%s was called", action)
		require.Equal(t, want, in.orderDoc, "%s read the whole order", action)
		require.Greater(t, in.bytes, payload.MaxBytes, "%s's input holds the order", action)
		require.True(t, in.streamed, "%s's input streamed from the bucket as it was sent", action)
		if action != "scan" {
			require.Equal(t, scanned, in.scanPages, "%s read scan's whole result", action)
		}
	}
	unscan, _ := svc.of("big-1", "unscan")
	require.Equal(t, scanned, unscan.result, "unscan read its step's whole result")

	// What the table and the queues held: claim checks, not the payloads.
	stored, err := e.stack.Store.Order(context.Background(), "big-1")
	require.NoError(t, err)
	ref, ok := payload.Parse([]byte(stored))
	require.True(t, ok, "the order item holds a claim check: %.200s", stored)
	require.Equal(t, payload.MaxBytes, ref.Bytes)
	require.True(t, strings.HasPrefix(ref.Key, payload.OrderPrefix("big-1")), ref.Key)
	results, err := e.stack.Store.Results(context.Background(), "big-1", 1)
	require.NoError(t, err)
	require.NotEmpty(t, results)
	for _, r := range results {
		if r.Name == "scan" {
			require.True(t, isCheck(r.JSON), "scan's result item holds a claim check: %.200s", r.JSON)
		}
		require.Less(t, len(r.JSON), 4096, "%s's result item", r.Name)
	}
}

// With sealData, the same: a 16 MB order whose first step answers 16 MB
// runs its three steps and two undos at the Agent's smallest memory (128
// MB: its payload budget, kept.MinDocumentBytes). Each payload is kept
// in the bucket in the sealed object form (its ciphertext as it is, no
// base64), so that it weighs its plaintext and a few hundred bytes: the
// order and scan's result, read whole (sealed data is not streamed), fit
// the budget of the steps and undos that read both.
func TestASealedOrderAndResultOf16MBRunAndAreUndone(t *testing.T) {
	t.Parallel()
	e, svc := largeEnv(t, largeFlow, func(o *localrun.Options) { o.SealData = true })
	body := largeOrder("big-sealed", payload.MaxBytes, payload.MaxBytes)
	require.Len(t, body, payload.MaxBytes)
	_, incoming := e.sendByPointer(body)
	task := e.waitEndedWithin([]string{"big-sealed"}, 4*time.Minute)["big-sealed"]
	require.Equal(t, workflow.Failed, task.State, "ship refused: the order fails, its steps undone")

	var doc struct {
		Doc string `json:"doc"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	want, scanned := sum(doc.Doc), sum(pages(payload.MaxBytes))
	for _, action := range []string{"scan", "file", "ship", "unfile", "unscan"} {
		in, ok := svc.of("big-sealed", action)
		require.True(t, ok, "%s was called", action)
		require.Equal(t, want, in.orderDoc, "%s read the whole order, opened", action)
		if action != "scan" {
			require.Equal(t, scanned, in.scanPages, "%s read scan's whole result, opened", action)
		}
	}
	unscan, _ := svc.of("big-sealed", "unscan")
	require.Equal(t, scanned, unscan.result, "unscan read its step's whole result")

	// The order and scan's result weigh their plaintext and a few hundred
	// bytes, within the 128 MB Agent's budget together.
	ctx := context.Background()
	stored, err := e.stack.Store.Order(ctx, "big-sealed")
	require.NoError(t, err)
	order, ok := payload.Parse([]byte(stored))
	require.True(t, ok, "the order item holds a claim check: %.200s", stored)
	results, err := e.stack.Store.Results(ctx, "big-sealed", 1)
	require.NoError(t, err)
	result, ok := payload.Parse(results[workflow.Ref{Index: 0}].JSON)
	require.True(t, ok, "scan's result item holds a claim check: %.200s", results[workflow.Ref{Index: 0}].JSON)
	for _, ref := range []payload.Ref{order, result} {
		require.Less(t, ref.Bytes, payload.MaxBytes+1024, "%s: the plaintext and its seal's head", ref)
	}
	require.LessOrEqual(t, kept.Stored([]byte(stored)).Weight()+kept.Stored(results[workflow.Ref{Index: 0}].JSON).Weight(),
		int64(kept.MinDocumentBytes), "a 128 MB Agent's budget")

	// Ciphertext at rest: both objects sealed, and the sender's offloaded
	// body written over with the order's claim check.
	c, bucket := e.stack.Deployment.Clients, e.stack.Resources.PayloadBucket
	for _, ref := range []payload.Ref{order, result} {
		got, err := c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
		require.NoError(t, err)
		b, err := io.ReadAll(got.Body)
		require.NoError(t, err)
		require.True(t, seal.IsObject(b), "%s holds the sealed object form: %.40q", ref, b)
		require.NotContains(t, string(b), "dddddddddddddddd", "%s: no order in clear", ref)
		require.NotContains(t, string(b), "pppppppppppppppp", "%s: no result in clear", ref)
	}
	got, err := c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &incoming})
	require.NoError(t, err)
	b, err := io.ReadAll(got.Body)
	require.NoError(t, err)
	require.Equal(t, stored, string(b), "the offloaded body written over with the order as stored")
}

// A payload that is gone when a step needs it (deleted, or expired with a
// retention shorter than the order's life) fails that step for good with a
// reason that names it, its service never called: the order is not lost,
// nor retried for ever. The undo of the step before needs the order too:
// it fails the same way, and the order ends CompensationFailed, which
// alerts the operator.
func TestAPayloadGoneFailsItsStepWithTheReason(t *testing.T) {
	t.Parallel()
	flow := strings.Replace(largeFlow, "  - name: file\n", "  - name: wait\n    sleep: 3s\n  - name: file\n", 1)
	e, svc := largeEnv(t, flow, func(o *localrun.Options) { o.PayloadInline = payload.MinInline })
	e.send(e.stack.Topology().OrdersQueue().Name, largeOrder("gone-1", 100<<10, 10))
	e.eventually("scan done", 60*time.Second, func() bool { _, ok := svc.of("gone-1", "scan"); return ok })
	stored, err := e.stack.Store.Order(context.Background(), "gone-1")
	require.NoError(t, err)
	ref, ok := payload.Parse([]byte(stored))
	require.True(t, ok, "a 100 KB order is kept in the bucket")
	_, err = e.stack.Deployment.Clients.S3.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
	require.NoError(t, err)
	// Gone for good: SQS's second delivery of the order (1 in 50 here) keeps
	// its payload again before Submission finds it a duplicate, so the
	// object is deleted again until the order ends (CI saw the file step
	// read it back, and the order end Failed).
	gone, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		for gone.Err() == nil {
			_, _ = e.stack.Deployment.Clients.S3.DeleteObject(gone, &s3.DeleteObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
			select {
			case <-gone.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	task := e.waitEndedWithin([]string{"gone-1"}, 2*time.Minute)["gone-1"]
	stop()
	require.Equal(t, workflow.CompensationFailed, task.State)
	for _, action := range []string{"file", "unscan"} {
		_, called := svc.of("gone-1", action)
		require.False(t, called, "%s's service was never called without its input", action)
	}
	rec := e.records("gone-1")[workflow.Ref{Index: 2}]
	require.Contains(t, rec.LastError, "not found", "file's reason names the payload gone")
	require.Contains(t, rec.LastError, ref.Key)
}

// waitEndedWithin waits (bounded by limit) until every order's task ended.
func (e *env) waitEndedWithin(ids []string, limit time.Duration) map[string]statestore.Task {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tasks, err := e.stack.WaitEnded(ctx, ids, 200*time.Millisecond, nil)
	require.NoError(e.t, err)
	return tasks
}

// sasctl submit and the typed client send an order over SQS's 256 KiB as
// the SQS Extended Client does, and know it taken by its claim check, or
// refused by the body its pointer names in the DLQ.
func TestAnOrderOverSQSsLimitIsSubmittedByPointerAndJudged(t *testing.T) {
	t.Parallel()
	e, svc := largeEnv(t, largeFlow, nil)
	op := operator.New(e.stack.Deployment.Clients, e.stack.Topology())
	require.Equal(t, e.stack.Resources.PayloadBucket, op.PayloadBucket, "the local stack's by default")
	ctx := context.Background()
	taken := largeOrder("by-client-1", 1<<20, 10)
	refused := strings.Replace(largeOrder("by-client-2", 1<<20, 10), `"workflow":"large"`, `"workflow":"nosuch"`, 1)
	since := time.Now()
	res, err := op.Submit(ctx, []string{taken, refused})
	require.NoError(t, err)
	require.Equal(t, 2, res.Sent)
	verdicts, err := op.AwaitOrders(ctx, []string{taken, refused}, since, 60*time.Second, 200*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, operator.Taken, verdicts[0].Verdict, "stored as its claim check: %+v", verdicts[0])
	require.Equal(t, operator.Refused, verdicts[1].Verdict, "%+v", verdicts[1])
	require.Contains(t, verdicts[1].Reason, "nosuch")
	e.waitEndedWithin([]string{"by-client-1"}, 2*time.Minute)
	in, ok := svc.of("by-client-1", "scan")
	require.True(t, ok)
	require.Greater(t, in.bytes, 1<<20, "scan read the whole order")
}

// With sealData, an order's data and its results are sealed under a data
// key of the order's own: the services get them in clear, while the
// tables, the payload bucket and the handlers' logs hold ciphertext only;
// an operator reads a result with kms:Decrypt on the key, and without it
// only that it is sealed.
func TestSealedDataIsCiphertextEverywhereButTheCall(t *testing.T) {
	t.Parallel()
	e, svc := largeEnv(t, largeFlow, func(o *localrun.Options) {
		o.SealData = true
		o.PayloadInline = payload.MinInline // some sealed payloads in the bucket, some inline
	})
	const secret = "ssn-123-45-6789"
	ctx := context.Background()
	small := fmt.Sprintf(`{"orderId":"sealed-1","workflow":"large","answer":200,"doc":%q}`, secret)
	large := largeOrder("sealed-2", 200<<10, 300<<10)
	large = strings.Replace(large, `"doc":"`, `"doc":"`+secret, 1)
	e.send(e.stack.Topology().OrdersQueue().Name, small, large)
	tasks := e.waitEndedWithin([]string{"sealed-1", "sealed-2"}, 2*time.Minute)
	for id, task := range tasks {
		require.Equal(t, workflow.Failed, task.State, "%s: ship refused, the steps undone", id)
		in, ok := svc.of(id, "file")
		require.True(t, ok)
		require.Equal(t, sum(pages(map[string]int{"sealed-1": 200, "sealed-2": 300 << 10}[id])), in.scanPages, "%s: file read scan's answer in clear", id)
	}
	in, _ := svc.of("sealed-1", "scan")
	require.Equal(t, sum(secret), in.orderDoc, "the service got the order in clear")

	// Nowhere at rest: every item of both tables, every object of the bucket.
	c := e.stack.Deployment.Clients
	for _, table := range []string{e.stack.Topology().OrdersTable(), e.stack.Topology().StateTable()} {
		out, err := c.DynamoDB.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
		require.NoError(t, err)
		require.NotEmpty(t, out.Items)
		for _, item := range out.Items {
			b, _ := json.Marshal(item)
			require.NotContains(t, string(b), secret, "an item of %s", table)
			require.NotContains(t, string(b), "pppppppp", "a result in clear in %s", table)
		}
	}
	objs, err := c.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(e.stack.Resources.PayloadBucket)})
	require.NoError(t, err)
	require.NotEmpty(t, objs.Contents, "the large order and its results are in the bucket")
	for _, o := range objs.Contents {
		got, err := c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(e.stack.Resources.PayloadBucket), Key: o.Key})
		require.NoError(t, err)
		b, err := io.ReadAll(got.Body)
		require.NoError(t, err)
		if strings.HasPrefix(aws.ToString(o.Key), "orders/") {
			require.True(t, seal.IsSealed(b), "%s holds a sealed payload", aws.ToString(o.Key))
		}
	}
	require.NotContains(t, e.logs.String(), secret, "the handlers' logs")

	// The operator: with the key, the result in clear; with a key that is
	// not the order's (no kms:Decrypt on it, for KMS), its shape.
	op := operator.New(c, e.stack.Topology())
	verdicts, err := op.AwaitOrders(ctx, []string{small, large}, time.Now().Add(-time.Hour), 30*time.Second, 200*time.Millisecond)
	require.NoError(t, err)
	for _, v := range verdicts {
		require.Equal(t, operator.Taken, v.Verdict, "known as sent once opened (sasctl submit --wait): %+v", v)
	}
	st, err := op.Status(ctx, "sealed-1")
	require.NoError(t, err)
	require.Contains(t, string(resultOf(t, st, "scan")), `"pages":"ppp`, "opened with the operator's credentials")
	denied := *c
	denied.KMS = kms.NewFromConfig(c.Config, func(o *kms.Options) { o.BaseEndpoint = aws.String("http://127.0.0.1:1") }) // no KMS to ask
	st, err = operator.New(&denied, e.stack.Topology()).Status(ctx, "sealed-1")
	require.NoError(t, err)
	require.Contains(t, string(resultOf(t, st, "scan")), "sealed: opening it takes kms:Decrypt")
	require.NotContains(t, string(resultOf(t, st, "scan")), "ppp")
}

// An operator's decision on a held order writes its payloads again, as a
// resubmission does: a hold stops the order's deadline, not the bucket's
// expiry, which counts days from an object's last write. If S3 refuses
// that, nothing is decided.
func TestADecisionOnAHeldOrderRenewsItsPayloads(t *testing.T) {
	t.Parallel()
	flow := strings.Replace(largeFlow, "  - name: file\n    agent: scans\n", "  - name: file\n    agent: scans\n    onFailure: hold\n", 1)
	e, _ := largeEnv(t, flow, nil)
	ctx := context.Background()
	body := strings.Replace(largeOrder("hold-2", 100<<10, 100<<10), `"answer"`, `"refuse":"file","answer"`, 1)
	e.send(e.stack.Topology().OrdersQueue().Name, body)
	e.eventually("hold-2 held", time.Minute, func() bool {
		task, _, err := e.stack.Store.Load(ctx, "hold-2")
		return err == nil && task.State == workflow.Held
	})
	bucket := e.stack.Resources.PayloadBucket
	written := func() map[string]time.Time {
		objs, err := e.stack.Deployment.Clients.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(payload.OrderPrefix("hold-2"))})
		require.NoError(t, err)
		at := map[string]time.Time{}
		for _, o := range objs.Contents {
			at[aws.ToString(o.Key)] = aws.ToTime(o.LastModified)
		}
		return at
	}
	before := written()
	require.Len(t, before, 2, "the order and scan's result, kept in the bucket")
	latest := slices.MaxFunc(slices.Collect(maps.Values(before)), time.Time.Compare)
	for !time.Now().Truncate(time.Second).After(latest) { // S3 keeps whole seconds: wait for the next
		time.Sleep(20 * time.Millisecond)
	}
	skip := outcome.HoldDecision{OrderID: "hold-2", Action: outcome.HoldSkip, Step: "file", Result: json.RawMessage(`{"filed":"by hand"}`), By: "test"}
	// An operator S3 refuses: no decision without its payloads renewed,
	// and the reason names what it takes.
	c := e.stack.Deployment.Clients
	denied := *c
	denied.S3 = s3.NewFromConfig(c.Config, func(o *s3.Options) { o.BaseEndpoint = aws.String("http://127.0.0.1:1") }) // no S3 to ask
	_, err := operator.New(&denied, e.stack.Topology()).DecideHeld(ctx, skip)
	require.ErrorContains(t, err, "write order hold-2's payloads again, so that they outlive it (it takes s3:ListBucket on")
	task, _, err := e.stack.Store.Load(ctx, "hold-2")
	require.NoError(t, err)
	require.Equal(t, workflow.Held, task.State, "nothing decided")
	require.Equal(t, before, written(), "nothing written again")

	op := operator.New(c, e.stack.Topology())
	_, err = op.DecideHeld(ctx, skip)
	require.NoError(t, err)
	after := written()
	for key, at := range before {
		require.True(t, after[key].After(at), "%s written again (%s, then %s)", key, at, after[key])
	}
	require.Equal(t, workflow.Failed, e.waitEndedWithin([]string{"hold-2"}, time.Minute)["hold-2"].State,
		"ship refuses, and what ran before is undone: its payloads read back as kept")
}

// resultOf is the result status shows for a record.
func resultOf(t *testing.T, st operator.Status, name string) json.RawMessage {
	t.Helper()
	for _, r := range st.Records {
		if r.Name == name {
			return r.Result
		}
	}
	t.Fatalf("no record %s in %+v", name, st.Records)
	return nil
}

// An operator's skip of a sealed order's held step seals the result it
// gives under the order's data key, as a step's would be: the table holds
// it sealed, the next step reads it in clear.
func TestASkipsResultOfASealedOrderIsSealed(t *testing.T) {
	t.Parallel()
	flow := strings.Replace(largeFlow, "  - name: file\n    agent: scans\n", "  - name: file\n    agent: scans\n    onFailure: hold\n", 1)
	e, svc := largeEnv(t, flow, func(o *localrun.Options) { o.SealData = true })
	ctx := context.Background()
	e.send(e.stack.Topology().OrdersQueue().Name, `{"orderId":"hold-1","workflow":"large","answer":100,"doc":"d","refuse":"file"}`)
	e.eventually("hold-1 held", time.Minute, func() bool {
		task, _, err := e.stack.Store.Load(ctx, "hold-1")
		return err == nil && task.State == workflow.Held
	})
	const given = `{"filed":"by hand, ref 77-secret"}`
	op := operator.New(e.stack.Deployment.Clients, e.stack.Topology())
	_, err := op.DecideHeld(ctx, outcome.HoldDecision{OrderID: "hold-1", Action: outcome.HoldSkip, Step: "file",
		Result: json.RawMessage(given), By: "test"})
	require.NoError(t, err)
	e.waitEndedWithin([]string{"hold-1"}, time.Minute)
	results, err := e.stack.Store.Results(ctx, "hold-1", 1)
	require.NoError(t, err)
	filed := results[workflow.Ref{Index: 1}].JSON
	require.True(t, seal.IsSealed(filed), "the skip's result is stored sealed: %.120s", filed)
	require.NotContains(t, string(filed), "77-secret")
	in, ok := svc.of("hold-1", "ship")
	require.True(t, ok, "ship ran after the skip")
	require.Equal(t, sum(pages(100)), in.scanPages, "ship's input read the results in clear")
	st, err := op.Status(ctx, "hold-1")
	require.NoError(t, err)
	require.JSONEq(t, given, string(resultOf(t, st, "file")), "the operator reads it back")
}

// isCheck reports whether raw is a claim check (payload.Parse).
func isCheck(raw []byte) bool {
	_, ok := payload.Parse(raw)
	return ok
}

// A sender's body over SQS's limit is offloaded only once its pointer goes
// into the request that sends it: after a body at the limit, a request is
// full, and the next body goes in the next one, offloaded once (the local
// sender offloaded it, then put it off to the next request and offloaded
// it again: a clear copy that no order took, which a sealed chaos run of
// 2,000 orders found under incoming/).
func TestASendersBodyIsOffloadedOnceItIsSent(t *testing.T) {
	t.Parallel()
	e, _ := largeEnv(t, largeFlow, nil)
	ctx := context.Background()
	atLimit := largeOrder("sent-at-limit", offload.MaxMessageBytes, 10)
	require.Len(t, atLimit, offload.MaxMessageBytes)
	ids := []string{"sent-at-limit", "sent-by-pointer", "sent-100k-1", "sent-100k-2", "sent-100k-3"}
	bodies := []string{atLimit, largeOrder(ids[1], 300<<10, 10)}
	for _, id := range ids[2:] { // three of them are over a request's 256 KiB: sent in two
		bodies = append(bodies, largeOrder(id, 100<<10, 10))
	}
	require.NoError(t, e.stack.SendOrders(ctx, bodies...))
	e.waitEndedWithin(ids, 2*time.Minute)
	bucket := e.stack.Resources.PayloadBucket
	out, err := e.stack.Deployment.Clients.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket,
		Prefix: aws.String(offload.IncomingPrefix)})
	require.NoError(t, err)
	require.Len(t, out.Contents, 1, "one body sent by pointer, one object")
}
