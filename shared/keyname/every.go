package keyname

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/topology"
)

// Querier is the part of the DynamoDB client EveryName uses.
type Querier interface {
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Opener opens a secret kept under a KMS key the blob names
// (seal.Sealer, an operator's with no key of its own, does).
type Opener interface {
	OpenSecret(ctx context.Context, owner string, blob []byte) ([]byte, error)
}

// EveryName is value's name under each secret agent keeps (one per KMS key
// its deployment named it under), for a reader that knows no key (an
// operator looking a value up): one Query of the agent's secret items and
// a KMS request per secret.
func EveryName(ctx context.Context, db Querier, table, agent string, secrets Opener, value string) ([]string, error) {
	b := dynamoexpr.New()
	b.If(secretsOf(b, agent))
	e, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("list agent %s's secrets: %w", agent, err)
	}
	p := dynamodb.NewQueryPaginator(db, &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: &e.Condition,
		ExpressionAttributeNames: e.Names, ExpressionAttributeValues: e.Values})
	var names []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list agent %s's secrets: %w", agent, err)
		}
		for _, item := range page.Items {
			blob := blobOf(item)
			if blob == nil {
				continue
			}
			secret, err := secrets.OpenSecret(ctx, SecretOwner(agent), blob)
			if err != nil {
				return nil, fmt.Errorf("open agent %s's secret: %w", agent, err)
			}
			names = append(names, nameUnder(secret, value))
		}
	}
	return names, nil
}

// secretsOf is the key condition of agent's secret items.
func secretsOf(b *dynamoexpr.Builder, agent string) dynamoexpr.Cond {
	return dynamoexpr.And(
		dynamoexpr.Equal(b.Name(topology.KeyOrderID), b.Value(&types.AttributeValueMemberS{Value: topology.AgentPartition(agent)})),
		dynamoexpr.BeginsWith(b.Name(topology.KeySort), b.Value(&types.AttributeValueMemberS{Value: "secret/"})))
}
