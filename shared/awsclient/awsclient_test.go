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
