package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// suppressions are the cdk-nag AwsSolutions findings this stack accepts, each
// with its reason.
func suppressions(st awscdk.Stack, r *Resources) {
	for name, q := range r.Queues {
		if len(name) > 4 && name[len(name)-4:] == "-dlq" {
			cdknag.NagSuppressions_AddResourceSuppressions(q, &[]*cdknag.NagPackSuppression{{
				Id: jsii.String("AwsSolutions-SQS3"), Reason: jsii.String("This queue is a dead-letter queue."),
			}}, jsii.Bool(true))
		}
	}
	cdknag.NagSuppressions_AddResourceSuppressions(r.AlertInbox, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SQS3"), Reason: jsii.String("The alert inbox is read by the operator, never consumed by a function: nothing to dead-letter."),
	}}, jsii.Bool(true))
	cdknag.NagSuppressions_AddResourceSuppressions(r.PayloadLogs, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-S1"), Reason: jsii.String("This bucket holds the payload bucket's server access logs: logging it would log the logging."),
	}}, jsii.Bool(true))
	for _, t := range []awscdk.Resource{r.Alerts, r.Alarms} {
		if r.Key != nil {
			break // encrypted under the customer managed key (context kms)
		}
		cdknag.NagSuppressions_AddResourceSuppressions(t, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-SNS2"),
			Reason: jsii.String("The topics carry order ids, step names and error text, no payment data; " +
				"CloudWatch alarm actions cannot publish to a topic encrypted with the AWS managed SNS key, " +
				"and a customer managed key would add cost and a key policy to every deployment."),
		}}, jsii.Bool(true))
	}
	cdknag.NagSuppressions_AddStackSuppressions(st, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("Each function may write only its own log group's streams (log-group:NAME:*), " +
			"and send status messages only to reply queues whose names start with a configured prefix (PREFIX*); " +
			"an agent may read only its own secret and each function the OTLP collector's headers secret (NAME-??????: Secrets Manager's suffix), " +
			"and invoke only its own API's stage (its workflow file's resource); " +
			"a function reads and writes the payload bucket's objects under orders/ (an order's payloads, whose keys are the orders' ids), " +
			"and Submission reads any of its objects (where an SQS Extended Client's sender put an order) and, " +
			"with sealData, writes a sealed order over the clear body its sender offloaded under incoming/."),
		AppliesTo: &[]interface{}{
			map[string]*string{"regex": jsii.String("/^Resource::<.*LogsDD?[A-F0-9]*\\.Arn>:\\*$/")},
			map[string]*string{"regex": jsii.String("/^Resource::.*LogsDD?[A-F0-9]*\\.Arn$/")},
			map[string]*string{"regex": jsii.String("/^Resource::arn:<AWS::Partition>:sqs:<AWS::Region>:<AWS::AccountId>:.*\\*$/")},
			map[string]*string{"regex": jsii.String("/^Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:.*-\\?\\?\\?\\?\\?\\?$/")},
			map[string]*string{"regex": jsii.String("/^Resource::arn:aws:execute-api:.*\\*$/")},
			map[string]*string{"regex": jsii.String("/^Resource::<PayloadBucket[A-F0-9]*\\.Arn>\\/(orders\\/|incoming\\/)?\\*$/")},
		},
	}}, jsii.Bool(true))
}
