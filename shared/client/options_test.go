package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/client"
)

// RetentionDays, the deployment's, is never negative; 0 is the
// deployment's 0, kept forever.
func TestAClientIsToldTheDeploymentsRetention(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	ctx := context.Background()
	negative := -1
	_, err := client.New(ctx, client.Options{Prefix: "shop", Endpoint: motoEndpoint, RetentionDays: &negative})
	require.ErrorContains(t, err, "RetentionDays -1: must not be negative")
	forever := 0
	_, err = client.New(ctx, client.Options{Prefix: "shop", Endpoint: motoEndpoint, RetentionDays: &forever})
	require.NoError(t, err)
}
