package sqsmem_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/sqsmem"
)

// unkindQueue serves one queue with o and returns a client and its URL.
func unkindQueue(t *testing.T, o sqsmem.Options) (*sqs.Client, string) {
	t.Helper()
	l, err := sqsmem.Listen("", o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	c, err := awsclient.Load(context.Background(), awsclient.Options{Endpoint: l.Endpoint, QueuesEndpoint: l.Endpoint, Emulated: true})
	require.NoError(t, err)
	out, err := c.SQS.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("q"),
		Attributes: map[string]string{"VisibilityTimeout": "60"}})
	require.NoError(t, err)
	return c.SQS, aws.ToString(out.QueueUrl)
}

func sendN(t *testing.T, api *sqs.Client, url string, n int) {
	t.Helper()
	for i := range n {
		_, err := api.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(strconv.Itoa(i))})
		require.NoError(t, err)
	}
}

// receiveAll receives (and deletes) until the queue gives nothing for a
// second, and returns the bodies in the order received and each message
// id's deliveries.
func receiveAll(t *testing.T, api *sqs.Client, url string, wait time.Duration) (bodies []string, deliveries map[string]int) {
	t.Helper()
	deliveries = map[string]int{}
	for quiet := time.Now().Add(wait); time.Now().Before(quiet); {
		out, err := api.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1})
		require.NoError(t, err)
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			deliveries[aws.ToString(m.MessageId)]++
			_, err := api.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
			quiet = time.Now().Add(wait)
		}
	}
	return bodies, deliveries
}

// Kind queues deliver in send order, each message once.
func TestKindQueuesDeliverInOrderOnce(t *testing.T) {
	t.Parallel()
	api, url := unkindQueue(t, sqsmem.Options{})
	sendN(t, api, url, 40)
	bodies, deliveries := receiveAll(t, api, url, 500*time.Millisecond)
	want := make([]string, 40)
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	require.Equal(t, want, bodies)
	for id, n := range deliveries {
		require.Equal(t, 1, n, id)
	}
}

// Unkind queues reorder what they deliver: the same seed, the same order;
// every message still delivered.
func TestUnkindQueuesReorderBySeed(t *testing.T) {
	t.Parallel()
	orders := make([][]string, 3)
	for i, seed := range []uint64{7, 7, 8} {
		api, url := unkindQueue(t, sqsmem.Options{Unkind: &sqsmem.Unkind{Seed: seed, Reorder: true}})
		sendN(t, api, url, 40)
		orders[i], _ = receiveAll(t, api, url, 500*time.Millisecond)
		require.Len(t, orders[i], 40)
		require.ElementsMatch(t, orders[i], func() []string {
			s := make([]string, 40)
			for j := range s {
				s[j] = strconv.Itoa(j)
			}
			return s
		}())
	}
	require.NotEqual(t, orders[0][:10], []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, "not in send order")
	require.Equal(t, orders[0], orders[1], "one seed, one order")
	require.NotEqual(t, orders[0], orders[2], "another seed, another order")
}

// A duplicate is delivered again under its MessageId, even after the first
// delivery was deleted, within DuplicateWithin.
func TestUnkindQueuesDeliverAgainAfterADelete(t *testing.T) {
	t.Parallel()
	api, url := unkindQueue(t, sqsmem.Options{Unkind: &sqsmem.Unkind{Seed: 1, Duplicate: 1, DuplicateWithin: 200 * time.Millisecond}})
	sendN(t, api, url, 5)
	out, err := api.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
	require.NoError(t, err)
	require.Len(t, out.Messages, 5)
	first := map[string]string{}
	for _, m := range out.Messages {
		first[aws.ToString(m.MessageId)] = aws.ToString(m.Body)
		_, err := api.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
		require.NoError(t, err)
	}
	// Each is received once more (and its copy again, Duplicate being 1:
	// stop once each came again).
	again := map[string]int{}
	for len(again) < 5 {
		out, err := api.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		require.NoError(t, err)
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			body, ok := first[id]
			require.True(t, ok, "a copy keeps its original's MessageId")
			require.Equal(t, body, aws.ToString(m.Body))
			n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
			require.NoError(t, err)
			require.GreaterOrEqual(t, n, 2, "a copy counts the receives before it")
			again[id]++
			_, err = api.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
	}
}

// Unkind depths are approximate: a report stands for up to DepthLag, then
// is made afresh.
func TestUnkindQueuesReportDepthsLate(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	api, url := unkindQueue(t, sqsmem.Options{Now: clock, Unkind: &sqsmem.Unkind{Seed: 3, DepthLag: 10 * time.Second}})
	depth := func() string {
		out, err := api.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
		require.NoError(t, err)
		return out.Attributes["ApproximateNumberOfMessages"]
	}
	require.Equal(t, "0", depth())
	sendN(t, api, url, 3)
	stale := 0
	for depth() != "3" {
		stale++
		require.Less(t, stale, 12, "a report stands no longer than DepthLag")
		advance(time.Second)
	}
	advance(11 * time.Second)
	require.Equal(t, "3", depth())
}
