package stack

import (
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/shared/workflow"
)

// AccessLogDays is how long the payload bucket's server access logs (who
// read or wrote which payload) are kept: as long as the functions' logs.
const AccessLogDays = 30

// PayloadExpiryDays is how many days after its last write S3 deletes a
// payload (0: never, as retentionDays=0 keeps every order forever). An
// order's payloads are written while its round runs, which is at most its
// workflow's deadline; a hold stops that clock for up to its step's
// holdFor, and the operator's decision that ends it writes the payloads
// again (operator.DecideHeld), as a resubmission does, but one that ends
// by itself (the Supervisor undoes the order) does not; its compensation
// may run as long as a round; the ended order is then kept retentionDays,
// and its items' claim checks name the payloads, so a payload must outlive
// them: the retention, twice the longest deadline and the longest hold in
// whole days (rounded up), and a day more for DynamoDB's time to live,
// which deletes an expired item some time after.
func PayloadExpiryDays(retentionDays int, longestDeadline, longestHold time.Duration) int {
	if retentionDays == 0 {
		return 0
	}
	const day = 24 * time.Hour
	return retentionDays + int((2*longestDeadline+longestHold+day-1)/day) + 1
}

// IncomingDays is how long a body a sender offloaded under incoming/ (an
// SQS Extended Client's, with that key prefix, and sasctl's) is kept: its
// pointer message stays at most 14 days in the orders queue or its DLQ
// (SQS's longest retention), and Submission keeps the order under orders/
// as soon as it takes it, so a day more is all it needs (lifecycle).
const IncomingDays = 15

// longestDeadline is the longest order deadline of the set's workflows;
// longestHold, the longest a failure holds one of their orders (holdFor).
func longestDeadline(set workflow.Set) time.Duration {
	var longest time.Duration
	for _, d := range set.Definitions() {
		longest = max(longest, d.Deadline)
	}
	return longest
}

func longestHold(set workflow.Set) time.Duration {
	var longest time.Duration
	for _, d := range set.Definitions() {
		for _, st := range d.Steps {
			longest = max(longest, st.HoldFor)
		}
	}
	return longest
}

// payloadBucket is the bucket that keeps the payloads too large for a
// message or an item (shared/payload: orders/<orderId>/...), and the
// objects that senders using the SQS Extended Client put there: private,
// TLS only, not versioned (a payload is written once, by its hash; a body a
// sender offloaded, under a name of its own, at most written over once
// with sealData), under
// the stack's key when there is one (with an S3 Bucket Key: a data key per
// bucket for a while, not a KMS request per object), kept when the stack
// is deleted, as the tables that name its objects are. Its objects expire
// with their orders (PayloadExpiryDays). Its access logs go to a bucket of
// their own, under S3's keys (a server access log's target cannot use
// SSE-KMS).
func payloadBucket(st awscdk.Stack, p Props, key awskms.IKey) (payloads, logs awss3.Bucket) {
	private := func(props *awss3.BucketProps) *awss3.BucketProps {
		props.BlockPublicAccess, props.EnforceSSL, props.Versioned = awss3.BlockPublicAccess_BLOCK_ALL(), jsii.Bool(true), jsii.Bool(false)
		props.RemovalPolicy = awscdk.RemovalPolicy_RETAIN
		if props.Encryption == "" {
			props.Encryption = awss3.BucketEncryption_S3_MANAGED
		}
		return props
	}
	logs = awss3.NewBucket(st, jsii.String("PayloadAccessLogs"), private(&awss3.BucketProps{
		LifecycleRules: &[]*awss3.LifecycleRule{{Id: jsii.String("expire"), Expiration: awscdk.Duration_Days(jsii.Number(AccessLogDays))}},
	}))
	rules := lifecycle(PayloadExpiryDays(p.RetentionDays, longestDeadline(p.Workflows), longestHold(p.Workflows)))
	props := &awss3.BucketProps{LifecycleRules: &rules, ServerAccessLogsBucket: logs, ServerAccessLogsPrefix: jsii.String("payloads/")}
	if key != nil {
		props.Encryption, props.EncryptionKey, props.BucketKeyEnabled = awss3.BucketEncryption_KMS, key, jsii.Bool(true)
	}
	return awss3.NewBucket(st, jsii.String("PayloadBucket"), private(props)), logs
}

// lifecycle is the payload bucket's expiry, its payloads' after days (0:
// never). S3 applies the shortest expiry of the rules that match an
// object, and a rule cannot match all but a prefix, so: the orders'
// payloads (orders/) expire after days; a sender's body, after
// IncomingDays under incoming/, and anywhere else (the Python Extended
// Client's default: the bucket's root) with the payloads but never sooner
// (a short retention would otherwise take a pointer's body while its
// message may still wait in a queue or a DLQ). A multipart upload left
// unfinished is aborted after a day.
func lifecycle(days int) []*awss3.LifecycleRule {
	all := &awss3.LifecycleRule{Id: jsii.String("payloads"), AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1))}
	incoming := &awss3.LifecycleRule{Id: jsii.String("incoming"), Prefix: jsii.String("incoming/"),
		Expiration: awscdk.Duration_Days(jsii.Number(IncomingDays))}
	if days == 0 {
		return []*awss3.LifecycleRule{all, incoming}
	}
	all.Expiration = awscdk.Duration_Days(jsii.Number(float64(max(days, IncomingDays))))
	orders := &awss3.LifecycleRule{Id: jsii.String("orders"), Prefix: jsii.String(ordersPrefix),
		Expiration: awscdk.Duration_Days(jsii.Number(float64(days)))}
	return []*awss3.LifecycleRule{all, incoming, orders}
}

// payloadUse is what a function does with the payload bucket: the keys it
// may read and those it may write (patterns; "": none). A reader may list
// the bucket too: without s3:ListBucket, S3 answers a read of an object
// that is gone with 403 AccessDenied, not 404 NoSuchKey, and a payload
// expired or deleted could not be told from a grant missing (it would be
// tried again until its message went to the DLQ, not fail its step with
// the reason). Nothing deletes from it: its lifecycle does.
type payloadUse struct {
	read   string
	writes []string
}

// ordersPrefix is where the product keeps its own payloads
// (shared/payload.OrdersPrefix), ordersKeys their keys.
const (
	ordersPrefix = "orders/"
	ordersKeys   = ordersPrefix + "*"
)

// incomingKeys are where senders offload bodies (offload.IncomingPrefix).
const incomingKeys = "incoming/*"

var (
	// Submission reads any object (an SQS Extended Client's, where its
	// sender put it) and writes an order's payload.
	submissionPayloads = payloadUse{read: "*", writes: []string{ordersKeys}}
	// With sealData, it writes a sealed order over the clear body its
	// sender offloaded under incoming/ too (offload.Store.Reseal).
	sealingSubmissionPayloads = payloadUse{read: "*", writes: []string{incomingKeys, ordersKeys}}
	// An Agent reads what its step is given and writes its result.
	agentPayloads = payloadUse{read: ordersKeys, writes: []string{ordersKeys}}
	// The Scheduler and the Supervisor only read.
	readerPayloads = payloadUse{read: ordersKeys}
)

// statements are u's grants on bucket b's objects.
func (u payloadUse) statements(b awss3.IBucket) []awsiam.PolicyStatement {
	by := map[string][]string{} // actions by key pattern
	if u.read != "" {
		by[u.read] = append(by[u.read], "s3:GetObject")
	}
	for _, w := range u.writes {
		by[w] = append(by[w], "s3:PutObject")
	}
	var out []awsiam.PolicyStatement
	if u.read != "" {
		out = append(out, statement([]string{"s3:ListBucket"}, []*string{b.BucketArn()}))
	}
	for _, pattern := range slices.Sorted(maps.Keys(by)) {
		out = append(out, statement(by[pattern], []*string{b.ArnForObjects(jsii.String(pattern))}))
	}
	return out
}

// keyUse is what a function using the payload bucket may do with the
// stack's key, through S3 only: decrypt what it reads, and make the data
// key of what it writes.
func (u payloadUse) keyUse(key awskms.IKey) awsiam.PolicyStatement {
	actions := []string{"kms:Decrypt"}
	if len(u.writes) > 0 {
		actions = append(actions, "kms:GenerateDataKey")
	}
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("DataKeyThroughS3"),
		Actions:    jsii.Strings(actions...),
		Resources:  &[]*string{key.KeyArn()},
		Conditions: &map[string]any{"StringEquals": map[string]any{"kms:ViaService": viaService("s3")}},
	})
}
