package deployment

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"

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
	// Tracing first: the clients are instrumented if it is on.
	flush, err := tracing.Setup(ctx, os.Getenv("AWS_LAMBDA_FUNCTION_NAME"))
	if err != nil {
		return nil, err
	}
	clients, err := awsclient.FromLambdaEnv()
	if err != nil {
		return nil, err
	}
	d := &Deployment{Config: cfg, Clients: clients, Metrics: os.Stdout, Log: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
	if tracing.Enabled() {
		d.FlushTraces = flush
	}
	return d, nil
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
