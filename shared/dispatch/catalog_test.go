package dispatch_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/dispatch"
	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// stored answers each order's definition as its records hold it.
type stored struct {
	mu    sync.Mutex
	defs  map[string]workflow.Definition
	reads int
}

func (s *stored) VersionDefinition(_ context.Context, orderID, _, version string) (workflow.Definition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	d, ok := s.defs[orderID]
	if !ok {
		return d, statestore.ErrNotFound
	}
	if version != "" && d.Version != version {
		return d, errors.New("another version") // the store reads the version asked for (storetest)
	}
	return d, nil
}

// An order runs the definition it started with: the deployment's when its
// version is the one running, else the one its records hold, read once per
// version; a message without a version for a workflow no longer run reads
// its own order's, never another's.
func TestCatalogGivesEachOrderTheDefinitionItStartedWith(t *testing.T) {
	t.Parallel()
	now := workflow.MustExample(workflow.OrderWorkflow)
	old := now.With(workflow.Settings{StepTimeout: 7e9}) // another version of it
	single := workflow.MustExample(workflow.SingleWorkflow)
	single2 := single.With(workflow.Settings{MaxFailures: 9})
	st := &stored{defs: map[string]workflow.Definition{"o-old-1": old, "o-old-2": old, "s-1": single, "s-2": single2}}
	c := &dispatch.Catalog{Workflows: workflow.MustSet(now), Store: st}
	ctx := context.Background()

	d, err := c.For(ctx, "o-new", now.Name, now.Version)
	require.NoError(t, err)
	require.Equal(t, now.Version, d.Version)
	require.Zero(t, st.reads, "the running version is not read")

	for _, id := range []string{"o-old-1", "o-old-2"} {
		d, err = c.For(ctx, id, old.Name, old.Version)
		require.NoError(t, err)
		require.Equal(t, old.Version, d.Version, id)
	}
	require.Equal(t, 1, st.reads, "an old version is read once and kept")

	for id, want := range map[string]workflow.Definition{"s-1": single, "s-2": single2} {
		d, err = c.For(ctx, id, single.Name, "")
		require.NoError(t, err)
		require.Equal(t, want.Version, d.Version, "%s runs its own definition", id)
	}

	_, err = c.For(ctx, "o-gone", "returns", "v1")
	require.True(t, message.IsInvalid(err), "an order not stored is an invalid message: %v", err)
}
