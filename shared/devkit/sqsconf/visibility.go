package sqsconf

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// visibility: a received message is hidden for the queue's visibility
// timeout (or the receive's), then comes back with its receive count up
// and a new receipt handle.
func visibility(t *testing.T, tg Target) {
	c := tg.SQS
	url := newQueue(t, c, map[string]string{"VisibilityTimeout": "1"})
	send(t, c, url, "v", 0)
	first := receiveWithin(t, c, url, 1, 3*time.Second)
	require.Len(t, first, 1)
	require.Empty(t, receive(t, c, url, 1, 0, nil), "hidden while in flight")
	require.Equal(t, 1, depth(t, c, url)[1], "in flight")

	var again []types.Message
	eventually(t, 5*time.Second, func() bool {
		again = receive(t, c, url, 1, 1, ptr[int32](30)) // this time hidden for 30 s
		return len(again) == 1
	}, "back after the visibility timeout")
	require.Equal(t, "2", again[0].Attributes["ApproximateReceiveCount"])
	require.NotEqual(t, aws.ToString(first[0].ReceiptHandle), aws.ToString(again[0].ReceiptHandle))
	require.Equal(t, first[0].Attributes["ApproximateFirstReceiveTimestamp"], again[0].Attributes["ApproximateFirstReceiveTimestamp"])
	time.Sleep(1200 * time.Millisecond) // past the queue's timeout: the receive's 30 s holds
	require.Empty(t, receive(t, c, url, 1, 0, nil), "the receive's visibility timeout, not the queue's")
}

// changeVisibility: a message's visibility changed to 0 comes back at
// once; changed to longer, it stays hidden past the queue's timeout (the
// runner's Delay fault, the operator's peek give back).
func changeVisibility(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	url := newQueue(t, c, map[string]string{"VisibilityTimeout": "1"})
	send(t, c, url, "a", 0)
	m := receiveWithin(t, c, url, 1, 3*time.Second)
	require.Len(t, m, 1)
	_, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m[0].ReceiptHandle, VisibilityTimeout: 0})
	require.NoError(t, err)
	m = receiveWithin(t, c, url, 1, 2*time.Second)
	require.Len(t, m, 1, "visible at once")
	_, err = c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url,
		Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
			{Id: aws.String("keep"), ReceiptHandle: m[0].ReceiptHandle, VisibilityTimeout: 30}}})
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond) // past the queue's timeout
	require.Empty(t, receive(t, c, url, 1, 0, nil), "hidden for the changed timeout")
	require.Equal(t, 1, depth(t, c, url)[1])
}

// redriveToDLQ: a message received maxReceiveCount times goes to its
// dead-letter queue, body and attributes whole, at its next receive.
func redriveToDLQ(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	dlq := newQueue(t, c, nil)
	url := newQueue(t, c, map[string]string{"VisibilityTimeout": "1",
		"RedrivePolicy": `{"deadLetterTargetArn":"` + queueARN(t, c, dlq) + `","maxReceiveCount":2}`})
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("poison"),
		MessageAttributes: map[string]types.MessageAttributeValue{"k": {DataType: aws.String("String"), StringValue: aws.String("v")}}})
	require.NoError(t, err)
	for n := 1; n <= 2; n++ {
		var m []types.Message
		eventually(t, 5*time.Second, func() bool {
			m = receive(t, c, url, 1, 1, nil) // back after the queue's second
			return len(m) == 1
		}, "received again")
		require.Equal(t, "poison", aws.ToString(m[0].Body))
	}
	time.Sleep(1100 * time.Millisecond) // past the visibility timeout
	require.Empty(t, receive(t, c, url, 1, 1, nil), "past maxReceiveCount: moved, not delivered")
	moved := receiveWithin(t, c, dlq, 1, 3*time.Second)
	require.Len(t, moved, 1)
	require.Equal(t, "poison", aws.ToString(moved[0].Body))
	require.Equal(t, "v", aws.ToString(moved[0].MessageAttributes["k"].StringValue))
	require.Equal(t, [3]int{0, 0, 0}, depth(t, c, url))
}

// delays: a message's DelaySeconds, or its queue's, hides it that long as
// delayed (not in flight); then it is received.
func delays(t *testing.T, tg Target) {
	c := tg.SQS
	for _, byQueue := range []bool{false, true} {
		var url string
		var delay int32
		if byQueue {
			url = newQueue(t, c, map[string]string{"DelaySeconds": "1"})
		} else {
			url, delay = newQueue(t, c, nil), 1
		}
		start := time.Now()
		send(t, c, url, "later", delay)
		require.Equal(t, [3]int{0, 0, 1}, depth(t, c, url), "delayed")
		require.Empty(t, receive(t, c, url, 1, 0, nil))
		m := receiveWithin(t, c, url, 1, 5*time.Second)
		require.Len(t, m, 1)
		require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond)
	}
}

// depths: receivable, in flight and delayed messages, counted apart (the
// Supervisor's backlog reads and sasctl's queue table).
func depths(t *testing.T, tg Target) {
	c := tg.SQS
	url := newQueue(t, c, nil)
	for i := range 3 {
		send(t, c, url, strings.Repeat("d", i+1), 0)
	}
	send(t, c, url, "delayed", 60)
	eventually(t, 3*time.Second, func() bool { return depth(t, c, url) == [3]int{3, 0, 1} }, "3 receivable, 1 delayed")
	require.Len(t, receiveWithin(t, c, url, 2, 3*time.Second), 2)
	require.Equal(t, [3]int{1, 2, 1}, depth(t, c, url))
}

// topicToQueue: an alert published on a topic reaches the queue
// subscribed with raw delivery (the local stack's alert inbox).
func topicToQueue(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	url := newQueue(t, c, nil)
	topic, err := tg.SNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("conf-alerts-" + url[strings.LastIndex(url, "/")+1:])})
	require.NoError(t, err)
	_, err = tg.SNS.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"),
		Endpoint: aws.String(queueARN(t, c, url)), Attributes: map[string]string{"RawMessageDelivery": "true"}})
	require.NoError(t, err)
	_, err = tg.SNS.Publish(ctx, &sns.PublishInput{TopicArn: topic.TopicArn, Subject: aws.String("Order o-1 failed"),
		Message: aws.String(`{"orderId":"o-1"}`), MessageAttributes: map[string]snstypes.MessageAttributeValue{
			"OrderID": {DataType: aws.String("String"), StringValue: aws.String("o-1")}}})
	require.NoError(t, err)
	m := receiveWithin(t, c, url, 1, 3*time.Second)
	require.Len(t, m, 1)
	require.JSONEq(t, `{"orderId":"o-1"}`, aws.ToString(m[0].Body))
	require.Equal(t, "o-1", aws.ToString(m[0].MessageAttributes["OrderID"].StringValue))
}
