// Package keyname names the keys of an agent's calls in flight
// (workflow.Agent.PerKey) as they are kept, shown and logged: by value, or
// for a long one its hash (ShortKey); in a deployment that seals its
// orders' data, by an HMAC under a secret of the agent's own (Namer), so
// that no key's value, an order's data, is kept in clear. It reads and
// writes only the agent's secret item.
package keyname

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/dynamoexpr"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/topology"
)

// In a deployment that seals its orders' data (sealData), the value of a
// key of an agent's calls in flight (workflow.Agent.PerKey) is its order's
// data: a customer's id, an email. Its item's sort key, its line, the
// records waiting for it (FlowWhy), the requests in line and the handlers'
// logs would hold it in clear; they hold its name instead (Namer): the
// value's HMAC-SHA256 under a secret of the agent's own. The name is the
// same in every instance of the agent, so its limit holds across them, and
// it is not found from a guessed value without the secret, as a plain hash
// would be (a customer's id has few values to try).
//
// The secret is made once per agent and KMS key, by the first instance
// that needs it: 32 bytes from KMS under the key (seal.Sealer.NewSecret),
// kept encrypted in the agent's flow item "secret/KEY". Of two instances
// that make one at once, the first one's is kept (a conditional put) and
// the other reads it. Each instance opens it once, one KMS request, and
// reads the item again every SecretRecheck, so that one made anew (kept
// under an alias since pointed at another key) reaches every instance
// within it. A deploy that changes the key changes every name once: its
// instances under the old key and the new name apart while it rolls out.

// NamePrefix starts every key's name.
const NamePrefix = "hmac:"

// nameBytes is how much of the HMAC a name keeps: 128 bits.
const nameBytes = 16

// SecretOwner is agent's secret's owner in KMS's encryption context, where
// an order's id is for an order's data key: its items' partition key
// (topology.AgentPartition).
func SecretOwner(agent string) string { return topology.AgentPartition(agent) }

// DB is the part of the DynamoDB client a Namer uses.
type DB interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// secretItems are the state table's agents' secret items.
type secretItems struct {
	db    DB
	table string
}

// Secrets makes and opens an agent's secret under the deployment's key
// (seal.Sealer does).
type Secrets interface {
	NewSecret(ctx context.Context, owner string) (plain, blob []byte, err error)
	// OpenSecret's *seal.Error says the blob will never open under the
	// key (an alias the key was named by points at another key since).
	OpenSecret(ctx context.Context, owner string, blob []byte) ([]byte, error)
	// KeyID names the deployment's key, as its configuration does.
	KeyID() string
}

// SecretRecheck is how long an instance names by the secret it opened
// before it reads the secret's item again.
const SecretRecheck = 5 * time.Minute

// failedFor is how long a failure to read, make or open the secret is
// answered without trying again: a batch's calls, which wait for one
// another's try, fail at once after it.
const failedFor = time.Second

// Namer names the keys of one agent's calls in flight by their HMAC under
// the agent's secret.
type Namer struct {
	store   secretItems
	agent   string
	secrets Secrets
	// Now is the time (time.Now if nil).
	Now func() time.Time

	mu       sync.Mutex
	secret   []byte // opened
	blob     []byte // as kept
	checked  time.Time
	failed   error // the last try's, at failedAt
	failedAt time.Time
}

// NewNamer is agent's namer, its secret kept in the state table
// stateTable.
func NewNamer(db DB, stateTable, agent string, secrets Secrets) *Namer {
	return &Namer{store: secretItems{db: db, table: stateTable}, agent: agent, secrets: secrets}
}

// Name is value's name: NamePrefix and 32 hex digits. It fails only while
// the agent's secret cannot be read, made or opened (the state table or KMS
// failed, or its role may not): the call waits, as for any store's
// failure.
func (n *Namer) Name(ctx context.Context, value string) (string, error) {
	secret, err := n.secretKey(ctx)
	if err != nil {
		return "", fmt.Errorf("name a key of agent %s: %w", n.agent, err)
	}
	return nameUnder(secret, value), nil
}

// nameUnder is value's name under secret.
func nameUnder(secret []byte, value string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(value))
	return NamePrefix + hex.EncodeToString(mac.Sum(nil)[:nameBytes])
}

func (n *Namer) now() time.Time {
	if n.Now != nil {
		return n.Now()
	}
	return time.Now()
}

// secretKey is the agent's secret under the deployment's key: opened
// once, and again if its item changed when it is read again.
func (n *Namer) secretKey(ctx context.Context) ([]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	switch {
	case n.secret != nil && now.Sub(n.checked) < SecretRecheck:
		return n.secret, nil
	case n.failed != nil && now.Sub(n.failedAt) < failedFor:
		return nil, n.failed
	}
	secret, blob, err := n.read(ctx)
	if err != nil {
		if n.secret != nil {
			n.checked = now // read again later: the one opened is kept meanwhile
			return n.secret, nil
		}
		if ctx.Err() == nil { // not the caller's own end: the others' calls are told at once
			n.failed, n.failedAt = err, now
		}
		return nil, err
	}
	n.secret, n.blob, n.checked, n.failed = secret, blob, now, nil
	return secret, nil
}

// read reads the secret: the one opened, if its item still keeps it; else
// it opens what the item keeps, or makes it and keeps it if there is none,
// or none that opens under the key (its alias points at another key now).
func (n *Namer) read(ctx context.Context) (secret, blob []byte, err error) {
	owner, key := SecretOwner(n.agent), n.secrets.KeyID()
	kept, err := n.store.secret(ctx, n.agent, key)
	if err != nil {
		return nil, nil, err
	}
	if n.secret != nil && bytes.Equal(kept, n.blob) {
		return n.secret, n.blob, nil
	}
	// At most twice round: a secret another instance kept meanwhile opens,
	// unless it too does not.
	for range 2 {
		var stale []byte
		if kept != nil {
			plain, err := n.secrets.OpenSecret(ctx, owner, kept)
			var broken *seal.Error
			if !errors.As(err, &broken) {
				if err != nil {
					return nil, nil, fmt.Errorf("open its secret: %w", err)
				}
				return plain, kept, nil
			}
			stale = kept
		}
		plain, made, err := n.secrets.NewSecret(ctx, owner)
		if err != nil {
			return nil, nil, fmt.Errorf("make its secret: %w", err)
		}
		if kept, err = n.store.keepSecret(ctx, n.agent, key, made, stale); err != nil {
			return nil, nil, err // kept or not: the next name reads it
		}
		if kept == nil {
			return plain, made, nil
		}
	}
	return nil, nil, errors.New("its secret, kept anew by another instance, does not open either")
}

// secretAttr is the attribute of a secret's item that keeps it,
// encrypted.
const secretAttr = "SecretBlob"

// secretKey is the key of agent's secret's item under KMS key key.
func secretKey(agent, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		topology.KeyOrderID: &types.AttributeValueMemberS{Value: topology.AgentPartition(agent)},
		topology.KeySort:    &types.AttributeValueMemberS{Value: "secret/" + key},
	}
}

// secret is agent's secret under key as kept (nil: none yet).
func (s secretItems) secret(ctx context.Context, agent, key string) ([]byte, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: secretKey(agent, key),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read agent %s's secret: %w", agent, err)
	}
	return blobOf(out.Item), nil
}

// keepSecret keeps blob as agent's secret under key, unless one is kept
// already other than stale (nil: none): then it answers that one.
func (s secretItems) keepSecret(ctx context.Context, agent, key string, blob, stale []byte) ([]byte, error) {
	item := secretKey(agent, key)
	item[secretAttr] = &types.AttributeValueMemberB{Value: blob}
	b := dynamoexpr.New()
	if stale != nil {
		b.If(dynamoexpr.Equal(b.Name(secretAttr), b.Value(&types.AttributeValueMemberB{Value: stale})))
	} else {
		b.If(dynamoexpr.NotExists(b.Name(secretAttr)))
	}
	e, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("keep agent %s's secret: %w", agent, err)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item, ConditionExpression: &e.Condition,
		ExpressionAttributeNames: e.Names, ExpressionAttributeValues: e.Values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if kept := blobOf(ccf.Item); kept != nil && !bytes.Equal(kept, stale) {
			return kept, nil
		}
		// The item changed, and no secret came back with the refusal:
		// read it.
		kept, err := s.secret(ctx, agent, key)
		if err == nil && kept == nil {
			err = fmt.Errorf("agent %s's secret neither kept nor found", agent)
		}
		return kept, err
	}
	if err != nil {
		return nil, fmt.Errorf("keep agent %s's secret: %w", agent, err)
	}
	return nil, nil
}

func blobOf(item map[string]types.AttributeValue) []byte {
	if b, ok := item[secretAttr].(*types.AttributeValueMemberB); ok && len(b.Value) > 0 {
		return b.Value
	}
	return nil
}
