package stack

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// queueUse is what a function does with the stack's queues: the queues it
// sends to, the orders' reply queues it may post to (ARN patterns), and
// the queues it takes its work from, in batches of 10 with partial batch
// failures, the deployment's batching window and a cap on concurrency.
type queueUse struct {
	sends, replies []*string
	takes          []awssqs.IQueue
	window         time.Duration
	concurrency    int // each taken queue's mapping's MaximumConcurrency
}

// consumeActions are what a queue's consumer does: what Lambda's poller
// does with the function's role.
var consumeActions = []string{"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}

// wire maps each queue u takes to fn and allows fn's role what u says, and,
// when the queues are encrypted under the stack's key, the key's use
// through SQS for those queues alone (queueKeyUse).
//
// The mappings are those SqsEventSource makes, under its construct ids (a
// deployed stack's mappings are kept, not replaced: Lambda refuses a second
// mapping of one queue to one function), but the grant is ours:
// SqsEventSource grants kms:Decrypt on the queue's key with no condition
// (grantConsumeMessages), which would let the role decrypt anything under
// the key, called directly, not only its queues' messages through SQS.
func (u queueUse) wire(fn awslambda.Function, role awsiam.Role, key awskms.IKey) {
	if len(u.sends)+len(u.replies) > 0 {
		role.AddToPolicy(statement([]string{"sqs:SendMessage"}, append(append([]*string{}, u.sends...), u.replies...)))
	}
	var taken []*string
	for _, q := range u.takes {
		opts := &awslambda.EventSourceMappingOptions{
			EventSourceArn: q.QueueArn(), BatchSize: jsii.Number(10), ReportBatchItemFailures: jsii.Bool(true),
			MaxConcurrency: jsii.Number(float64(u.concurrency)),
		}
		if u.window > 0 {
			opts.MaxBatchingWindow = awscdk.Duration_Seconds(jsii.Number(u.window.Seconds()))
		}
		fn.AddEventSourceMapping(jsii.String("SqsEventSource:"+*awscdk.Names_NodeUniqueId(q.Node())), opts)
		taken = append(taken, q.QueueArn())
	}
	if len(taken) > 0 {
		role.AddToPolicy(statement(consumeActions, taken))
	}
	if key == nil {
		return
	}
	if len(u.sends)+len(u.replies) > 0 {
		// A sender's request makes the message's data key (and opens it,
		// while SQS reuses it).
		role.AddToPolicy(queueKeyUse(key, "QueueKeyToSend", []string{"kms:GenerateDataKey", "kms:Decrypt"}, append(append([]*string{}, u.sends...), u.replies...)))
	}
	if len(taken) > 0 {
		role.AddToPolicy(queueKeyUse(key, "QueueKeyToReceive", []string{"kms:Decrypt"}, taken))
	}
}

// queueKeyUse lets a role use the key through SQS (kms:ViaService) for
// the queues named and no other: SQS's encryption context is the queue's
// ARN (aws:sqs:arn). StringLike, as a reply queue is named by a pattern
// (its prefix); a queue's ARN has no wildcard of its own.
func queueKeyUse(key awskms.IKey, sid string, actions []string, queues []*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String(sid),
		Actions:   jsii.Strings(actions...),
		Resources: &[]*string{key.KeyArn()},
		Conditions: &map[string]any{
			"StringEquals": map[string]any{"kms:ViaService": viaService("sqs")},
			"StringLike":   map[string]any{"kms:EncryptionContext:aws:sqs:arn": queues},
		},
	})
}
