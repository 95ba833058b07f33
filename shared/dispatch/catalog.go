package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sas-go/sas/shared/message"
	"github.com/sas-go/sas/shared/statestore"
	"github.com/sas-go/sas/shared/workflow"
)

// DefinitionReader reads back a version of a workflow an order ran or runs.
type DefinitionReader interface {
	VersionDefinition(ctx context.Context, orderID, name, version string) (workflow.Definition, error)
}

// Catalog finds the definition an order runs: the deployment's workflow of
// that name and version, or, for an order that started under a version the
// deployment no longer runs, the one its records hold (read once per version
// and kept). An order keeps the definition it started with.
type Catalog struct {
	Workflows workflow.Set
	Store     DefinitionReader

	mu   sync.Mutex
	read map[string]workflow.Definition // by name@version, read back from orders
}

// maxRead bounds the versions read back and kept.
const maxRead = 64

// For returns the definition of the order's workflow name at version ("":
// the deployment's, for a message sent before versions were carried).
func (c *Catalog) For(ctx context.Context, orderID, name, version string) (workflow.Definition, error) {
	if d, ok := c.Workflows.Get(name); ok && (version == "" || d.Version == version) {
		return d, nil
	}
	key := name + "@" + version
	c.mu.Lock()
	d, ok := c.read[key]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := c.Store.VersionDefinition(ctx, orderID, name, version)
	if errors.Is(err, statestore.ErrNotFound) {
		return d, message.Invalid("order %s (workflow %q) is not stored", orderID, name)
	}
	if err != nil {
		return d, fmt.Errorf("workflow %s of order %s: %w", key, orderID, err)
	}
	if d.PickupTimeout <= 0 { // stored before the pickup timeout was kept
		d.PickupTimeout = workflow.DefaultPickupTimeout
	}
	if version == "" {
		return d, nil // no version to share it by: each order's own, read each time
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read == nil || len(c.read) >= maxRead {
		c.read = map[string]workflow.Definition{}
	}
	c.read[key] = d
	return d, nil
}
