package emulator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/awsclient"
	"github.com/sas-go/sas/shared/devkit/emulator"
)

// The launcher gives moto DynamoDB's ClientRequestToken semantics: a retry
// of a transaction that was applied succeeds without applying it again.
func TestMotoTransactionsAreIdempotentByToken(t *testing.T) {
	ctx := context.Background()
	p, err := emulator.StartMoto(ctx, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop() })
	require.NotZero(t, p.PID())
	c, err := awsclient.Load(ctx, awsclient.Options{Endpoint: p.Endpoint, Emulated: true})
	require.NoError(t, err)
	_, err = c.DynamoDB.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("t"), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: types.ScalarAttributeTypeS}},
	})
	require.NoError(t, err)
	put := func(token string) error {
		_, err := c.DynamoDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			ClientRequestToken: aws.String(token),
			TransactItems: []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String("t"),
				Item:                map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "a"}},
				ConditionExpression: aws.String("attribute_not_exists(k)")}}},
		})
		return err
	}
	require.NoError(t, put("token-1"))
	require.NoError(t, put("token-1"), "a retry with the same token succeeds")
	var tce *types.TransactionCanceledException
	require.True(t, errors.As(put("token-2"), &tce), "a new transaction sees the item")
}

func TestExternalEmulatorIsLeftRunning(t *testing.T) {
	p := emulator.External("x", "http://127.0.0.1:1")
	require.Zero(t, p.PID())
	require.NoError(t, p.Stop())
}
