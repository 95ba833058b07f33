package queue_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/devkit/sqsmem"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/queue"
	"github.com/sas-go/sas/shared/topology"
)

var motoEndpoint string

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithMoto(m, &motoEndpoint)) }

// A body its queue took at the queue's largest, refused to its DLQ with
// the longest reason (escaped as it travels: control bytes, invalid UTF-8,
// U+FFFF, a character at the cut), lands there whole with its reason and
// source, on the in-process queues and on moto, the queues sized as the
// stack sizes them (topology): a DLQ as large as its queue had no room for
// the reason, and the refusal failed until SQS moved the message there
// without one.
func TestARefusalAtItsQueuesLimitLandsInItsDLQWithItsReason(t *testing.T) {
	mem, err := sqsmem.Listen("", sqsmem.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mem.Close() })
	for name, endpoint := range map[string]string{"in-process": mem.Endpoint, "moto": motoEndpoint} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: endpoint, QueuesEndpoint: endpoint, Emulated: true})
			require.NoError(t, err)
			q := topology.Default(fmt.Sprintf("dlq%d", time.Now().UnixNano()%1e9), "a").OrdersQueue()
			res, err := provision.EnsureQueues(ctx, c.SQS, []topology.Queue{q})
			require.NoError(t, err)
			src, dlq := res.URL(q.Name), res.URL(q.DLQName)
			for url, want := range map[string]int{src: q.MaxMessageBytes, dlq: q.DLQMaxMessageBytes} {
				out, err := c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
					AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameMaximumMessageSize}})
				require.NoError(t, err)
				require.Equal(t, fmt.Sprint(want), out.Attributes["MaximumMessageSize"], url)
			}

			body := strings.Repeat("x", q.MaxMessageBytes)
			_, err = c.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &src, MessageBody: &body})
			require.NoError(t, err, "its queue takes it")
			reason := "bad JSON: " + strings.Repeat("\x01\xff\uffff<é", 400)
			require.NoError(t, queue.NewSender(c.SQS).Reject(ctx, dlq, body, src, reason))

			// Hidden a second at a time: a receive whose answer was lost
			// (CI, loaded, once read nothing for 5 s) finds it again.
			var out *sqs.ReceiveMessageOutput
			require.Eventually(t, func() bool {
				out, err = c.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &dlq, WaitTimeSeconds: 1,
					VisibilityTimeout: 1, MessageAttributeNames: []string{"All"}})
				return err == nil && len(out.Messages) > 0
			}, 30*time.Second, 10*time.Millisecond, "the refusal reached its DLQ")
			require.Len(t, out.Messages, 1)
			m := out.Messages[0]
			require.Equal(t, body, aws.ToString(m.Body), "whole")
			why := aws.ToString(m.MessageAttributes["RejectReason"].StringValue)
			require.Equal(t, message.Clip(queue.RejectReasonText(reason), queue.MaxRejectReasonBytes), why)
			require.LessOrEqual(t, len(why), queue.MaxRejectReasonBytes)
			require.True(t, strings.HasPrefix(why, `bad JSON: \u0001\xff\uffff<é`), why)
			require.Equal(t, src, aws.ToString(m.MessageAttributes["SourceQueue"].StringValue))
		})
	}
}
