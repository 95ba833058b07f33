package deployment

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/tracing"
)

// FromLambdaEnv builds the deployment a Lambda function runs in: its
// configuration from the environment, structured JSON logs on stderr and EMF
// metric lines on stdout.
func FromLambdaEnv(ctx context.Context) (*Deployment, error) {
	cfg, err := FromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	// The clients are instrumented if tracing is on (the environment says
	// so); the exporter's headers may be a secret they read.
	clients, err := awsclient.FromLambdaEnv()
	if err != nil {
		return nil, err
	}
	if err := otlpHeadersFromSecret(ctx, secretsmanager.NewFromConfig(clients.Config), os.Getenv); err != nil {
		return nil, err
	}
	flush, err := tracing.Setup(ctx, os.Getenv("AWS_LAMBDA_FUNCTION_NAME"))
	if err != nil {
		return nil, err
	}
	d := &Deployment{Config: cfg, Clients: clients, Metrics: os.Stdout, Log: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
	if tracing.Enabled() {
		d.FlushTraces = flush
	}
	return d, nil
}

// OTLPHeadersSecretEnv names the Secrets Manager secret whose text is the
// OTLP exporter's headers, in OTEL_EXPORTER_OTLP_HEADERS's form
// (x-honeycomb-team=KEY): the stack sets it from context otlpHeadersSecret,
// so that no key is in the template or the function's configuration.
const OTLPHeadersSecretEnv = "SAS_OTLP_HEADERS_SECRET"

// secretReader reads a secret's text (Secrets Manager's GetSecretValue).
type secretReader interface {
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// otlpHeadersFromSecret adds the headers of the secret OTLPHeadersSecretEnv
// names, when tracing is on, to OTEL_EXPORTER_OTLP_HEADERS (read by
// tracing.Setup), once, at the function's cold start.
func otlpHeadersFromSecret(ctx context.Context, sm secretReader, getenv func(string) string) error {
	name := getenv(OTLPHeadersSecretEnv)
	if name == "" || !tracing.Enabled() {
		return nil
	}
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &name})
	if err != nil {
		return fmt.Errorf("the OTLP headers secret %s (%s): %w", name, OTLPHeadersSecretEnv, err)
	}
	h := strings.TrimSpace(aws.ToString(out.SecretString))
	if h == "" {
		return fmt.Errorf("the OTLP headers secret %s (%s) is empty: it holds key=value,… (x-honeycomb-team=KEY)", name, OTLPHeadersSecretEnv)
	}
	return os.Setenv(tracing.HeadersEnv, strings.Trim(getenv(tracing.HeadersEnv)+","+h, ","))
}

// InstanceID names this execution environment, short (it is kept in
// every record an Agent claims, and DynamoDB bills its bytes): 12 hex digits
// of a hash of the Lambda log stream (one per environment) when there is
// one, else random.
func InstanceID() string {
	if s := os.Getenv("AWS_LAMBDA_LOG_STREAM_NAME"); s != "" {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:6])
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
