package sqsconf

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// batches: up to ten messages a request; eleven entries or a repeated id
// refuse the whole request; a delete batch with a bad receipt handle
// deletes the others and names the bad one.
func batches(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	url := newQueue(t, c, nil)
	entries := func(n int) []types.SendMessageBatchRequestEntry {
		var es []types.SendMessageBatchRequestEntry
		for i := range n {
			es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("e", i)), MessageBody: aws.String(fmt.Sprint("m", i))})
		}
		return es
	}
	_, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries(11)})
	var tooMany *types.TooManyEntriesInBatchRequest
	require.ErrorAs(t, err, &tooMany)
	dup := entries(2)
	dup[1].Id = dup[0].Id
	_, err = c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: dup})
	var notDistinct *types.BatchEntryIdsNotDistinct
	require.ErrorAs(t, err, &notDistinct)

	send := func(es []types.SendMessageBatchRequestEntry) {
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: es})
		require.NoError(t, err)
		require.Len(t, out.Successful, len(es))
		for _, s := range out.Successful {
			require.NotEmpty(t, aws.ToString(s.MessageId))
			require.Equal(t, md5Hex("m"+aws.ToString(s.Id)[1:]), aws.ToString(s.MD5OfMessageBody))
		}
	}
	send(entries(9))
	got := receiveWithin(t, c, url, 9, 5*time.Second)
	require.Len(t, got, 9)
	del := []types.DeleteMessageBatchRequestEntry{{Id: aws.String("bad"), ReceiptHandle: aws.String("not-a-receipt-handle")}}
	for i, m := range got {
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("d", i)), ReceiptHandle: m.ReceiptHandle})
	}
	for start := 0; start < len(del); start += 10 {
		res, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: del[start:min(start+10, len(del))]})
		require.NoError(t, err)
		if start == 0 {
			require.Len(t, res.Successful, 9)
			require.Len(t, res.Failed, 1)
			require.Equal(t, "bad", aws.ToString(res.Failed[0].Id))
			require.Equal(t, "ReceiptHandleIsInvalid", aws.ToString(res.Failed[0].Code))
		}
	}
	require.Equal(t, [3]int{0, 0, 0}, depth(t, c, url))
}

// sendBatchPartial: a send batch's entry refused alone (its delay out of
// bounds) while the others are sent.
func sendBatchPartial(t *testing.T, tg Target) {
	ctx, c := context.Background(), tg.SQS
	url := newQueue(t, c, nil)
	var es []types.SendMessageBatchRequestEntry
	for i := range 10 {
		es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("e", i)), MessageBody: aws.String("m")})
	}
	es[3].DelaySeconds = 901
	out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: es})
	require.NoError(t, err)
	require.Len(t, out.Successful, 9)
	require.Len(t, out.Failed, 1)
	require.Equal(t, "e3", aws.ToString(out.Failed[0].Id))
	require.True(t, out.Failed[0].SenderFault)
	require.NotEmpty(t, aws.ToString(out.Failed[0].Code))
	require.Len(t, receiveWithin(t, c, url, 9, 5*time.Second), 9)
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// attributesMD5 is MD5OfMessageAttributes as SQS documents it: over the
// attributes sorted by name, each name, data type and value as a 4-byte
// big-endian length and its bytes, the value after a transport byte (1
// string, 2 binary).
func attributesMD5(attrs map[string]types.MessageAttributeValue) string {
	h := md5.New()
	put := func(b []byte) {
		_ = binary.Write(h, binary.BigEndian, uint32(len(b)))
		h.Write(b)
	}
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[k]
		put([]byte(k))
		put([]byte(aws.ToString(v.DataType)))
		if v.StringValue != nil {
			h.Write([]byte{1})
			put([]byte(*v.StringValue))
		} else {
			h.Write([]byte{2})
			put(v.BinaryValue)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
