// Package provision creates a topology's tables, queues and topic through the
// AWS APIs, idempotently: running it again against existing resources changes
// nothing. The local runner and the tests use it; AWS deployments use the CDK
// stack, which reads the same topology.
package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/topology"
)

// Resources are the addresses of a provisioned topology.
type Resources struct {
	QueueURLs map[string]string // by queue name, DLQs included
	QueueARNs map[string]string // by queue name, DLQs included
	TopicARN  string
	// PayloadBucket keeps the payloads too large for a message or an item.
	PayloadBucket string
}

// URL returns the URL of the named queue.
func (r *Resources) URL(name string) string { return r.QueueURLs[name] }

// Ensure creates whatever of the topology does not exist yet.
func Ensure(ctx context.Context, c *awsclient.Clients, t topology.Topology) (*Resources, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if err := EnsureTables(ctx, c.DynamoDB, t); err != nil {
		return nil, err
	}
	res, err := EnsureQueues(ctx, c.SQS, t.Queues())
	if err != nil {
		return nil, err
	}
	topic, err := c.SNS.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(t.AlertTopic())})
	if err != nil {
		return nil, fmt.Errorf("create topic %s: %w", t.AlertTopic(), err)
	}
	res.TopicARN = aws.ToString(topic.TopicArn)
	res.PayloadBucket = t.PayloadBucket()
	if err := EnsureBucket(ctx, c.S3, res.PayloadBucket); err != nil {
		return nil, err
	}
	return res, nil
}

// EnsureKey is the ARN of the KMS key alias names (alias/NAME), created
// with the alias unless it exists: a local stack's data key (sealData).
func EnsureKey(ctx context.Context, api *kms.Client, alias string) (string, error) {
	out, err := api.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(alias)})
	var missing *kmstypes.NotFoundException
	switch {
	case err == nil:
		return aws.ToString(out.KeyMetadata.Arn), nil
	case !errors.As(err, &missing):
		return "", fmt.Errorf("describe key %s: %w", alias, err)
	}
	key, err := api.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("the data keys of " + alias)})
	if err != nil {
		return "", fmt.Errorf("create key %s: %w", alias, err)
	}
	if _, err := api.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: key.KeyMetadata.KeyId}); err != nil {
		return "", fmt.Errorf("alias %s: %w", alias, err)
	}
	return aws.ToString(key.KeyMetadata.Arn), nil
}

// EnsureBucket creates a bucket, unless this account has it already.
func EnsureBucket(ctx context.Context, api *s3.Client, name string) error {
	_, err := api.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	var owned *s3types.BucketAlreadyOwnedByYou
	var exists *s3types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

// EnsureTables creates the orders table and the state table with its sparse
// deadline index, and waits until both are active.
func EnsureTables(ctx context.Context, db *dynamodb.Client, t topology.Topology) error {
	for _, in := range []*dynamodb.CreateTableInput{OrdersTableInput(t), StateTableInput(t)} {
		_, err := db.CreateTable(ctx, in)
		var inUse *ddbtypes.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("create table %s: %w", *in.TableName, err)
		}
		w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 100 * time.Millisecond })
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, time.Minute); err != nil {
			return fmt.Errorf("wait for table %s: %w", *in.TableName, err)
		}
		if err := ensureIndexes(ctx, db, in); err != nil {
			return err
		}
	}
	return nil
}

// ensureIndexes adds to a table made before it had them (a run directory's
// tables kept from an earlier release, as sasctl dev keeps them) the global
// secondary indexes in lacks, one at a time as DynamoDB takes them, and
// waits until each is active.
func ensureIndexes(ctx context.Context, db *dynamodb.Client, in *dynamodb.CreateTableInput) error {
	for _, gsi := range in.GlobalSecondaryIndexes {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName})
		if err != nil {
			return fmt.Errorf("describe table %s: %w", *in.TableName, err)
		}
		if slices.ContainsFunc(out.Table.GlobalSecondaryIndexes, func(d ddbtypes.GlobalSecondaryIndexDescription) bool {
			return aws.ToString(d.IndexName) == aws.ToString(gsi.IndexName)
		}) {
			continue
		}
		_, err = db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: in.TableName, AttributeDefinitions: in.AttributeDefinitions,
			GlobalSecondaryIndexUpdates: []ddbtypes.GlobalSecondaryIndexUpdate{{Create: &ddbtypes.CreateGlobalSecondaryIndexAction{
				IndexName: gsi.IndexName, KeySchema: gsi.KeySchema, Projection: gsi.Projection}}}})
		if err != nil {
			return fmt.Errorf("add index %s to table %s: %w", aws.ToString(gsi.IndexName), *in.TableName, err)
		}
		if err := indexActive(ctx, db, in.TableName, gsi.IndexName); err != nil {
			return err
		}
	}
	return nil
}

// indexActive waits (a minute at most) until the table's index is active.
func indexActive(ctx context.Context, db *dynamodb.Client, table, index *string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: table})
		if err != nil {
			return fmt.Errorf("describe table %s: %w", *table, err)
		}
		for _, d := range out.Table.GlobalSecondaryIndexes {
			if aws.ToString(d.IndexName) == aws.ToString(index) && d.IndexStatus == ddbtypes.IndexStatusActive {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("index %s of table %s: not active after a minute", aws.ToString(index), *table)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// EnableTTL turns on the table's time to live on topology.KeyExpires, as
// the stack's TimeToLiveSpecification does (DynamoDB Local deletes expired
// items; moto does not). EnsureTables leaves it off: a local stack keeps
// its orders (no retention), and DynamoDB Local's TTL sweeper running
// beside the chaos run shifted its timing enough to fail it 2 runs in 5
// where main passed 8 in 8 (an interleaving worth its own look).
func EnableTTL(ctx context.Context, db *dynamodb.Client, table string) error {
	out, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("time to live of table %s: %w", table, err)
	}
	if d := out.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == topology.KeyExpires {
		return nil
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(topology.KeyExpires), Enabled: aws.Bool(true)}})
	if err != nil {
		return fmt.Errorf("enable the time to live of table %s: %w", table, err)
	}
	return nil
}

// OrdersTableInput describes the orders table.
func OrdersTableInput(t topology.Topology) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(t.OrdersTable()),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String(topology.KeyOrderID), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String(topology.KeyOrderID), KeyType: ddbtypes.KeyTypeHash},
		},
	}
}

// StateTableInput describes the state table and its sparse indexes: the
// deadline index and the end index.
func StateTableInput(t topology.Topology) *dynamodb.CreateTableInput {
	attr := func(n string, ty ddbtypes.ScalarAttributeType) ddbtypes.AttributeDefinition {
		return ddbtypes.AttributeDefinition{AttributeName: aws.String(n), AttributeType: ty}
	}
	keyEl := func(n string, ty ddbtypes.KeyType) ddbtypes.KeySchemaElement {
		return ddbtypes.KeySchemaElement{AttributeName: aws.String(n), KeyType: ty}
	}
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(t.StateTable()),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			attr(topology.KeyOrderID, ddbtypes.ScalarAttributeTypeS), attr(topology.KeySort, ddbtypes.ScalarAttributeTypeS),
			attr(topology.KeyDueShard, ddbtypes.ScalarAttributeTypeS), attr(topology.KeyDueAt, ddbtypes.ScalarAttributeTypeN),
			attr(topology.KeyEndShard, ddbtypes.ScalarAttributeTypeS), attr(topology.KeyEndedAt, ddbtypes.ScalarAttributeTypeN),
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			keyEl(topology.KeyOrderID, ddbtypes.KeyTypeHash), keyEl(topology.KeySort, ddbtypes.KeyTypeRange),
		},
		GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{{
			IndexName: aws.String(topology.DeadlineIndex),
			KeySchema: []ddbtypes.KeySchemaElement{
				keyEl(topology.KeyDueShard, ddbtypes.KeyTypeHash), keyEl(topology.KeyDueAt, ddbtypes.KeyTypeRange),
			},
			// Keys only: a claim or a record's transition writes no index entry;
			// the Supervisor reads the orders it finds due.
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeKeysOnly},
		}, {
			IndexName: aws.String(topology.EndIndex),
			KeySchema: []ddbtypes.KeySchemaElement{
				keyEl(topology.KeyEndShard, ddbtypes.KeyTypeHash), keyEl(topology.KeyEndedAt, ddbtypes.KeyTypeRange),
			},
			// Keys only, written once when an order ends other than
			// Processed: a search of ended orders reads their items after.
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeKeysOnly},
		}},
	}
}

// EnsureQueues creates the queues and their DLQs, as the topology sizes
// them, unless they exist (then it brings them to those attributes).
func EnsureQueues(ctx context.Context, api *sqs.Client, qs []topology.Queue) (*Resources, error) {
	res := &Resources{QueueURLs: map[string]string{}, QueueARNs: map[string]string{}}
	for _, q := range qs {
		if err := ensureQueue(ctx, api, q, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func ensureQueue(ctx context.Context, api *sqs.Client, q topology.Queue, res *Resources) error {
	dlqURL, dlqARN, err := createQueue(ctx, api, q.DLQName, map[string]string{
		string(sqstypes.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(14 * 24 * 3600),
		// Room for a message its queue took, refused with its reason.
		string(sqstypes.QueueAttributeNameMaximumMessageSize): strconv.Itoa(q.DLQMaxMessageBytes),
	})
	if err != nil {
		return err
	}
	res.QueueURLs[q.DLQName], res.QueueARNs[q.DLQName] = dlqURL, dlqARN
	url, arn, err := createQueue(ctx, api, q.Name, map[string]string{
		// SQS's classic bound, which the product keeps every message within
		// (a payload over it travels by claim check): held here, a message
		// over it fails the test or the local run that sends it.
		string(sqstypes.QueueAttributeNameMaximumMessageSize): strconv.Itoa(q.MaxMessageBytes),
		string(sqstypes.QueueAttributeNameVisibilityTimeout):  strconv.Itoa(int(q.VisibilityTimeout.Seconds())),
		string(sqstypes.QueueAttributeNameRedrivePolicy): fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`,
			dlqARN, q.MaxReceiveCount),
	})
	if err != nil {
		return err
	}
	res.QueueURLs[q.Name], res.QueueARNs[q.Name] = url, arn
	return nil
}

// createQueue creates the queue, or brings an existing one to the attributes.
func createQueue(ctx context.Context, api *sqs.Client, name string, attrs map[string]string) (url, arn string, err error) {
	out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	var exists *sqstypes.QueueNameExists
	switch {
	case errors.As(err, &exists):
		got, gerr := api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if gerr != nil {
			return "", "", fmt.Errorf("get queue %s: %w", name, gerr)
		}
		url = aws.ToString(got.QueueUrl)
		if _, err := api.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: &url, Attributes: attrs}); err != nil {
			return "", "", fmt.Errorf("update queue %s: %w", name, err)
		}
	case err != nil:
		return "", "", fmt.Errorf("create queue %s: %w", name, err)
	default:
		url = aws.ToString(out.QueueUrl)
	}
	a, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", fmt.Errorf("get queue %s ARN: %w", name, err)
	}
	return url, a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}
