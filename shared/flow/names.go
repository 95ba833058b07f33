package flow

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/shared/seal"
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
// The secret is made once, by the first instance that needs it: 32 bytes
// from KMS under the deployment's key (seal.Sealer.NewSecret), kept
// encrypted in the agent's flow item "secret". Of two instances that make
// one at once, the first one's is kept (a conditional put) and the other
// reads it. Each instance opens it once, one KMS request, and keeps it.

// NamePrefix starts every key's name.
const NamePrefix = "hmac:"

// nameBytes is how much of the HMAC a name keeps: 128 bits.
const nameBytes = 16

// SecretOwner is agent's secret's owner in KMS's encryption context, where
// an order's id is for an order's data key: its flow items' partition key.
func SecretOwner(agent string) string { return "~agent/" + agent }

// Secrets makes and opens an agent's secret under the deployment's key
// (seal.Sealer does).
type Secrets interface {
	NewSecret(ctx context.Context, owner string) (plain, blob []byte, err error)
	// OpenSecret's *seal.Error says the blob will never open under the
	// key (the deployment's key was changed since it was made).
	OpenSecret(ctx context.Context, owner string, blob []byte) ([]byte, error)
	// KeyID names the deployment's key, as its configuration does.
	KeyID() string
}

// Namer names the keys of one agent's calls in flight by their HMAC under
// the agent's secret.
type Namer struct {
	store   Store
	agent   string
	secrets Secrets

	mu     sync.Mutex
	secret []byte // opened, once
}

// NewNamer is agent's namer, its secret kept in store's table.
func NewNamer(store Store, agent string, secrets Secrets) *Namer {
	return &Namer{store: store, agent: agent, secrets: secrets}
}

// Name is value's name: NamePrefix and 32 hex digits. It fails only while
// the agent's secret cannot be read, made or opened (the state table or KMS
// failed): the call waits, as for any store's failure.
func (n *Namer) Name(ctx context.Context, value string) (string, error) {
	secret, err := n.secretKey(ctx)
	if err != nil {
		return "", fmt.Errorf("name a key of agent %s: %w", n.agent, err)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(value))
	return NamePrefix + hex.EncodeToString(mac.Sum(nil)[:nameBytes]), nil
}

// secretKey is the agent's secret, opened once; read, or made and kept if
// there is none, or none made under the deployment's key (kept with the
// secret: a deploy changed the key since).
func (n *Namer) secretKey(ctx context.Context) ([]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.secret != nil {
		return n.secret, nil
	}
	owner, key := SecretOwner(n.agent), n.secrets.KeyID()
	kept, err := n.store.secret(ctx, n.agent)
	if err != nil {
		return nil, err
	}
	// At most twice round: a secret another instance kept meanwhile opens,
	// unless it too is under another key (a deploy that changed the key,
	// rolling out: its instances under the old key and the new make it
	// anew in turn until it ends).
	for range 2 {
		var stale []byte
		if kept.blob != nil {
			if kept.key == key {
				plain, err := n.secrets.OpenSecret(ctx, owner, kept.blob)
				var broken *seal.Error
				if !errors.As(err, &broken) {
					if err != nil {
						return nil, fmt.Errorf("open its secret: %w", err)
					}
					n.secret = plain
					return plain, nil
				}
			}
			stale = kept.blob
		}
		plain, made, err := n.secrets.NewSecret(ctx, owner)
		if err != nil {
			return nil, fmt.Errorf("make its secret: %w", err)
		}
		kept, err = n.store.keepSecret(ctx, n.agent, keptSecret{blob: made, key: key}, stale)
		if err != nil {
			return nil, err // kept or not: the next name reads it
		}
		if kept.blob == nil {
			n.secret = plain
			return plain, nil
		}
	}
	return nil, fmt.Errorf("its secret, kept anew by another instance, is not under key %s either", key)
}

// secretItemSK is the sort key of an agent's secret's item, secretAttr
// the attribute that keeps it, encrypted, and secretKeyAttr the key it is
// encrypted under.
const (
	secretItemSK  = "secret"
	secretAttr    = "SecretBlob"
	secretKeyAttr = "SecretKey"
)

// keptSecret is an agent's secret as kept: encrypted under key.
type keptSecret struct {
	blob []byte
	key  string
}

// secret is agent's secret as kept (blob nil: none yet).
func (s Store) secret(ctx context.Context, agent string) (keptSecret, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: agentKey(agent, secretItemSK),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return keptSecret{}, fmt.Errorf("read agent %s's secret: %w", agent, err)
	}
	return secretOf(out.Item), nil
}

// keepSecret keeps sec as agent's secret, unless one is kept already other
// than stale (nil: none): then it answers that one (blob nil: sec kept).
func (s Store) keepSecret(ctx context.Context, agent string, sec keptSecret, stale []byte) (keptSecret, error) {
	item := agentKey(agent, secretItemSK)
	item[secretAttr] = &types.AttributeValueMemberB{Value: sec.blob}
	item[secretKeyAttr] = &types.AttributeValueMemberS{Value: sec.key}
	in := &dynamodb.PutItemInput{TableName: &s.table, Item: item,
		ConditionExpression:                 aws.String("attribute_not_exists(" + secretAttr + ")"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	if stale != nil {
		in.ConditionExpression = aws.String(secretAttr + " = :stale")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":stale": &types.AttributeValueMemberB{Value: stale}}
	}
	_, err := s.db.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if kept := secretOf(ccf.Item); kept.blob != nil && !bytes.Equal(kept.blob, stale) {
			return kept, nil
		}
		// The item changed, and no secret came back with the refusal:
		// read it.
		kept, err := s.secret(ctx, agent)
		if err == nil && kept.blob == nil {
			err = fmt.Errorf("agent %s's secret neither kept nor found", agent)
		}
		return kept, err
	}
	if err != nil {
		return keptSecret{}, fmt.Errorf("keep agent %s's secret: %w", agent, err)
	}
	return keptSecret{}, nil
}

func secretOf(item map[string]types.AttributeValue) keptSecret {
	var k keptSecret
	if b, ok := item[secretAttr].(*types.AttributeValueMemberB); ok && len(b.Value) > 0 {
		k.blob = b.Value
	}
	if v, ok := item[secretKeyAttr].(*types.AttributeValueMemberS); ok {
		k.key = v.Value
	}
	return k
}
