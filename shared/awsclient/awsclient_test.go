package awsclient_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
)

func TestFromLambdaEnvReadsTheRuntimeEnvironment(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "token")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000")
	c, err := awsclient.FromLambdaEnv()
	require.NoError(t, err)
	require.Equal(t, "eu-west-1", c.Config.Region)
	creds, err := c.Config.Credentials.Retrieve(context.Background())
	require.NoError(t, err)
	require.Equal(t, "AKIDEXAMPLE", creds.AccessKeyID)
	require.Equal(t, "token", creds.SessionToken)
	require.Equal(t, "http://127.0.0.1:8000", aws.ToString(c.DynamoDB.Options().BaseEndpoint), "the service's own endpoint first")
	require.Equal(t, "http://127.0.0.1:4566", aws.ToString(c.SQS.Options().BaseEndpoint))
	require.Equal(t, "http://127.0.0.1:4566", aws.ToString(c.Config.BaseEndpoint),
		"clients made from Config (an agent's Secrets Manager and SSM) reach the emulator too")

	t.Setenv("AWS_REGION", "")
	_, err = awsclient.FromLambdaEnv()
	require.ErrorContains(t, err, "AWS_REGION is not set")
}

// A service's own endpoint variable wins over the endpoint for every
// service, as AWS_ENDPOINT_URL_<SERVICE> wins over AWS_ENDPOINT_URL for the
// SDK; an endpoint for the service itself wins over both. The tests' queues
// in process are named by AWS_ENDPOINT_URL_SQS while every harness passes
// moto's endpoint: the SDK preferred the one in code, and moto served them.
func TestAServicesOwnEndpointWinsOverTheOneForEveryService(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:1")
	t.Setenv("AWS_ENDPOINT_URL_SNS", "http://127.0.0.1:2")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "")
	c, err := awsclient.Load(context.Background(), awsclient.Options{Endpoint: "http://127.0.0.1:3", Emulated: true})
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:1", aws.ToString(c.SQS.Options().BaseEndpoint))
	require.Equal(t, "http://127.0.0.1:2", aws.ToString(c.SNS.Options().BaseEndpoint))
	require.Equal(t, "http://127.0.0.1:3", aws.ToString(c.DynamoDB.Options().BaseEndpoint), "no variable of its own: the one for every service")
	c, err = awsclient.Load(context.Background(), awsclient.Options{Endpoint: "http://127.0.0.1:3", QueuesEndpoint: "http://127.0.0.1:4", Emulated: true})
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:4", aws.ToString(c.SQS.Options().BaseEndpoint), "named in code for the service: it wins")
}
