package sqsconf

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"
)

// queues: created idempotently, refused with other attributes, found by
// name, listed by prefix, their ARN and attributes read back and changed,
// as provision.Ensure does.
func queues(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	attrs := map[string]string{"VisibilityTimeout": "7", "MessageRetentionPeriod": "1209600"}
	url := newQueue(t, c, attrs)
	name := url[strings.LastIndex(url, "/")+1:]
	again, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	require.NoError(t, err, "the same attributes: the same queue")
	require.Equal(t, url, aws.ToString(again.QueueUrl))
	_, err = c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: map[string]string{"VisibilityTimeout": "8"}})
	var exists *types.QueueNameExists
	require.ErrorAs(t, err, &exists, "other attributes: refused")

	got, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
	require.NoError(t, err)
	require.Equal(t, url, aws.ToString(got.QueueUrl))
	list, err := c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: &name})
	require.NoError(t, err)
	require.Equal(t, []string{url}, list.QueueUrls)

	a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	require.NoError(t, err)
	require.Regexp(t, `^arn:aws:sqs:[a-z0-9-]+:\d{12}:`+name+`$`, a.Attributes["QueueArn"])
	require.Equal(t, "7", a.Attributes["VisibilityTimeout"])
	require.Equal(t, "1209600", a.Attributes["MessageRetentionPeriod"])
	require.Equal(t, "0", a.Attributes["DelaySeconds"])

	redrive := `{"deadLetterTargetArn":"` + a.Attributes["QueueArn"] + `","maxReceiveCount":5}`
	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url,
		Attributes: map[string]string{"VisibilityTimeout": "9", "RedrivePolicy": redrive}})
	require.NoError(t, err)
	a, err = c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameVisibilityTimeout, types.QueueAttributeNameRedrivePolicy}})
	require.NoError(t, err)
	require.Equal(t, "9", a.Attributes["VisibilityTimeout"])
	require.JSONEq(t, redrive, a.Attributes["RedrivePolicy"])
}

// missingQueue: every call on a queue that does not exist is the SDK's
// typed QueueDoesNotExist (sasctl and the operator test for it).
func missingQueue(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	var missing *types.QueueDoesNotExist
	_, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("conf-no-such-queue")})
	require.ErrorAs(t, err, &missing)
	url := strings.Replace(newQueue(t, c, nil), "conf", "gone", 1)
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("x")})
	require.ErrorAs(t, err, &missing)
	_, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url})
	require.ErrorAs(t, err, &missing)
	_, err = c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}})
	require.ErrorAs(t, err, &missing)
}

// sendReceive: a message's body, its attributes of each type and their
// MD5s (computed here, as SQS documents them), its trace header, and the
// system attributes the product reads (SenderId, SentTimestamp, the
// receive count and first receive).
func sendReceive(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	url := newQueue(t, c, nil)
	body := `{"orderId":"o-1","note":"ünïcode ✓"}`
	attrs := map[string]types.MessageAttributeValue{
		"kind":   {DataType: aws.String("String"), StringValue: aws.String("order")},
		"n":      {DataType: aws.String("Number"), StringValue: aws.String("42")},
		"blob":   {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
		"custom": {DataType: aws.String("String.trace"), StringValue: aws.String("x")},
	}
	trace := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	before := time.Now().Add(-2 * time.Second).UnixMilli()
	out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body, MessageAttributes: attrs,
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: &trace}}})
	require.NoError(t, err)
	require.Equal(t, md5Hex(body), aws.ToString(out.MD5OfMessageBody))
	require.Equal(t, attributesMD5(attrs), aws.ToString(out.MD5OfMessageAttributes))

	msgs := receiveWithin(t, c, url, 1, 3*time.Second)
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, aws.ToString(out.MessageId), aws.ToString(m.MessageId))
	require.Equal(t, body, aws.ToString(m.Body))
	require.Equal(t, md5Hex(body), aws.ToString(m.MD5OfBody))
	require.Equal(t, attributesMD5(attrs), aws.ToString(m.MD5OfMessageAttributes))
	require.Len(t, m.MessageAttributes, len(attrs))
	for k, v := range attrs {
		require.Equal(t, aws.ToString(v.DataType), aws.ToString(m.MessageAttributes[k].DataType), k)
		require.Equal(t, aws.ToString(v.StringValue), aws.ToString(m.MessageAttributes[k].StringValue), k)
		require.Equal(t, v.BinaryValue, m.MessageAttributes[k].BinaryValue, k)
	}
	require.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])
	require.Equal(t, trace, m.Attributes["AWSTraceHeader"])
	require.NotEmpty(t, m.Attributes["SenderId"])
	for _, k := range []string{"SentTimestamp", "ApproximateFirstReceiveTimestamp"} {
		ms, err := strconv.ParseInt(m.Attributes[k], 10, 64)
		require.NoError(t, err, k)
		require.InDelta(t, time.Now().UnixMilli(), ms, float64(time.Now().UnixMilli()-before), k)
	}
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
	require.NoError(t, err)
	require.Equal(t, [3]int{0, 0, 0}, depth(t, c, url))
}

// attributeNames: a receive gets the message attributes it names, by name
// or prefix wildcard, with the MD5 of those it got; and only the system
// attributes it names.
func attributeNames(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	url := newQueue(t, c, nil)
	attrs := map[string]types.MessageAttributeValue{
		"trace.a": {DataType: aws.String("String"), StringValue: aws.String("1")},
		"trace.b": {DataType: aws.String("String"), StringValue: aws.String("2")},
		"other":   {DataType: aws.String("String"), StringValue: aws.String("3")},
	}
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("b"), MessageAttributes: attrs})
	require.NoError(t, err)
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 2,
		MessageAttributeNames:       []string{"trace.*"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp}})
	require.NoError(t, err)
	require.Len(t, out.Messages, 1)
	m := out.Messages[0]
	require.Len(t, m.MessageAttributes, 2)
	require.Contains(t, m.MessageAttributes, "trace.a")
	require.Equal(t, attributesMD5(map[string]types.MessageAttributeValue{"trace.a": attrs["trace.a"], "trace.b": attrs["trace.b"]}),
		aws.ToString(m.MD5OfMessageAttributes))
	require.Contains(t, m.Attributes, "SentTimestamp")
	require.NotContains(t, m.Attributes, "ApproximateReceiveCount")
}

// messageSize: a queue's MaximumMessageSize (256 KB, what the product keeps
// its messages within) takes a body of that size and refuses one byte more,
// with SQS's error.
func messageSize(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	url := newQueue(t, c, map[string]string{"MaximumMessageSize": "262144"})
	send(t, c, url, strings.Repeat("x", 262144), 0)
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(strings.Repeat("x", 262145))})
	var api smithy.APIError
	require.ErrorAs(t, err, &api)
	require.Contains(t, []string{"InvalidParameterValue", "InvalidParameterValueException"}, api.ErrorCode(), err.Error())
	require.Contains(t, api.ErrorMessage(), "262144", "the message names the limit")
}

// charactersTaken: a body and an attribute's value with any character SQS
// takes (U+FFFD among them, tab, DEL, the last of each range) are taken and
// received as sent.
func charactersTaken(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	url := newQueue(t, c, nil)
	body := "a\ufffdb\t\n\r \u007f\ud7ff\ue000\U0010ffff<&>"
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body,
		MessageAttributes: map[string]types.MessageAttributeValue{"Why": {DataType: aws.String("String"), StringValue: &body}}})
	require.NoError(t, err)
	got := receiveWithin(t, c, url, 1, 10*time.Second)
	require.Equal(t, body, aws.ToString(got[0].Body))
	require.Equal(t, body, aws.ToString(got[0].MessageAttributes["Why"].StringValue))
}

// charactersRefused: a body or an attribute's value with a character SQS
// does not take (a control byte, U+FFFF) is refused, nothing sent.
func charactersRefused(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	url := newQueue(t, c, nil)
	for _, bad := range []string{"a\x01b", "a\uffffb"} {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &bad})
		var api smithy.APIError
		require.ErrorAs(t, err, &api, "%q", bad)
		_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("ok"),
			MessageAttributes: map[string]types.MessageAttributeValue{"Why": {DataType: aws.String("String"), StringValue: &bad}}})
		require.ErrorAs(t, err, &api, "an attribute: %q", bad)
	}
	require.Equal(t, [3]int{}, depth(t, c, url), "nothing sent")
}

// longPoll: a receive waiting on an empty queue answers as soon as a
// message arrives, not at the end of its wait; one on a queue that stays
// empty answers empty after its wait.
func longPoll(t *testing.T, tg Target) {
	c := tg.SQS
	url := newQueue(t, c, nil)
	start := time.Now()
	require.Empty(t, receive(t, c, url, 1, 1, nil))
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "an empty long poll waits")

	got := make(chan []types.Message, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 10})
		if err != nil {
			got <- nil
			return
		}
		got <- out.Messages
	}()
	<-started
	time.Sleep(300 * time.Millisecond) // the receive is (most likely) waiting; if not, it finds the message at once
	sent := time.Now()
	send(t, c, url, "wake", 0)
	select {
	case msgs := <-got:
		require.Len(t, msgs, 1)
		require.Less(t, time.Since(sent), 5*time.Second, "woken by the send, not by the end of the wait")
	case <-time.After(9 * time.Second):
		t.Fatal("a long poll was not woken by a send")
	}
}
