// Package sqsconf is the queues' conformance suite: the same cases run
// against every SQS the product is run on locally (moto's, the in-process
// one of shared/devkit/sqsmem, real SQS where anyone has it), each case the
// semantics the product relies on, so the servers cannot drift apart
// unnoticed. Cases wait on conditions, never longer than a visibility
// timeout of a second or two needs.
package sqsconf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// Target is the SQS (and SNS, for the alerts' fan-out) under test.
type Target struct {
	SQS *sqs.Client
	SNS *sns.Client
	// Gaps are the cases the target is known to fail, by case name, with
	// why: they are skipped with the reason, not hidden.
	Gaps map[string]string
}

// MotoGaps are moto 5.2.1's known departures from SQS among the cases.
var MotoGaps = map[string]string{
	"send batch partial failure": "moto answers a failed entry's SenderFault as the string \"true\", " +
		"which the SDK cannot read: the whole SendMessageBatch call fails with a deserialization error",
	"characters refused": "moto takes a body or an attribute with any character (SQS refuses those outside its set: " +
		"InvalidMessageContents)",
}

// Run runs every case against the target, in parallel.
func Run(t *testing.T, tg Target) {
	cases := map[string]func(*testing.T, Target){
		"queues":                     queues,
		"send receive":               sendReceive,
		"visibility":                 visibility,
		"redrive":                    redriveToDLQ,
		"delays":                     delays,
		"batches":                    batches,
		"send batch partial failure": sendBatchPartial,
		"long poll":                  longPoll,
		"message size":               messageSize,
		"depths":                     depths,
		"missing queue":              missingQueue,
		"topic to queue":             topicToQueue,
		"change visibility":          changeVisibility,
		"attribute wildcard":         attributeNames,
		"characters taken":           charactersTaken,
		"characters refused":         charactersRefused,
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if why, ok := tg.Gaps[name]; ok {
				t.Skip("a known gap of this target: " + why)
			}
			c(t, tg)
		})
	}
}

var seq atomic.Int64

// newQueue creates a queue of a name unique to the test, with attrs.
func newQueue(t *testing.T, c *sqs.Client, attrs map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("conf%x-%d", rand.Uint32(), seq.Add(1))
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	require.NoError(t, err)
	return aws.ToString(out.QueueUrl)
}

// send sends a body and returns the message id.
func send(t *testing.T, c *sqs.Client, url, body string, delay int32) string {
	t.Helper()
	out, err := c.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, DelaySeconds: delay})
	require.NoError(t, err)
	return aws.ToString(out.MessageId)
}

// receive asks for up to n messages, long-polling up to wait seconds, with
// every attribute.
func receive(t *testing.T, c *sqs.Client, url string, n, wait int32, vis *int32) []types.Message {
	t.Helper()
	in := &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: n, WaitTimeSeconds: wait,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"}}
	if vis != nil {
		in.VisibilityTimeout = *vis
	}
	out, err := c.ReceiveMessage(context.Background(), in)
	require.NoError(t, err)
	return out.Messages
}

// receiveWithin receives until n messages came or within passed.
func receiveWithin(t *testing.T, c *sqs.Client, url string, n int, within time.Duration) []types.Message {
	t.Helper()
	var got []types.Message
	end := time.Now().Add(within)
	for len(got) < n && time.Now().Before(end) {
		got = append(got, receive(t, c, url, int32(min(10, n-len(got))), 1, nil)...)
	}
	return got
}

// depth reads a queue's three depths: receivable, in flight, delayed.
func depth(t *testing.T, c *sqs.Client, url string) [3]int {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible, types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	require.NoError(t, err)
	var d [3]int
	for i, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
		d[i], err = strconv.Atoi(out.Attributes[k])
		require.NoError(t, err, k)
	}
	return d
}

// queueARN reads a queue's ARN.
func queueARN(t *testing.T, c *sqs.Client, url string) string {
	t.Helper()
	a, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	require.NoError(t, err)
	return a.Attributes["QueueArn"]
}

// eventually waits up to within for cond, checking every 50 ms.
func eventually(t *testing.T, within time.Duration, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, within, 50*time.Millisecond, msg)
}

func ptr[T any](v T) *T { return &v }
