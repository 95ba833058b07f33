package stack

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/shared/topology"
)

// Resources are the stack's data and messaging resources, by topology name.
type Resources struct {
	Orders, State awsdynamodb.Table
	Queues        map[string]awssqs.Queue // work queues and DLQs, by name
	Alerts        awssns.Topic            // per-order failure events (the functions publish)
	AlertInbox    awssqs.Queue            // subscribed to Alerts: what the operator reads
	Alarms        awssns.Topic            // CloudWatch alarm actions
	Key           awskms.IKey             // the customer managed key of them all (context kms), or nil: AWS's own keys
	Payloads      awss3.Bucket            // the payloads too large for a message or an item (shared/payload)
	PayloadLogs   awss3.Bucket            // the payload bucket's server access logs
	net           *network                // where the functions context vpcId places go (nil: none)
}

// New defines the whole stack.
func New(scope constructs.Construct, id string, p Props, sp *awscdk.StackProps) awscdk.Stack {
	st := awscdk.NewStack(scope, jsii.String(id), sp)
	// S3 lets a server access log's target bucket take the logs by its
	// bucket policy (the logging service, for the stack's own bucket only),
	// not by the log-delivery group's ACL, which is what CDK writes without
	// this flag (cdk init sets it in a new project's cdk.json).
	st.Node().SetContext(jsii.String("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"), true)
	r := resources(st, p)
	r.net = newNetwork(st, p.Network)
	fns := functions(st, p, r)
	r.net.endpoints(p, r)
	alarms(st, p, r, fns)
	dashboard(st, p, fns)
	outputs(st, p, r)
	suppressions(st, r)
	return st
}

func resources(st awscdk.Stack, p Props) *Resources {
	t := p.Topology
	key := dataKey(st, p)
	table := func(id, name string, sort bool) awsdynamodb.Table {
		props := &awsdynamodb.TableProps{
			TableName:    jsii.String(name),
			PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(topology.KeyOrderID), Type: awsdynamodb.AttributeType_STRING},
			BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
			Encryption:   awsdynamodb.TableEncryption_AWS_MANAGED,
			PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
				PointInTimeRecoveryEnabled: jsii.Bool(true)},
			RemovalPolicy: awscdk.RemovalPolicy_RETAIN, // orders outlive a stack
			// An ended order's items carry when they may go (statestore.WithRetention);
			// with retentionDays=0 none does, and the attribute is never set.
			TimeToLiveAttribute: jsii.String(topology.KeyExpires),
		}
		if key != nil {
			props.Encryption, props.EncryptionKey = awsdynamodb.TableEncryption_CUSTOMER_MANAGED, key
		}
		if sort {
			props.SortKey = &awsdynamodb.Attribute{Name: jsii.String(topology.KeySort), Type: awsdynamodb.AttributeType_STRING}
		}
		return awsdynamodb.NewTable(st, jsii.String(id), props)
	}
	r := &Resources{Orders: table("OrdersTable", t.OrdersTable(), false), State: table("StateTable", t.StateTable(), true),
		Queues: map[string]awssqs.Queue{}, Key: key}
	r.State.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(topology.DeadlineIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(topology.KeyDueShard), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String(topology.KeyDueAt), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY, // see statestore.Store.Overdue
	})
	r.State.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(topology.EndIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(topology.KeyEndShard), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String(topology.KeyEndedAt), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY, // see statestore.Store.Ended
	})
	encrypted := func(props *awssqs.QueueProps) *awssqs.QueueProps {
		props.Encryption, props.EnforceSSL = awssqs.QueueEncryption_SQS_MANAGED, jsii.Bool(true)
		if key != nil {
			props.Encryption, props.EncryptionMasterKey = awssqs.QueueEncryption_KMS, key
			props.DataKeyReuse = awscdk.Duration_Seconds(jsii.Number(DataKeyReuse))
		}
		return props
	}
	for _, q := range t.Queues() {
		// A DLQ takes more than its queue: a message refused there as its
		// queue took it carries its reason beside it.
		dlq := awssqs.NewQueue(st, jsii.String(q.DLQName), encrypted(&awssqs.QueueProps{
			QueueName: jsii.String(q.DLQName), RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
			MaxMessageSizeBytes: jsii.Number(float64(q.DLQMaxMessageBytes)),
		}))
		r.Queues[q.DLQName] = dlq
		r.Queues[q.Name] = awssqs.NewQueue(st, jsii.String(q.Name), encrypted(&awssqs.QueueProps{
			QueueName:           jsii.String(q.Name),
			MaxMessageSizeBytes: jsii.Number(float64(q.MaxMessageBytes)),
			VisibilityTimeout:   awscdk.Duration_Seconds(jsii.Number(q.VisibilityTimeout.Seconds())),
			DeadLetterQueue:     &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(float64(q.MaxReceiveCount))},
		}))
	}
	topic := func(id, name string) awssns.Topic {
		tp := awssns.NewTopic(st, jsii.String(id), &awssns.TopicProps{TopicName: jsii.String(name), EnforceSSL: jsii.Bool(true),
			MasterKey: key})
		if p.AlarmEmail != "" {
			tp.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(p.AlarmEmail), nil))
		}
		return tp
	}
	grantEventSenders(r.Queues[t.EventsQueue().Name], p.EventSenders)
	r.Alerts = topic("AlertTopic", t.AlertTopic())
	// The alerts sent, kept 14 days for the operator (the console reads them).
	r.AlertInbox = awssqs.NewQueue(st, jsii.String("AlertInbox"), encrypted(&awssqs.QueueProps{
		QueueName: jsii.String(t.AlertInbox()), RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	}))
	r.Alerts.AddSubscription(awssnssubscriptions.NewSqsSubscription(r.AlertInbox,
		&awssnssubscriptions.SqsSubscriptionProps{RawMessageDelivery: jsii.Bool(true)}))
	r.Alarms = topic("AlarmTopic", t.Prefix+"-alarms")
	r.Payloads, r.PayloadLogs = payloadBucket(st, p, key)
	return r
}

func outputs(st awscdk.Stack, p Props, r *Resources) {
	out := func(id string, v *string) { awscdk.NewCfnOutput(st, jsii.String(id), &awscdk.CfnOutputProps{Value: v}) }
	t := p.Topology
	out("Prefix", jsii.String(t.Prefix))
	out("OrdersQueueUrl", r.Queues[t.OrdersQueue().Name].QueueUrl())
	out("EventsQueueUrl", r.Queues[t.EventsQueue().Name].QueueUrl())
	out("OrdersTableName", r.Orders.TableName())
	out("StateTableName", r.State.TableName())
	out("AlertTopicArn", r.Alerts.TopicArn())
	out("AlarmTopicArn", r.Alarms.TopicArn())
	out("QueueUrlBase", queueURLBase())
	out("PayloadBucketName", r.Payloads.BucketName()) // where an SQS Extended Client's sender puts its large orders
}

// queueURLBase is https://sqs.REGION.URLSUFFIX/ACCOUNT, resolved at deploy time.
func queueURLBase() *string {
	return awscdk.Fn_Sub(jsii.String("https://sqs.${AWS::Region}.${AWS::URLSuffix}/${AWS::AccountId}"), nil)
}

// grantEventSenders lets the principals named (account ids, role or user
// ARNs) send to the events queue, and nothing else: its policy names only
// them, and only sqs:SendMessage. A submitter of orders is granted the
// orders queue by its own policy, and not this one unless named.
func grantEventSenders(q awssqs.Queue, senders []string) {
	if len(senders) == 0 {
		return
	}
	var principals []awsiam.IPrincipal
	for _, s := range senders {
		if len(s) == 12 && !strings.HasPrefix(s, "arn:") {
			principals = append(principals, awsiam.NewAccountPrincipal(jsii.String(s)))
			continue
		}
		principals = append(principals, awsiam.NewArnPrincipal(jsii.String(s)))
	}
	q.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("EventSenders"), Principals: &principals,
		Actions: jsii.Strings("sqs:SendMessage"), Resources: &[]*string{q.QueueArn()},
	}))
}
