package keyname_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/emulator/emulatortest"
	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/devkit/storetest"
	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/seal"
	"github.com/sas-go/sas/shared/topology"
)

var engines = map[string]emulatortest.Engine{}

func TestMain(m *testing.M) { os.Exit(emulatortest.MainWithEngines(m, engines)) }

// table is a test's state table.
type table struct {
	db   *dynamodb.Client
	name string
}

// namer is agent's namer under secrets, its secret kept in tb.
func (tb table) namer(agent string, secrets keyname.Secrets) *keyname.Namer {
	return keyname.NewNamer(tb.db, tb.name, agent, secrets)
}

// eachTable runs fn on a fresh state table of every engine.
func eachTable(t *testing.T, fn func(t *testing.T, tb table)) {
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topo := storetest.NewTables(t, e.Clients.DynamoDB)
			fn(t, table{e.Clients.DynamoDB, topo.StateTable()})
		})
	}
}

// secrets is an instance's seal.Sealer under a key of moto's KMS, its
// requests counted, failing while down is set.
type secrets struct {
	*seal.Sealer
	made, opened atomic.Int32
	down         atomic.Bool
	broken       atomic.Bool // every secret kept is under another key
}

var errKMSDown = errors.New("KMS unreachable")

func (s *secrets) NewSecret(ctx context.Context, owner string) ([]byte, []byte, error) {
	if s.down.Load() {
		return nil, nil, errKMSDown
	}
	s.made.Add(1)
	return s.Sealer.NewSecret(ctx, owner)
}

func (s *secrets) OpenSecret(ctx context.Context, owner string, blob []byte) ([]byte, error) {
	if s.down.Load() {
		return nil, errKMSDown
	}
	s.opened.Add(1)
	if s.broken.Load() {
		return nil, &seal.Error{OrderID: owner, Reason: "not under this key"}
	}
	return s.Sealer.OpenSecret(ctx, owner, blob)
}

// keyOf is the ARN of a key of moto's KMS by its alias's name, made once.
func keyOf(t *testing.T, c *kms.Client, name string) string {
	t.Helper()
	arn, err := provision.EnsureKey(context.Background(), c, "alias/"+strings.ReplaceAll(t.Name(), "/", "-")+"-"+name)
	require.NoError(t, err)
	return arn
}

// Every instance of an agent names a key alike, as the first instance to
// need it made the agent's secret: of instances that start at once, each
// making one, one is kept and the others read it; an instance opens it once
// (one KMS request), and an instance started later names as they did. The
// name says nothing of the value: a value has one name, two values two.
func TestEveryInstanceNamesAKeyAlike(t *testing.T) {
	eachTable(t, func(t *testing.T, tb table) {
		ctx := context.Background()
		c := engines["moto"].Clients.KMS
		key := keyOf(t, c, "alike")
		const instances = 8
		names, errs := make([]string, instances), make([]error, instances)
		made := make([]*secrets, instances)
		var wg sync.WaitGroup
		for i := range instances {
			made[i] = &secrets{Sealer: seal.New(c, key)}
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := tb.namer("billing", made[i])
				name, err := n.Name(ctx, "customer-42")
				again, err2 := n.Name(ctx, "customer-42")
				names[i], errs[i] = name, errors.Join(err, err2)
				if name != again {
					errs[i] = fmt.Errorf("named %s, then %s", name, again)
				}
			}()
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		var kms int32
		for i, sc := range made {
			require.Equal(t, names[0], names[i], "instance %d names the key as the first does", i)
			require.LessOrEqual(t, sc.made.Load()+sc.opened.Load(), int32(2), "instance %d: a secret made, or opened, and at most one kept by another opened", i)
			kms += sc.made.Load()
		}
		require.GreaterOrEqual(t, kms, int32(1))
		require.True(t, strings.HasPrefix(names[0], keyname.NamePrefix), names[0])
		require.Len(t, names[0], len(keyname.NamePrefix)+32)
		require.NotContains(t, names[0], "customer")

		later := &secrets{Sealer: seal.New(c, key)}
		n := tb.namer("billing", later)
		name, err := n.Name(ctx, "customer-42")
		require.NoError(t, err)
		require.Equal(t, names[0], name, "an instance started later")
		other, err := n.Name(ctx, "customer-43")
		require.NoError(t, err)
		require.NotEqual(t, name, other)
		require.Equal(t, int32(0), later.made.Load(), "the secret kept is read, none made")
		require.Equal(t, int32(1), later.opened.Load(), "opened once for every name")

		elsewhere, err := tb.namer("courier", &secrets{Sealer: seal.New(c, key)}).Name(ctx, "customer-42")
		require.NoError(t, err)
		require.NotEqual(t, name, elsewhere, "another agent's secret is its own")
	})
}

// secretItem is agent's secret's item under key, as stored (nil: none).
func (tb table) secretItem(t *testing.T, agent, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := tb.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &tb.name, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			topology.KeyOrderID: &types.AttributeValueMemberS{Value: keyname.SecretOwner(agent)},
			topology.KeySort:    &types.AttributeValueMemberS{Value: "secret/" + key}}})
	require.NoError(t, err)
	return out.Item
}

// A name fails while the agent's secret cannot be made (KMS is down):
// nothing is kept, and the next name, KMS back, makes it. A deploy to
// another key names under a secret of that key's, while the old key's
// instances, rolling out, keep theirs: the names change once. A secret
// that no longer opens under its key (an alias pointed at another key) is
// made anew in its place, and an instance that opened the one before names
// by the new one after SecretRecheck.
func TestASecretIsMadeOnceAKeyAndAnewIfItNoLongerOpens(t *testing.T) {
	eachTable(t, func(t *testing.T, tb table) {
		ctx := context.Background()
		c := engines["moto"].Clients.KMS
		oldKey, newKey := keyOf(t, c, "old"), keyOf(t, c, "new")
		old := &secrets{Sealer: seal.New(c, oldKey)}
		old.down.Store(true)
		_, err := tb.namer("billing", old).Name(ctx, "customer-42")
		require.ErrorIs(t, err, errKMSDown)
		require.ErrorContains(t, err, "name a key of agent billing: make its secret")
		require.Nil(t, tb.secretItem(t, "billing", oldKey), "nothing kept")
		old.down.Store(false)
		warm := tb.namer("billing", old)
		before, err := warm.Name(ctx, "customer-42")
		require.NoError(t, err)
		require.NotNil(t, tb.secretItem(t, "billing", oldKey), "made when KMS answered")

		after, err := tb.namer("billing", &secrets{Sealer: seal.New(c, newKey)}).Name(ctx, "customer-42")
		require.NoError(t, err)
		require.NotEqual(t, before, after, "named under the new key's secret")
		for _, n := range []*keyname.Namer{warm, tb.namer("billing", old)} {
			name, err := n.Name(ctx, "customer-42")
			require.NoError(t, err)
			require.Equal(t, before, name, "an instance under the old key names as before")
		}
		again, err := tb.namer("billing", &secrets{Sealer: seal.New(c, newKey)}).Name(ctx, "customer-42")
		require.NoError(t, err)
		require.Equal(t, after, again, "and one under the new key as the new key's")

		now := time.Now()
		warm.Now = func() time.Time { return now }
		moved := &secrets{Sealer: seal.New(c, oldKey)}
		moved.broken.Store(true)
		renamed, err := tb.namer("billing", moved).Name(ctx, "customer-42")
		require.NoError(t, err)
		require.NotEqual(t, before, renamed, "made anew")
		name, err := warm.Name(ctx, "customer-42")
		require.NoError(t, err)
		require.Equal(t, before, name, "the secret opened is trusted for SecretRecheck")
		now = now.Add(keyname.SecretRecheck)
		name, err = warm.Name(ctx, "customer-42")
		require.NoError(t, err)
		require.Equal(t, renamed, name, "then read again")
	})
}
