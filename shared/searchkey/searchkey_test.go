package searchkey_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/searchkey"
	"github.com/sas-go/sas/shared/workflow"
)

// upper names a value by upper-casing it, or fails.
type upper struct{ err error }

func (u upper) Name(_ context.Context, v string) (string, error) { return strings.ToUpper(v), u.err }

// Without a namer a value is kept as it is, a long one as its hash; with
// one, by its name, and a namer's failure is the submission's.
func TestNamesAreTheValuesOrTheirNames(t *testing.T) {
	t.Parallel()
	d := workflow.Definition{Search: []string{"customerId", "note"}}
	long := strings.Repeat("x", keyname.MaxKeyBytes+1)
	order := json.RawMessage(`{"customerId":"c-1","note":"` + long + `"}`)
	got, err := searchkey.Names(t.Context(), d, order, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"customerId": "c-1", "note": keyname.ShortKey(long)}, got)
	require.True(t, strings.HasPrefix(got["note"], "sha256:"))

	got, err = searchkey.Names(t.Context(), d, order, upper{})
	require.NoError(t, err)
	require.Equal(t, "C-1", got["customerId"])
	_, err = searchkey.Names(t.Context(), d, order, upper{err: errors.New("kms down")})
	require.ErrorContains(t, err, "kms down")

	none, err := searchkey.Names(t.Context(), workflow.Definition{}, order, nil)
	require.NoError(t, err)
	require.Nil(t, none, "a workflow with no searchable field keeps none")
}

// With no secrets to read, a value is looked up as it is only.
func TestLookupWithoutSecretsIsTheValue(t *testing.T) {
	t.Parallel()
	names, err := searchkey.Lookup(t.Context(), nil, "", nil, "c-1")
	require.NoError(t, err)
	require.Equal(t, []string{"c-1"}, names)
}
