package flow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/devkit/provision"
	"github.com/sas-go/sas/shared/flow"
	"github.com/sas-go/sas/shared/seal"
)

// secrets is an instance's seal.Sealer under a key of moto's KMS, its
// requests counted, failing while down is set.
type secrets struct {
	*seal.Sealer
	made, opened atomic.Int32
	down         atomic.Bool
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
	each(t, func(t *testing.T, s flow.Store) {
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
				n := flow.NewNamer(s, "billing", made[i])
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
		require.True(t, strings.HasPrefix(names[0], flow.NamePrefix), names[0])
		require.Len(t, names[0], len(flow.NamePrefix)+32)
		require.NotContains(t, names[0], "42")

		later := &secrets{Sealer: seal.New(c, key)}
		n := flow.NewNamer(s, "billing", later)
		name, err := n.Name(ctx, "customer-42")
		require.NoError(t, err)
		require.Equal(t, names[0], name, "an instance started later")
		other, err := n.Name(ctx, "customer-43")
		require.NoError(t, err)
		require.NotEqual(t, name, other)
		require.Equal(t, int32(0), later.made.Load(), "the secret kept is read, none made")
		require.Equal(t, int32(1), later.opened.Load(), "opened once for every name")

		elsewhere, err := flow.NewNamer(s, "courier", &secrets{Sealer: seal.New(c, key)}).Name(ctx, "customer-42")
		require.NoError(t, err)
		require.NotEqual(t, name, elsewhere, "another agent's secret is its own")
	})
}

// A name fails while the agent's secret cannot be made (KMS is down):
// nothing is kept, and the next name, KMS back, makes it. A secret made
// under a key the deployment no longer has (its key was changed) is made
// anew in its place: the names change once, and every instance under the
// new key names alike again.
func TestASecretIsMadeWhenItCanBeAndAnewUnderANewKey(t *testing.T) {
	each(t, func(t *testing.T, s flow.Store) {
		ctx := context.Background()
		c := engines["moto"].Clients.KMS
		old := &secrets{Sealer: seal.New(c, keyOf(t, c, "old"))}
		old.down.Store(true)
		_, err := flow.NewNamer(s, "billing", old).Name(ctx, "customer-42")
		require.ErrorIs(t, err, errKMSDown)
		require.ErrorContains(t, err, "name a key of agent billing: make its secret")
		old.down.Store(false)
		before, err := flow.NewNamer(s, "billing", old).Name(ctx, "customer-42")
		require.NoError(t, err)
		require.Equal(t, int32(1), old.made.Load(), "made when KMS answered")

		newKey := keyOf(t, c, "new")
		const instances = 4
		names, errs := make([]string, instances), make([]error, instances)
		var wg sync.WaitGroup
		for i := range instances {
			wg.Add(1)
			go func() {
				defer wg.Done()
				names[i], errs[i] = flow.NewNamer(s, "billing", &secrets{Sealer: seal.New(c, newKey)}).Name(ctx, "customer-42")
			}()
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		require.NotEqual(t, before, names[0], "named under a new secret")
		for i := range names {
			require.Equal(t, names[0], names[i], "instance %d under the new key", i)
		}
		// An instance still under the old key (its deploy not yet rolled
		// out) finds a secret that is not its key's: it makes its own
		// again, and the new key's instances theirs, until the rollout
		// ends. Each is told its own secret, and none fails.
		_, err = flow.NewNamer(s, "billing", old).Name(ctx, "customer-42")
		require.NoError(t, err)
		after, err := flow.NewNamer(s, "billing", &secrets{Sealer: seal.New(c, newKey)}).Name(ctx, "customer-42")
		require.NoError(t, err)
		require.NotEqual(t, before, after)
		require.NotEqual(t, names[0], after, "made anew again once the old key's instance had replaced it")
	})
}
