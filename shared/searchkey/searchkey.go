// Package searchkey names an order's values of its workflow's searchable
// fields (workflow.Definition.Search) as the state store's index keeps
// them: by the value (keyname.ShortKey: a long one by its SHA-256), or, in
// a deployment that seals its orders' data, by its HMAC under a secret of
// the deployment's own (a keyname.Namer's, as a perKey key's name), so that
// no searchable value sits in clear and equality search still works. It is
// the one door both the writer (Submission) and the reader (the operator's
// search) go through.
package searchkey

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sas-go/sas/shared/keyname"
	"github.com/sas-go/sas/shared/workflow"
)

// Owner is the keyname agent whose secret names the searchable values: no
// agent is named so (an agent's name starts with a letter), so its secret
// is no agent's.
const Owner = "~search"

// Namer names a value under the deployment's search secret (a
// keyname.Namer of Owner).
type Namer interface {
	Name(ctx context.Context, value string) (string, error)
}

// NewNamer is the namer of a deployment that seals its orders' data.
func NewNamer(db keyname.DB, stateTable string, secrets keyname.Secrets) *keyname.Namer {
	return keyname.NewNamer(db, stateTable, Owner, secrets)
}

// Names are order's values of def's searchable fields, by field, each as
// kept: named by n (nil: the value itself, keyname.ShortKey).
func Names(ctx context.Context, def workflow.Definition, order json.RawMessage, n Namer) (map[string]string, error) {
	values := def.SearchValues(order)
	if len(values) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(values))
	for field, v := range values {
		if n == nil {
			out[field] = keyname.ShortKey(v)
			continue
		}
		name, err := n.Name(ctx, v)
		if err != nil {
			return nil, fmt.Errorf("name searchable field %s: %w", field, err)
		}
		out[field] = name
	}
	return out, nil
}

// Lookup is every name value may be kept under: itself (an order submitted
// while the deployment did not seal), and, given secrets (nil: none), its
// HMAC under each search secret the deployment kept (one per KMS key it
// sealed under), read from the state table stateTable.
func Lookup(ctx context.Context, db keyname.Querier, stateTable string, secrets keyname.Opener, value string) ([]string, error) {
	names := []string{keyname.ShortKey(value)}
	if secrets == nil {
		return names, nil
	}
	sealed, err := keyname.EveryName(ctx, db, stateTable, Owner, secrets, value)
	if err != nil {
		return nil, fmt.Errorf("look up a searchable value: %w", err)
	}
	return append(names, sealed...), nil
}
