package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/shared/deployment"
	"github.com/sas-go/sas/shared/keyname"
)

// DataKeyReuse is how long SQS reuses a data key of the customer managed key
// before it asks KMS for another (KmsDataKeyReusePeriodSeconds; SQS's
// default is 5 minutes): each principal sending to or receiving from a
// queue then calls KMS about once an hour per queue, whatever the orders.
const DataKeyReuse = 3600

// dataKey is the customer managed key the stack's data is encrypted under
// (context kms), or nil: AWS's own keys. A key the stack creates is rotated
// every year and kept when the stack is deleted (the tables, which outlive
// it, need it); its policy lets the services that use it on the stack's
// behalf do so (keyPolicy). A key of the customer's own (its ARN) is
// imported: its policy is theirs, and must say the same
// (docs/operations.md).
func dataKey(st awscdk.Stack, p Props) awskms.IKey {
	switch p.KMS {
	case "":
		return nil
	case deployment.KMSCreate:
		k := awskms.NewKey(st, jsii.String("DataKey"), &awskms.KeyProps{
			Description:       jsii.String("Scheduler-Agent-Supervisor " + p.Topology.Prefix + ": its tables, queues, topics, payloads and logs"),
			Alias:             jsii.String("alias/" + p.Topology.Prefix + "-data"),
			EnableKeyRotation: jsii.Bool(true),
			RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
		})
		keyPolicy(k)
		return k
	}
	awscdk.Annotations_Of(st).AddInfo(jsii.String("context kms names a key of your own: its key policy must let CloudWatch " +
		"Logs, CloudWatch alarms and SNS use it (docs/operations.md); the functions' roles are granted their use here"))
	return awskms.Key_FromKeyArn(st, jsii.String("DataKey"), jsii.String(p.KMS))
}

// keyPolicy lets the services that use the key on the stack's behalf, with
// no role of the stack's, do so: CloudWatch Logs (the log groups, any of
// the account's in the region: a log group's name would make a cycle) and
// CloudWatch alarms (their actions publish to the encrypted alarm topic).
// SNS's delivery to the encrypted alert inbox is added by its subscription.
func keyPolicy(k awskms.Key) {
	logs := awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:*"), nil)
	k.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchLogs"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(awscdk.Fn_Sub(jsii.String("logs.${AWS::Region}.amazonaws.com"), nil), nil)},
		Actions:    jsii.Strings("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"ArnLike": map[string]any{"kms:EncryptionContext:aws:logs:arn": logs}},
	}), jsii.Bool(false))
	k.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarms"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
	}), jsii.Bool(false))
}

// keyUse is what a function's role may do with the key: encrypt and
// decrypt what it writes to and reads from the tables, and the alert topic
// if it publishes there (publishes: the Scheduler, the Supervisor), and
// only through those services (kms:ViaService), never directly. (The
// queues' use is queueKeyUse, for each function's own queues; the payload
// bucket's, payloadUse.keyUse.)
func keyUse(key awskms.IKey, publishes bool) awsiam.PolicyStatement {
	via := []*string{viaService("dynamodb")}
	if publishes {
		via = append(via, viaService("sns"))
	}
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("DataKeyThroughTheServices"),
		Actions:    jsii.Strings("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:DescribeKey"),
		Resources:  &[]*string{key.KeyArn()},
		Conditions: &map[string]any{"StringEquals": map[string]any{"kms:ViaService": via}},
	})
}

// viaService is the kms:ViaService of an AWS service in the stack's region.
func viaService(service string) *string {
	return awscdk.Fn_Sub(jsii.String(service+".${AWS::Region}.amazonaws.com"), nil)
}

// sealUse is what a function's role may do with the key for the orders'
// sealed data (shared/seal): call KMS itself, not through a service, to
// open an order's data key (kms:Decrypt) and, Submission with context
// sealData, to make it (kms:GenerateDataKey), and only for an order's data
// key: a request whose encryption context is the order's id alone
// (ForAllValues: no other key; Null false: not without one). A stack with
// a key and sealData off keeps the opening: the orders sealed before it
// was turned off run to their end.
func sealUse(key awskms.IKey, makesKeys bool) awsiam.PolicyStatement {
	actions := []string{"kms:Decrypt"}
	if makesKeys {
		actions = append([]string{"kms:GenerateDataKey"}, actions...)
	}
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("SealData"),
		Actions:   jsii.Strings(actions...),
		Resources: &[]*string{key.KeyArn()},
		Conditions: &map[string]any{
			"ForAllValues:StringEquals": map[string]any{"kms:EncryptionContextKeys": []*string{jsii.String(sealContextKey)}},
			"Null":                      map[string]any{"kms:EncryptionContextKeys": "false"},
		},
	})
}

// keyNamesUse is what an Agent whose calls in flight are bounded per key
// (perKey) may do with the key in a stack with sealData, beside sealUse:
// make the one secret its keys are named by (keyname.Namer), and no other
// data key: kms:GenerateDataKey for the encryption context that is its
// secret's owner alone. It opens it as it opens an order's data key.
func keyNamesUse(key awskms.IKey, agent string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("KeyNames"),
		Actions:   jsii.Strings("kms:GenerateDataKey"),
		Resources: &[]*string{key.KeyArn()},
		Conditions: &map[string]any{
			"StringEquals":              map[string]any{"kms:EncryptionContext:" + sealContextKey: keyname.SecretOwner(agent)},
			"ForAllValues:StringEquals": map[string]any{"kms:EncryptionContextKeys": []*string{jsii.String(sealContextKey)}},
		},
	})
}

// sealContextKey is the one key of the encryption context of an order's
// data key (shared/seal): its value is the order's id.
const sealContextKey = "orderId"
