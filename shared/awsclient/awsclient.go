// Package awsclient loads the AWS SDK configuration and builds the clients the
// product uses. Endpoints are never hard-coded: the SDK's own AWS_ENDPOINT_URL
// and AWS_ENDPOINT_URL_<SERVICE> settings apply, or Options.Endpoint when a
// test or the local runner started its own emulator.
package awsclient

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/sas-go/sas/shared/tracing"
)

// Options adjust how the configuration is loaded.
type Options struct {
	// Endpoint, when set, is used for every service (an emulator).
	Endpoint string
	// DynamoDBEndpoint, when set, is used for DynamoDB instead (another
	// emulator, e.g. DynamoDB Local, which reports consumed capacity).
	DynamoDBEndpoint string
	// QueuesEndpoint, when set, is used for SQS and SNS instead (the
	// in-process queues of shared/devkit/sqsmem, which also serve the SNS
	// topics that deliver to them).
	QueuesEndpoint string
	// Emulated marks an emulator target: a default region and dummy
	// credentials are used when none are configured, and response checksum
	// validation is off (DynamoDB Local's error responses fail it).
	Emulated bool
	// APIOptions are added to every client (e.g. an accounting meter's).
	APIOptions []func(*middleware.Stack) error
}

// Clients are the service clients of one configuration.
type Clients struct {
	Config   aws.Config
	DynamoDB *dynamodb.Client
	SQS      *sqs.Client
	SNS      *sns.Client
	// S3 keeps the payloads too large for a message or an item
	// (shared/payload).
	S3 *s3.Client
	// KMS makes and opens the orders' data keys (shared/seal).
	KMS *kms.Client
}

// Load reads the SDK configuration and builds the clients.
func Load(ctx context.Context, o Options) (*Clients, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = 64
		})),
	}
	if o.Endpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(o.Endpoint))
	}
	if o.Emulated {
		if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
			opts = append(opts, config.WithRegion("us-east-1"))
		}
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
			opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS config: %w", err)
	}
	cfg.APIOptions = append(cfg.APIOptions, o.APIOptions...)
	tracing.AWSMiddlewares(&cfg.APIOptions)
	cfg.Logger = quietLogger{cfg.Logger}
	// A service's own endpoint wins over the one for every service, as
	// AWS_ENDPOINT_URL_<SERVICE> wins over AWS_ENDPOINT_URL for the SDK: an
	// Options.Endpoint would otherwise win over the variable (the SDK
	// prefers an endpoint set in code), and the tests' in-process queues,
	// named by AWS_ENDPOINT_URL_SQS, would serve nothing.
	dynamo := cmp.Or(o.DynamoDBEndpoint, os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	queues := cmp.Or(o.QueuesEndpoint, os.Getenv("AWS_ENDPOINT_URL_SQS"))
	topics := cmp.Or(o.QueuesEndpoint, os.Getenv("AWS_ENDPOINT_URL_SNS"))
	return &Clients{
		Config: cfg,
		DynamoDB: dynamodb.NewFromConfig(cfg, func(d *dynamodb.Options) {
			if o.Emulated {
				d.DisableValidateResponseChecksum = true
			}
			if dynamo != "" {
				d.BaseEndpoint = aws.String(dynamo)
			}
		}),
		SQS: sqs.NewFromConfig(cfg, func(q *sqs.Options) {
			if queues != "" {
				q.BaseEndpoint = aws.String(queues)
			}
		}),
		SNS: sns.NewFromConfig(cfg, func(n *sns.Options) {
			if topics != "" {
				n.BaseEndpoint = aws.String(topics)
			}
		}),
		S3: newS3(cfg, cmp.Or(os.Getenv("AWS_ENDPOINT_URL_S3"), o.Endpoint, os.Getenv("AWS_ENDPOINT_URL"))),
		KMS: kms.NewFromConfig(cfg, func(k *kms.Options) {
			if e := cmp.Or(os.Getenv("AWS_ENDPOINT_URL_KMS"), o.Endpoint); e != "" {
				k.BaseEndpoint = aws.String(e)
			}
		}),
	}, nil
}

// quietLogger passes the SDK's log lines on but one: its warning that the
// body of a request cut short could not be drained, which every long poll
// cancelled when a local run stops would print.
type quietLogger struct{ logging.Logger }

// Logf implements logging.Logger.
func (l quietLogger) Logf(c logging.Classification, format string, v ...any) {
	if !strings.HasPrefix(format, "failed to discard remaining HTTP response body") {
		l.Logger.Logf(c, format, v...)
	}
}

// FromLambdaEnv builds the clients inside a Lambda function, from what the
// runtime puts in the environment (region, the role's session credentials)
// without the SDK's whole configuration loader, whose shared-config, SSO and
// STS machinery a function never uses and which makes up a tenth of each
// binary. AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> are honoured, as
// the loader would.
func FromLambdaEnv() (*Clients, error) {
	region := os.Getenv("AWS_REGION")
	if region == "" {
		return nil, fmt.Errorf("AWS_REGION is not set: not in a Lambda function?")
	}
	cfg := aws.Config{
		Region: region,
		Credentials: credentials.NewStaticCredentialsProvider(
			os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN")),
		HTTPClient: awshttp.NewBuildableClient(),
	}
	endpoint := func(service string) *string { // "": every service's
		keys := []string{"AWS_ENDPOINT_URL"}
		if service != "" {
			keys = append([]string{"AWS_ENDPOINT_URL_" + service}, keys...)
		}
		for _, k := range keys {
			if v := os.Getenv(k); v != "" {
				return aws.String(v)
			}
		}
		return nil
	}
	cfg.BaseEndpoint = endpoint("") // the other clients made from Config (Secrets Manager, SSM)
	tracing.AWSMiddlewares(&cfg.APIOptions)
	return &Clients{
		Config:   cfg,
		DynamoDB: dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = endpoint("DYNAMODB") }),
		SQS:      sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = endpoint("SQS") }),
		SNS:      sns.NewFromConfig(cfg, func(o *sns.Options) { o.BaseEndpoint = endpoint("SNS") }),
		S3:       newS3(cfg, aws.ToString(endpoint("S3"))),
		KMS:      kms.NewFromConfig(cfg, func(o *kms.Options) { o.BaseEndpoint = endpoint("KMS") }),
	}, nil
}

// newS3 is the S3 client of cfg. An emulator's endpoint (moto, LocalStack)
// is addressed by path (http://host/bucket/key): its host name carries no
// bucket. The SDK validates no response checksum unless asked: a payload
// is checked against the SHA-256 its claim check names (payload.Store.Get).
func newS3(cfg aws.Config, endpoint string) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		if endpoint != "" {
			o.BaseEndpoint, o.UsePathStyle = aws.String(endpoint), true
		}
	})
}
